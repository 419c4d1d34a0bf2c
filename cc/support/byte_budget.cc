#include "cc/support/byte_budget.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace deepmind::reverb {
namespace {

absl::Status Exhausted(const std::string& limit_name, int64_t limit,
                       int64_t held, int64_t bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat(limit_name, " (", limit, " bytes) would be exceeded: ", held,
                   " bytes held, ", bytes, " more asked for"));
}

}  // namespace

ByteBudget::ByteBudget(int64_t limit, std::string limit_name)
    : limit_(limit), limit_name_(std::move(limit_name)) {}

ByteBudget::Account::Account(ByteBudget* budget, int64_t limit,
                             std::string limit_name)
    : budget_(budget), limit_(limit), limit_name_(std::move(limit_name)) {}

absl::Status ByteBudget::Account::Add(int64_t bytes) {
  if (limit_ > 0 && held_ + bytes > limit_) {
    return Exhausted(limit_name_, limit_, held_, bytes);
  }
  int64_t total = budget_->held_.load(std::memory_order_relaxed);
  do {
    if (budget_->limit_ > 0 && total + bytes > budget_->limit_) {
      return Exhausted(budget_->limit_name_, budget_->limit_, total, bytes);
    }
  } while (!budget_->held_.compare_exchange_weak(total, total + bytes,
                                                 std::memory_order_relaxed));
  held_ += bytes;
  return absl::OkStatus();
}

void ByteBudget::Account::Release(int64_t bytes) {
  held_ -= bytes;
  budget_->held_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace deepmind::reverb
