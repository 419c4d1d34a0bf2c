// LocalSampleStream: samples of a table in this process, taken from it
// directly (the in-process path: the table comes from
// Connection::LocalTable). The contract of each method:
// sample_stream_interface.h; what differs from a SampleStream is only how
// the samples travel.
//
// Read() asks the table, when it holds no sample already taken, for a
// flexible batch (Table::SampleAsync) of up to the samples outstanding:
// 8 at first, twice as many each time after (as dm-reverb's
// LocalSamplerWorker), and waits for it; unlike a server's response, a
// batch is not closed at 1 MB of chunk data (nothing is copied). Each batch
// waits at most the rate-limiter timeout (as the server's SampleStream:
// whole milliseconds, under 1 ms is no timeout); the table's
// DEADLINE_EXCEEDED, or CANCELLED when the table closes (its server stops)
// while a batch waits, ends the stream; a batch asked of a table already
// closed is UNAVAILABLE, as a call to a server that has gone (so that
// callers reopen idle streams). Cancel() withdraws the batch the table
// holds (Table::Cancel), so that it takes no items that would then be lost.
//
// Samples carry the same SampleInfo as over gRPC (the item with its
// current priority and times_sampled, probability, table_size,
// rate_limited) and reference the table's chunks instead of copies: a
// chunk a writer in this process inserted is its ChunkData, shared; one
// that came by gRPC is parsed from its bytes (one copy per sample). The
// infos of kSamplesPerArena samples in a row share one protobuf arena
// (allocated and freed together, as a gRPC response's; freed once all of
// them are gone). The table counts the samples in
// TableInfo.num_local_samples.
//
// Not thread-safe, except Cancel(), which may be called from any thread.
#ifndef REVERB_CC_CLIENT_LOCAL_SAMPLE_STREAM_H_
#define REVERB_CC_CLIENT_LOCAL_SAMPLE_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cc/client/sample.h"
#include "cc/client/sample_stream_interface.h"
#include "cc/core/table.h"
#include "cc/core/table_item.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"
#include "google/protobuf/arena.h"

namespace deepmind::reverb {

class REVERB_EXPORT LocalSampleStream final : public SampleStreamInterface {
 public:
  static constexpr int32_t kInitialBatchSize = 8;
  static constexpr int kSamplesPerArena = 128;

  explicit LocalSampleStream(std::shared_ptr<Table> table);

  LocalSampleStream(const LocalSampleStream&) = delete;
  LocalSampleStream& operator=(const LocalSampleStream&) = delete;

  absl::Status Request(int64_t n, absl::Duration rate_limiter_timeout) override;
  absl::StatusOr<Sample> Read() override;
  using SampleStreamInterface::ReadPacked;
  absl::StatusOr<PackedSample> ReadPacked(
      absl::FunctionRef<void(SampleInfo*)> edit_info) override;
  bool has_buffered_entries() const override { return !taken_.empty(); }
  int64_t outstanding() const override { return outstanding_; }
  bool ok() const override { return status_.ok(); }
  absl::Status Close() override;
  void Cancel() override;

 private:
  // Where the table's callback leaves a batch; shared with the callback.
  struct Delivery {
    Mutex mu;
    CondVar cv;
    std::optional<absl::StatusOr<std::vector<SampledItem>>> result
        ABSL_GUARDED_BY(mu);
  };

  // Takes the next batch from the table, waiting for it.
  absl::Status TakeBatch();
  // Records the stream's final status (the first error wins).
  absl::Status Fail(absl::Status status);

  const std::shared_ptr<Table> table_;
  const Table::Cancellation cancellation_ =
      std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> cancelled_{false};
  absl::Duration timeout_ = absl::InfiniteDuration();
  int32_t next_batch_size_ = kInitialBatchSize;
  std::deque<SampledItem> taken_;  // Sampled, not yet read.
  // Where the next infos go, and how many more may.
  std::shared_ptr<google::protobuf::Arena> arena_;
  int arena_room_ = 0;
  int64_t outstanding_ = 0;
  absl::Status status_;
  bool closed_ = false;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CLIENT_LOCAL_SAMPLE_STREAM_H_
