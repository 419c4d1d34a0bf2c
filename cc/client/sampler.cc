#include "cc/client/sampler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cc/client/local_sample_stream.h"
#include "cc/client/sample_stream.h"
#include "cc/support/mutex.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {

absl::StatusOr<std::unique_ptr<Sampler>> Sampler::Create(
    std::shared_ptr<const Connection> connection, std::string table,
    const SamplerOptions& options) {
  return Create(
      [connection = std::move(connection), table = std::move(table)]()
          -> absl::StatusOr<std::unique_ptr<SampleStreamInterface>> {
        // Short waits, so that Close() is not held up; RunWorker retries.
        constexpr absl::Duration kWait = absl::Milliseconds(250);
        REVERB_RETURN_IF_ERROR(connection->WaitForConnection(kWait));
        if (auto local = connection->LocalTable(table, kWait)) {
          return std::make_unique<LocalSampleStream>(std::move(local));
        }
        return std::make_unique<SampleStream>(connection, table);
      },
      options);
}

absl::StatusOr<std::unique_ptr<Sampler>> Sampler::Create(
    OpenStream open_stream, const SamplerOptions& options) {
  auto check = [](const char* name, int64_t value) {
    return value == -1 || value >= 1
               ? absl::OkStatus()
               : absl::InvalidArgumentError(
                     absl::StrCat(name, " (", value, ") must be -1 or >= 1."));
  };
  for (auto status :
       {check("max_samples", options.max_samples),
        check("max_samples_per_stream", options.max_samples_per_stream)}) {
    if (!status.ok()) return status;
  }
  if (options.max_in_flight_samples_per_worker < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_in_flight_samples_per_worker (",
        options.max_in_flight_samples_per_worker, ") must be >= 1."));
  }
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers (", options.num_workers, ") must be >= 1."));
  }
  return std::unique_ptr<Sampler>(new Sampler(std::move(open_stream), options));
}

Sampler::Sampler(OpenStream open_stream, const SamplerOptions& options)
    : open_stream_(std::move(open_stream)),
      options_(options),
      capacity_(options.num_workers * options.max_in_flight_samples_per_worker),
      streams_(options.num_workers, nullptr) {
  MutexLock lock(&mu_);
  workers_running_ = options.num_workers;
  for (int i = 0; i < options.num_workers; ++i) {
    workers_.emplace_back([this, i] { RunWorker(i); });
    SetThreadName(workers_.back(), "reverb-sampler");
  }
}

Sampler::~Sampler() { Close(); }

void Sampler::Close() {
  {
    MutexLock lock(&mu_);
    closed_ = true;
    for (SampleStreamInterface* stream : streams_) {
      if (stream != nullptr) stream->Cancel();
    }
  }
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

absl::Status Sampler::error() const {
  MutexLock lock(&mu_);
  return error_;
}

bool Sampler::PopReadyLocked(absl::StatusOr<Sample>* sample) {
  if (queue_.empty() || !queue_.front().ready) return false;
  *sample = std::move(queue_.front().sample);
  queue_.pop_front();
  return true;
}

absl::StatusOr<Sample> Sampler::GetNextSample(absl::Duration timeout) {
  MutexLock lock(&mu_);
  // Samples that arrived come before errors, in their order.
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closed_ || unpack_failed_) return true;
    if (!queue_.empty()) return queue_.front().ready;
    return !error_.ok() || workers_running_ == 0;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  // Samples still queued are dropped.
  if (closed_) return absl::CancelledError("The sampler is closed.");
  if (unpack_failed_) return error_;
  absl::StatusOr<Sample> sample;
  if (PopReadyLocked(&sample)) {
    // A sample that cannot be unpacked fails the sampler for good.
    if (!sample.ok()) {
      if (error_.ok()) error_ = sample.status();
      unpack_failed_ = true;
    }
    return sample;
  }
  if (!error_.ok()) return error_;
  if (workers_running_ == 0) {
    return absl::OutOfRangeError(
        absl::StrCat("The sampler has returned all its ", options_.max_samples,
                     " samples."));
  }
  return absl::DeadlineExceededError(
      "Timeout exceeded before a sample arrived.");
}

absl::StatusOr<std::vector<Sample>> Sampler::GetNextBatch(
    int batch_size, absl::Duration timeout, absl::Duration fill_timeout) {
  absl::Time deadline = absl::Now() + timeout;
  std::vector<Sample> batch;
  batch.reserve(batch_size);
  while (static_cast<int>(batch.size()) < batch_size) {
    if (batch.size() == 1) {
      deadline = std::min(deadline, absl::Now() + fill_timeout);
    }
    auto sample = GetNextSample(deadline - absl::Now());
    if (!sample.ok()) {
      // Samples already taken are never dropped: the error comes again on
      // the next call.
      if (!batch.empty()) break;
      return sample.status();
    }
    batch.push_back(*std::move(sample));
  }
  return batch;
}

bool Sampler::AllRequested() const {
  return options_.max_samples >= 0 && requested_ >= options_.max_samples;
}

