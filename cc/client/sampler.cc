#include "cc/client/sampler.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cc/client/local_sample_stream.h"
#include "cc/client/sample_stream.h"
#include "cc/support/buffer_pool.h"
#include "cc/support/mutex.h"
#include "cc/support/status_macros.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {
namespace {

// What unpacking `sample` decompresses: the uncompressed bytes of its
// chunks.
int64_t ChunkBytes(const PackedSample& sample) {
  int64_t bytes = 0;
  for (const ChunkData* chunk : sample.chunks) {
    bytes += chunk->data_uncompressed_size();
  }
  return bytes;
}

}  // namespace

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
  if (options.max_in_flight_bytes_per_worker < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_in_flight_bytes_per_worker (",
        options.max_in_flight_bytes_per_worker, ") must be >= 0."));
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
      window_(options.max_in_flight_samples_per_worker),
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

bool Sampler::PopReadyLocked(Slot* slot) {
  if (queue_.empty() || !queue_.front().ready) return false;
  if (2 * static_cast<int64_t>(queue_.size()) >= CapacityLocked()) {
    backlogged_ = true;
  }
  *slot = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

void Sampler::FailForGood(const absl::Status& status) {
  MutexLock lock(&mu_);
  FailForGoodLocked(status);
}

void Sampler::FailForGoodLocked(const absl::Status& status) {
  if (error_.ok()) error_ = status;
  unpack_failed_ = true;
}

bool Sampler::UnpackSlot(Slot* slot) {
  if (slot->packed.has_value()) {
    slot->sample = UnpackSample(*std::move(slot->packed));
    slot->packed.reset();
    if (!slot->sample.ok()) FailForGood(slot->sample.status());
  }
  return slot->sample.ok();
}

absl::StatusOr<Sampler::Slot> Sampler::GetNextSlot(absl::Time deadline) {
  MutexLock lock(&mu_);
  // Samples that arrived come before errors, in their order.
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closed_ || unpack_failed_) return true;
    if (!queue_.empty()) return queue_.front().ready;
    return !error_.ok() || workers_running_ == 0;
  };
  if (queue_.empty()) starved_ = true;
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  // Samples still queued are dropped.
  if (closed_) return absl::CancelledError("The sampler is closed.");
  if (unpack_failed_) return error_;
  Slot slot;
  if (PopReadyLocked(&slot)) {
    // A sample that cannot be unpacked fails the sampler for good.
    if (!slot.sample.ok() && !slot.packed.has_value()) {
      FailForGoodLocked(slot.sample.status());
      return slot.sample.status();
    }
    return slot;
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

absl::StatusOr<Sample> Sampler::GetNextSample(absl::Duration timeout) {
  REVERB_ASSIGN_OR_RETURN(Slot slot, GetNextSlot(absl::Now() + timeout));
  UnpackSlot(&slot);
  return std::move(slot.sample);
}

absl::StatusOr<std::vector<Sampler::Slot>> Sampler::GetNextSlots(
    int batch_size, absl::Duration timeout, absl::Duration fill_timeout) {
  absl::Time deadline = absl::Now() + timeout;
  std::vector<Slot> slots;
  slots.reserve(batch_size);
  while (static_cast<int>(slots.size()) < batch_size) {
    if (slots.size() == 1) {
      deadline = std::min(deadline, absl::Now() + fill_timeout);
    }
    auto slot = GetNextSlot(deadline);
    if (!slot.ok()) {
      // Samples already taken are never dropped: the error comes again on
      // the next call.
      if (!slots.empty()) break;
      return slot.status();
    }
    slots.push_back(*std::move(slot));
  }
  return slots;
}

absl::StatusOr<std::vector<Sample>> Sampler::GetNextBatch(
    int batch_size, absl::Duration timeout, absl::Duration fill_timeout) {
  REVERB_ASSIGN_OR_RETURN(std::vector<Slot> slots,
                          GetNextSlots(batch_size, timeout, fill_timeout));
  std::vector<Sample> batch;
  batch.reserve(slots.size());
  for (Slot& slot : slots) {
    if (!UnpackSlot(&slot)) {
      if (batch.empty()) return slot.sample.status();
      break;  // As a sample that failed in the queue: its error comes next.
    }
    batch.push_back(*std::move(slot.sample));
  }
  return batch;
}

absl::StatusOr<StackedBatch> Sampler::GetNextStackedBatch(
    int batch_size, absl::Duration timeout, absl::Duration fill_timeout) {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size (", batch_size, ") must be >= 1."));
  }
  REVERB_ASSIGN_OR_RETURN(std::vector<Slot> slots,
                          GetNextSlots(batch_size, timeout, fill_timeout));
  // The samples' column shapes, read from the headers of those still
  // packed, must be the first's. One that does not fit UnpackSampleInto is
  // unpacked here; one that cannot be unpacked ends the batch before it
  // (its error comes with the next call), as in GetNextBatch.
  std::vector<ColumnShape> row;
  std::vector<ColumnShape> shapes;  // Of the sample at hand, reused.
  absl::Status mismatch;
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    std::vector<ColumnShape>& sample_shapes = i == 0 ? row : shapes;
    if (!slot.packed.has_value() ||
        !PackedColumnShapes(*slot.packed, &sample_shapes)) {
      if (slot.packed.has_value() && !UnpackSlot(&slot)) {
        if (i == 0) return slot.sample.status();
        slots.resize(i);
        break;
      }
      sample_shapes.clear();
      for (const Tensor& column : slot.sample->columns) {
        sample_shapes.push_back({column.dtype, column.shape});
      }
    }
    if (i == 0 || !mismatch.ok()) continue;
    if (shapes.size() != row.size()) {
      mismatch = absl::InvalidArgumentError(
          "Samples of a batch have different numbers of columns.");
      continue;
    }
    for (size_t c = 0; c < row.size(); ++c) {
      if (shapes[c] == row[c]) continue;
      auto describe = [](const ColumnShape& shape) {
        TensorView view;
        view.dtype = shape.dtype;
        view.shape.assign(shape.shape.begin(), shape.shape.end());
        return DescribeTensor(view);
      };
      mismatch = absl::InvalidArgumentError(absl::StrCat(
          "Cannot batch column ", c,
          " (use batch_size=1 for trajectories of different lengths): "
          "Cannot stack tensors of different shapes: ",
          describe(row[c]), " and ", describe(shapes[c]), "."));
      break;
    }
  }
  REVERB_RETURN_IF_ERROR(mismatch);
  const size_t n = slots.size();
  StackedBatch batch;
  batch.infos.reserve(n);
  batch.columns.resize(row.size());
  for (size_t c = 0; c < row.size(); ++c) {
    Tensor& column = batch.columns[c];
    column.dtype = row[c].dtype;
    column.shape = row[c].shape;
    column.shape.insert(column.shape.begin(), static_cast<int64_t>(n));
    if (column.IsString()) {
      column.strings.resize(column.NumElements());
    } else {
      const size_t bytes = column.NumElements() * *DataTypeSize(column.dtype);
      column.bytes = BufferPool::Default().Take(bytes);
    }
  }
  // Unpacked samples are copied into their rows; packed ones are
  // decompressed into theirs, the large ones in parallel.
  std::vector<size_t> packed;
  std::vector<size_t> small;
  for (size_t i = 0; i < n; ++i) {
    Slot& slot = slots[i];
    if (slot.packed.has_value()) {
      batch.infos.push_back(slot.packed->info);
      (ChunkBytes(*slot.packed) < kMinBytesToHandOff ? small : packed)
          .push_back(i);
      continue;
    }
    Sample& sample = *slot.sample;
    batch.infos.push_back(sample.info);
    for (size_t c = 0; c < row.size(); ++c) {
      Tensor& column = batch.columns[c];
      Tensor& cell = sample.columns[c];
      if (column.IsString()) {
        std::move(cell.strings.begin(), cell.strings.end(),
                  column.strings.begin() + i * cell.strings.size());
      } else {
        std::memcpy(column.bytes.data() + i * cell.bytes.size(),
                    cell.bytes.data(), cell.bytes.size());
      }
    }
    RecycleSample(&sample);
  }
  std::vector<absl::Status> unpacked(n);
  auto unpack = [&](absl::Span<const size_t> rows) {
    for (size_t i : rows) {
      unpacked[i] =
          UnpackSampleInto(*slots[i].packed, i, absl::MakeSpan(batch.columns));
    }
  };
  auto part_of = [&](size_t part, size_t parts) {
    return absl::MakeConstSpan(packed).subspan(
        packed.size() * part / parts,
        packed.size() * (part + 1) / parts - packed.size() * part / parts);
  };
  // The small ones here, the others in parts, one for this thread.
  const size_t parts =
      std::min(packed.size(), static_cast<size_t>(kUnpackThreads) + 1);
  // Shared with the tasks: one may still be unlocking it when the wait
  // below ends.
  struct Parts {
    Mutex mu;
    size_t done ABSL_GUARDED_BY(mu) = 0;
  };
  auto progress = std::make_shared<Parts>();
  for (size_t part = 1; part < parts; ++part) {
    unpacker_.Schedule([&, part, parts, progress] {
      unpack(part_of(part, parts));
      MutexLock lock(&progress->mu);
      ++progress->done;
    });
  }
  unpack(small);
  if (parts > 0) unpack(part_of(0, parts));
  {
    MutexLock lock(&progress->mu);
    auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress->mu) {
      return progress->done + 1 >= parts;
    };
    progress->mu.Await(absl::Condition(&all_done));
  }
  // A sample that could not be unpacked ends the batch before it.
  for (size_t i = 0; i < n; ++i) {
    if (unpacked[i].ok()) continue;
    FailForGood(unpacked[i]);
    if (i == 0) return unpacked[i];
    batch.infos.resize(i);
    for (Tensor& column : batch.columns) {
      const int64_t rows = column.shape[0];
      column.shape[0] = static_cast<int64_t>(i);
      if (column.IsString()) {
        column.strings.resize(column.strings.size() / rows * i);
      } else {
        column.bytes.resize(column.bytes.size() / rows * i);
      }
    }
    break;
  }
  return batch;
}

