// ByteBudget: bytes that several holders keep, under a limit per holder and
// a limit on all of them together.
//
// Each holder has an Account with a limit of its own. Account::Add(n) takes
// n bytes when both the account and the budget stay within their limits;
// otherwise it takes nothing and answers RESOURCE_EXHAUSTED naming the limit
// it would pass (by the names given at construction), its value and what is
// held. Release gives bytes back; an account gives back all it holds when
// destroyed. A limit <= 0 means no limit.
//
// Thread-safe: the budget's total is updated atomically (accounts on many
// threads share it); one account is used by one thread at a time.
#ifndef REVERB_CC_SUPPORT_BYTE_BUDGET_H_
#define REVERB_CC_SUPPORT_BYTE_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

class REVERB_EXPORT ByteBudget {
 public:
  ByteBudget(int64_t limit, std::string limit_name);
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  int64_t limit() const { return limit_; }
  // Bytes all accounts hold together.
  int64_t held() const { return held_.load(std::memory_order_relaxed); }

  class REVERB_EXPORT Account {
   public:
    // `budget` must outlive the account.
    Account(ByteBudget* budget, int64_t limit, std::string limit_name);
    Account(const Account&) = delete;
    Account& operator=(const Account&) = delete;
    ~Account() { ReleaseAll(); }

    // Takes `bytes` (>= 0) or, beyond a limit, nothing (see above).
    absl::Status Add(int64_t bytes);
    // Gives back `bytes` of those held.
    void Release(int64_t bytes);
    void ReleaseAll() { Release(held_); }

    int64_t held() const { return held_; }
    int64_t limit() const { return limit_; }

   private:
    ByteBudget* const budget_;
    const int64_t limit_;
    const std::string limit_name_;
    int64_t held_ = 0;
  };

 private:
  const int64_t limit_;
  const std::string limit_name_;
  std::atomic<int64_t> held_{0};
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_BYTE_BUDGET_H_