int64_t Sampler::Reserve(int64_t max, int64_t stream_left, bool wait) {
  MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || AllRequested() ||
           static_cast<int64_t>(queue_.size()) + reserved_ < capacity_;
  };
  if (wait) mu_.Await(absl::Condition(&room));
  if (closed_ || AllRequested() || !room()) return 0;
  int64_t n = std::min(
      max, capacity_ - static_cast<int64_t>(queue_.size()) - reserved_);
  if (options_.max_samples >= 0)
    n = std::min(n, options_.max_samples - requested_);
  if (stream_left >= 0) n = std::min(n, stream_left);
  reserved_ += n;
  requested_ += n;
  return n;
}

void Sampler::Unreserve(int64_t n) {
  MutexLock lock(&mu_);
  reserved_ -= n;
  requested_ -= n;
}

absl::Status Sampler::RunStream(int index, int64_t* delivered,
                                absl::Time* progress) {
  REVERB_ASSIGN_OR_RETURN(std::unique_ptr<SampleStreamInterface> opened,
                          open_stream_());
  SampleStreamInterface& stream = *opened;
  {
    MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError("The sampler is closed.");
    streams_[index] = &stream;
  }
  const int64_t window = options_.max_in_flight_samples_per_worker;
  absl::Status status;
  int64_t stream_requested = 0;
  // Small samples unpacked here, not queued yet.
  std::vector<absl::StatusOr<Sample>> unpacked;
  auto queue_unpacked = [&] {
    if (unpacked.empty()) return;
    MutexLock lock(&mu_);
    reserved_ -= static_cast<int64_t>(unpacked.size());
    for (auto& sample : unpacked) queue_.push_back({std::move(sample), true});
    unpacked.clear();
  };
  while (status.ok()) {
    const int64_t outstanding = stream.outstanding();
    const int64_t stream_left =
        options_.max_samples_per_stream < 0
            ? -1
            : options_.max_samples_per_stream - stream_requested;
    if (outstanding <= window / 2 && stream_left != 0) {
      // Nothing in flight: wait for room (with nothing held back).
      if (outstanding == 0) queue_unpacked();
      const int64_t n =
          Reserve(window - outstanding, stream_left, outstanding == 0);
      if (n > 0) {
        *progress = absl::Now();
        status = stream.Request(n, options_.rate_limiter_timeout);
        if (!status.ok()) {
          Unreserve(n);
          break;
        }
        stream_requested += n;
      }
    }
    if (stream.outstanding() == 0) break;
    auto packed = stream.ReadPacked();
    if (!packed.ok()) {
      status = packed.status();
      break;
    }
    ++*delivered;
    *progress = absl::Now();
    int64_t bytes = 0;
    for (const ChunkData* chunk : packed->chunks) {
      bytes += chunk->data_uncompressed_size();
    }
    if (bytes < kMinBytesToHandOff) {
      unpacked.push_back(UnpackSample(*std::move(packed)));
      if (!stream.has_buffered_entries() ||
          static_cast<int>(unpacked.size()) >= kMaxQueuedTogether) {
        queue_unpacked();
      }
      continue;
    }
    queue_unpacked();  // They come first.
    Slot* slot;
    {
      MutexLock lock(&mu_);
      --reserved_;
      slot = &queue_.emplace_back();
    }
    unpacker_.Schedule(
        [this, slot,
         packed = std::make_shared<PackedSample>(*std::move(packed))] {
          absl::StatusOr<Sample> sample = UnpackSample(std::move(*packed));
          MutexLock lock(&mu_);
          slot->sample = std::move(sample);
          slot->ready = true;
        });
  }
  queue_unpacked();
  Unreserve(stream.outstanding());  // Requested, never received.
  if (status.ok()) status = stream.Close();
  MutexLock lock(&mu_);
  streams_[index] = nullptr;
  return status;
}

void Sampler::RunWorker(int index) {
  // With a rate limiter timeout, the wait it bounds (since the last request
  // or sample) ends the reconnects too.
  const absl::Duration timeout = options_.rate_limiter_timeout;
  const absl::Duration wait_bound =
      timeout > absl::ZeroDuration() ? timeout : absl::InfiniteDuration();
  absl::Time progress = absl::Now();
  absl::Time failing_since = absl::InfiniteFuture();
  absl::Time give_up = absl::InfiniteFuture();
  absl::Duration backoff = absl::Milliseconds(1);
  absl::Status final_status;
  while (true) {
    int64_t delivered = 0;
    absl::Status status = RunStream(index, &delivered, &progress);
    MutexLock lock(&mu_);
    if (closed_) break;
    if (status.ok()) {
      if (AllRequested()) break;
      continue;
    }
    // CANCELLED here comes from the server (it cancels its streams when it
    // stops): the end, as in dm-reverb, not a reason to wait for it.
    if (!absl::IsUnavailable(status)) {
      final_status = status;
      break;
    }
    const absl::Time now = absl::Now();
    if (delivered > 0 || failing_since == absl::InfiniteFuture()) {
      failing_since = now;
      give_up =
          std::min(now + options_.reconnect_window, progress + wait_bound);
      backoff = absl::Milliseconds(1);
    }
    if (now >= give_up) {
      final_status = status;
      break;
    }
    mu_.AwaitWithTimeout(absl::Condition(&closed_),
                         std::min(backoff, give_up - now));
    backoff = std::min(2 * backoff, absl::Seconds(1));
  }
  MutexLock lock(&mu_);
  if (error_.ok()) error_ = final_status;
  --workers_running_;
}

}  // namespace deepmind::reverb
