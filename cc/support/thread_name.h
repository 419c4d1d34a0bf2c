// Names for our threads, as `top -H`, `ps -L`, py-spy and debuggers show
// them, so that a profile of a process that runs Reverb tells its threads
// apart ("reverb-table", "reverb-writer", ...).
#ifndef REVERB_CC_SUPPORT_THREAD_NAME_H_
#define REVERB_CC_SUPPORT_THREAD_NAME_H_

#include <pthread.h>

#include <string>
#include <thread>

namespace deepmind::reverb {

// Names `thread` (by its creator, so the name is set once this returns);
// Linux keeps the first 15 characters.
inline void SetThreadName(std::thread& thread, const std::string& name) {
  pthread_setname_np(thread.native_handle(), name.substr(0, 15).c_str());
}

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_THREAD_NAME_H_
