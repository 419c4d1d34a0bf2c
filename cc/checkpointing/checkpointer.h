// Checkpointer: saves all tables of a server to a directory and restores
// them, in dm-reverb's checkpoint layout.
//
// A checkpoint is a directory `<root_dir>/<UTC time, RFC 3339>` holding
//   tables.tfrecord  one PriorityTableCheckpoint per table,
//   items.tfrecord   every item (PrioritizedItem), grouped by table, in
//                    insertion order,
//   chunks.tfrecord  every chunk the items reference, once,
//   DONE             empty; marks the checkpoint complete.
// Files are ZLIB-compressed TFRecords (record_io.h), so dm-reverb reads
// ours and we read its.
//
// Beyond dm-reverb:
//  - a save writes into a hidden directory and renames it into place once
//    complete (files fsynced), so a crash or a full disk never leaves a
//    half-written checkpoint that looks complete, and never touches the
//    previous ones;
//  - every record is checksummed; a corrupt file is reported by name and
//    LoadLatest falls back to the next older complete checkpoint;
//  - each table's lock is held only while its snapshot is taken; inserts
//    and samples go on while the files are written;
//  - for crash tests, the environment variable REVERB_CHECKPOINT_STOP_AT
//    (started, tables, items, chunk, done or renamed) makes Save stop its
//    process (SIGSTOP) at that point: after creating the hidden directory,
//    after each file, after the first chunk, before and after the rename;
//  - loading can keep the server's table options (max_size, selectors,
//    rate limiter settings) instead of the checkpoint's (see Table::Restore).
#ifndef REVERB_CC_CHECKPOINTING_CHECKPOINTER_H_
#define REVERB_CC_CHECKPOINTING_CHECKPOINTER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cc/checkpointing/save_progress.h"
#include "cc/core/table.h"
#include "cc/support/export.h"
#include "cc/support/mutex.h"

namespace deepmind::reverb {

struct CheckpointerOptions {
  // Complete checkpoints kept in root_dir after a save (older ones go).
  int keep_latest = 1;
  // zlib level of the files, 0 (stored, fastest) to 9; the format allows
  // any. Files are always zlib streams (as dm-reverb writes them). Chunks
  // are snappy-compressed already, so 0 loses little space and saves most
  // of the time.
  int zlib_level = 0;
  // On load, take table options from the checkpoint (as dm-reverb) or keep
  // the server's.
  bool use_checkpoint_table_options = true;
};

class REVERB_EXPORT Checkpointer {
 public:
  static constexpr char kTablesFile[] = "tables.tfrecord";
  static constexpr char kItemsFile[] = "items.tfrecord";
  static constexpr char kChunksFile[] = "chunks.tfrecord";
  static constexpr char kDoneFile[] = "DONE";

  // `fallback_checkpoint_path`: a checkpoint directory loaded when root_dir
  // has none. A non-empty `group` is not supported (as in OSS dm-reverb).
  Checkpointer(
      std::string root_dir, std::string group = "",
      std::optional<std::string> fallback_checkpoint_path = std::nullopt,
      CheckpointerOptions options = {});

  // Saves every table; returns the absolute path of the new checkpoint.
  // Keeps the newest `options.keep_latest` checkpoints (or `keep_latest` if
  // > 0).
  absl::StatusOr<std::string> Save(
      absl::Span<const std::shared_ptr<Table>> tables, int keep_latest = 0);

  // Restores `tables` from the checkpoint at `path`. Every checkpointed
  // table must be among `tables` (INVALID_ARGUMENT otherwise); others stay
  // empty. Nothing changes unless every file reads back intact (DATA_LOSS
  // naming the file otherwise). If a table refuses its part (options or
  // items it rejects: INVALID_ARGUMENT), the tables restored before it are
  // reset, so that none holds a part of the checkpoint.
  absl::Status Load(const std::string& path,
                    absl::Span<const std::shared_ptr<Table>> tables) const;

  // Loads the newest complete checkpoint of root_dir, skipping (and
  // logging) ones that fail to read. NOT_FOUND if there is none.
  absl::Status LoadLatest(
      absl::Span<const std::shared_ptr<Table>> tables) const;

  // Loads the fallback checkpoint; NOT_FOUND if none is configured or it is
  // not a complete checkpoint.
  absl::Status LoadFallbackCheckpoint(
      absl::Span<const std::shared_ptr<Table>> tables) const;

  // How the saves go (save_progress.h).
  const SaveProgress& save_progress() const { return progress_; }

  const std::string& root_dir() const { return root_dir_; }
  std::string DebugString() const;

 private:
  // Save, once the arguments are checked.
  absl::StatusOr<std::string> SaveLocked(
      absl::Span<const std::shared_ptr<Table>> tables, int keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(save_mu_);
  // Complete checkpoints of root_dir, newest first.
  absl::StatusOr<std::vector<std::string>> ListCheckpoints() const;

  const std::string root_dir_;
  const std::string group_;
  const std::optional<std::string> fallback_checkpoint_path_;
  const CheckpointerOptions options_;
  // One save at a time.
  Mutex save_mu_;
  SaveProgress progress_;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_CHECKPOINTING_CHECKPOINTER_H_