bool Sampler::AllRequested() const {
  return options_.max_samples >= 0 && requested_ >= options_.max_samples;
}

void Sampler::NoteReceivedLocked(int64_t samples, int64_t bytes) {
  const int64_t budget = options_.max_in_flight_bytes_per_worker;
  if (budget == 0 || samples == 0) return;
  received_samples_ += samples;
  received_bytes_ += bytes;
  // Older samples weigh half as much after every kAverageHorizon samples
  // since: the window follows what the table holds now.
  while (received_samples_ >= 2 * kAverageHorizon) {
    received_samples_ /= 2;
    received_bytes_ /= 2;
  }
  received_since_ += samples;
  if (received_since_ >= window_.load(std::memory_order_relaxed)) {
    if (!warmed_up_) {
      warmed_up_ = true;
    } else if (starved_) {
      growth_ = std::min(2 * growth_, kMaxWindowGrowth);
    } else if (backlogged_) {
      growth_ = std::max(growth_ / 2, kWindowGrowth);
    }
    received_since_ = 0;
    starved_ = false;
    backlogged_ = false;
  }
  const int64_t average =
      std::max<int64_t>(1, received_bytes_ / received_samples_);
  const int64_t least = options_.max_in_flight_samples_per_worker;
  window_.store(std::clamp(budget / average, least, least * growth_),
                std::memory_order_relaxed);
}

