// TaskExecutor: a fixed pool of threads running closures in FIFO order.
// Its threads carry the given name.
//
// The service uses it to take work off table worker threads: a table
// callback only schedules a closure, the serialization of samples happens
// here. The destructor runs the tasks still queued, then joins.
#ifndef REVERB_CC_SUPPORT_TASK_EXECUTOR_H_
#define REVERB_CC_SUPPORT_TASK_EXECUTOR_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cc/support/mutex.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {

class TaskExecutor {
 public:
  TaskExecutor(int num_threads, const std::string& thread_name) {
    for (int i = 0; i < num_threads; ++i) {
      threads_.emplace_back([this] { Run(); });
      SetThreadName(threads_.back(), thread_name);
    }
  }

  ~TaskExecutor() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (auto& thread : threads_) thread.join();
  }

  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  void Schedule(std::function<void()> task) {
    MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }

  // Returns once no task is queued or running (tasks scheduled meanwhile
  // are waited for too).
  void AwaitIdle() {
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](TaskExecutor* self) {
          return self->tasks_.empty() && self->running_ == 0;
        },
        this));
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> task;
      {
        MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](TaskExecutor* self) {
              return self->stopping_ || !self->tasks_.empty();
            },
            this));
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        ++running_;
      }
      task();
      MutexLock lock(&mu_);
      --running_;
    }
  }

  Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_TASK_EXECUTOR_H_
