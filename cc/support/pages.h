// The memory page: its size, and how many a file or buffer of some size
// takes (shared-memory segments are sized, pooled and mapped in pages).
#ifndef REVERB_CC_SUPPORT_PAGES_H_
#define REVERB_CC_SUPPORT_PAGES_H_

#include <unistd.h>

#include <cstddef>

namespace deepmind::reverb {

inline size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// How many pages `size` bytes take.
inline size_t PagesOf(size_t size) {
  return (size + PageSize() - 1) / PageSize();
}

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_PAGES_H_