int64_t Sampler::CapacityLocked() const {
  return options_.num_workers * window_.load(std::memory_order_relaxed);
}

int64_t Sampler::Reserve(int64_t max, int64_t stream_left, bool wait) {
  MutexLock lock(&mu_);
  auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || AllRequested() ||
           static_cast<int64_t>(queue_.size()) + reserved_ < CapacityLocked();
  };
  if (wait) mu_.Await(absl::Condition(&room));
  if (closed_ || AllRequested() || !room()) return 0;
  int64_t n = std::min(
      max, CapacityLocked() - static_cast<int64_t>(queue_.size()) - reserved_);
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
  absl::Status status;
  int64_t stream_requested = 0;
  // Samples received, not queued yet (small ones unpacked here, or any left
  // packed without unpack_ahead), and their bytes. Small ones wait to be
  // queued together.
  std::vector<Slot> pending;
  int64_t pending_bytes = 0;
  auto queue_pending = [&] {
    if (pending.empty()) return;
    MutexLock lock(&mu_);
    NoteReceivedLocked(static_cast<int64_t>(pending.size()), pending_bytes);
    pending_bytes = 0;
    reserved_ -= static_cast<int64_t>(pending.size());
    for (Slot& slot : pending) queue_.push_back(std::move(slot));
    pending.clear();
  };
  while (status.ok()) {
    const int64_t window = window_.load(std::memory_order_relaxed);
    const int64_t outstanding = stream.outstanding();
    const int64_t stream_left =
        options_.max_samples_per_stream < 0
            ? -1
            : options_.max_samples_per_stream - stream_requested;
    if (outstanding <= window / 2 && stream_left != 0) {
      // Nothing in flight: wait for room (with nothing held back).
      if (outstanding == 0) queue_pending();
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
    // A sample read from a response received before came with the sample
    // that read it: the time (a clock read per sample showed in profiles
    // of small samples) is taken once per response.
    const bool receives = !stream.has_buffered_entries();
    auto packed = stream.ReadPacked();
    if (!packed.ok()) {
      status = packed.status();
      break;
    }
    ++*delivered;
    if (receives) *progress = absl::Now();
    const int64_t bytes = ChunkBytes(*packed);
    const bool small = bytes < kMinBytesToHandOff;
    if (small || !options_.unpack_ahead) {
      if (options_.unpack_ahead) {
        pending.push_back(
            {UnpackSample(*std::move(packed)), std::nullopt, true});
      } else {
        pending.push_back({absl::StatusOr<Sample>(), *std::move(packed), true});
      }
      pending_bytes += bytes;
      if (!small || !stream.has_buffered_entries() ||
          static_cast<int>(pending.size()) >= kMaxQueuedTogether) {
        queue_pending();
      }
      continue;
    }
    queue_pending();  // They come first.
    Slot* slot;
    {
      MutexLock lock(&mu_);
      NoteReceivedLocked(1, bytes);
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
  queue_pending();
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
