#include "cc/checkpointing/checkpointer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cc/checkpointing/record_io.h"
#include "cc/core/table_item.h"
#include "cc/support/log.h"
#include "cc/support/mutex.h"
#include "cc/support/progress_log.h"
#include "cc/support/quiet_parse.h"
#include "cc/support/status_macros.h"

namespace deepmind::reverb {
namespace {

namespace fs = std::filesystem;

absl::Status FsError(absl::string_view what, const fs::path& path,
                     const std::error_code& error) {
  return absl::InternalError(
      absl::StrCat(what, " ", path.string(), ": ", error.message()));
}

// Test hook: a save stops its own process (SIGSTOP) at the point named by
// the environment variable REVERB_CHECKPOINT_STOP_AT, so that a test can
// kill it exactly there (tests/python/checkpoint_test.py). Read at every
// point, so a process can set it between saves.
void StopHereForTest(const char* point) {
  const char* stop_at = std::getenv("REVERB_CHECKPOINT_STOP_AT");
  if (stop_at != nullptr && std::strcmp(stop_at, point) == 0) {
    std::raise(SIGSTOP);
  }
}

// The bytes of the files in `dir` (0 for what cannot be read).
int64_t DirectoryBytes(const fs::path& dir) {
  std::error_code error;
  int64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const auto size = entry.file_size(error);
    if (!error) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

// Makes a directory entry durable (after a rename into it).
void SyncDirectory(const fs::path& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

absl::Status NotARecordOf(const fs::path& path, absl::string_view message) {
  return absl::DataLossError(absl::StrCat("Checkpoint file ", path.string(),
                                          " holds a record that is not a ",
                                          message, "."));
}

// Hands every record of `path` to `take`, in order, up to its first error;
// with `progress_what`, logs the progress through the file (progress_log.h).
absl::Status ReadRecords(const fs::path& path,
                         absl::FunctionRef<absl::Status(std::string)> take,
                         absl::string_view progress_what = "") {
  // Checkpoint files are zlib streams, never empty (even with no records).
  std::error_code error;
  if (fs::exists(path, error) && fs::file_size(path, error) == 0) {
    return absl::DataLossError(
        absl::StrCat("Checkpoint file ", path.string(), " is empty."));
  }
  REVERB_ASSIGN_OR_RETURN(auto reader, RecordReader::Open(path.string()));
  std::optional<ProgressLog> progress;
  if (!progress_what.empty()) {
    progress.emplace(std::string(progress_what), fs::file_size(path, error));
  }
  while (true) {
    auto record = reader->Read();
    if (absl::IsOutOfRange(record.status())) {
      if (progress) progress->Done();
      return absl::OkStatus();
    }
    if (!record.ok()) return record.status();
    REVERB_RETURN_IF_ERROR(take(*std::move(record)));
    if (progress) progress->Update(reader->file_offset());
  }
}

template <typename Message>
absl::StatusOr<std::vector<Message>> ReadMessages(const fs::path& path) {
  std::vector<Message> messages;
  REVERB_RETURN_IF_ERROR(ReadRecords(path, [&](std::string record) {
    if (!ParseQuietly(record, &messages.emplace_back())) {
      return NotARecordOf(path, Message::descriptor()->full_name());
    }
    return absl::OkStatus();
  }));
  return messages;
}

// The chunks of `path`, by key, kept as their records' bytes.
absl::StatusOr<absl::flat_hash_map<uint64_t, std::shared_ptr<Chunk>>>
ReadChunks(const fs::path& path, absl::string_view progress_what) {
  absl::flat_hash_map<uint64_t, std::shared_ptr<Chunk>> chunks;
  REVERB_RETURN_IF_ERROR(ReadRecords(
      path,
      [&](std::string record) {
        auto chunk = Chunk::Parse(absl::Cord(std::move(record)));
        if (!chunk.ok()) {
          return NotARecordOf(path, ChunkData::descriptor()->full_name());
        }
        const uint64_t key = (*chunk)->key();
        chunks[key] = *std::move(chunk);
        return absl::OkStatus();
      },
      progress_what));
  return chunks;
}

absl::Status WriteFile(const fs::path& path, int zlib_level,
                       const std::vector<std::string>& records) {
  REVERB_ASSIGN_OR_RETURN(auto writer,
                          RecordWriter::Create(path.string(), zlib_level));
  for (const std::string& record : records) {
    REVERB_RETURN_IF_ERROR(writer->Write(record));
  }
  return writer->Close();
}

}  // namespace

Checkpointer::Checkpointer(std::string root_dir, std::string group,
                           std::optional<std::string> fallback_checkpoint_path,
                           CheckpointerOptions options)
    : root_dir_(std::move(root_dir)),
      group_(std::move(group)),
      fallback_checkpoint_path_(std::move(fallback_checkpoint_path)),
      options_(options) {}

std::string Checkpointer::DebugString() const {
  return absl::StrCat(
      "Checkpointer(root_dir=", root_dir_,
      ", fallback_checkpoint_path=", fallback_checkpoint_path_.value_or(""),
      ", keep_latest=", options_.keep_latest, ")");
}

absl::StatusOr<std::string> Checkpointer::Save(
    absl::Span<const std::shared_ptr<Table>> tables, int keep_latest) {
  if (!group_.empty()) {
    return absl::InvalidArgumentError(
        "Checkpoint groups are not supported (group must be empty).");
  }
  const int keep = keep_latest > 0 ? keep_latest : options_.keep_latest;
  if (keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_latest (", keep, ") must be >= 1."));
  }
  MutexLock lock(&save_mu_);
  progress_.Begin();
  absl::StatusOr<std::string> path = SaveLocked(tables, keep);
  progress_.End(path.ok(), path.ok() ? DirectoryBytes(*path) : 0);
  return path;
}

absl::StatusOr<std::string> Checkpointer::SaveLocked(
    absl::Span<const std::shared_ptr<Table>> tables, int keep) {
  std::error_code error;
  const fs::path root(root_dir_);
  fs::create_directories(root, error);
  if (error) return FsError("Could not create", root, error);

  // RFC 3339 in UTC to the nanosecond, as dm-reverb's: names sort as times.
  std::string name;
  do {
    name = absl::FormatTime("%Y-%m-%dT%H:%M:%E9S+00:00", absl::Now(),
                            absl::UTCTimeZone());
  } while (fs::exists(root / name));
  const fs::path final_dir = root / name;
  const fs::path tmp_dir = root / absl::StrCat(".", name, ".tmp");
  fs::create_directories(tmp_dir, error);
  if (error) return FsError("Could not create", tmp_dir, error);
  StopHereForTest("started");

  // Snapshots (each under its table's lock only while it is taken), then
  // the files.
  std::vector<Table::CheckpointData> snapshots;
  snapshots.reserve(tables.size());
  for (const auto& table : tables) snapshots.push_back(table->Checkpoint());

  auto write_all = [&]() -> absl::Status {
    std::vector<std::string> records;
    for (const auto& snapshot : snapshots) {
      records.push_back(snapshot.table.SerializeAsString());
    }
    REVERB_RETURN_IF_ERROR(
        WriteFile(tmp_dir / kTablesFile, options_.zlib_level, records));
    StopHereForTest("tables");
    records.clear();
    for (const auto& snapshot : snapshots) {
      for (const auto& item : snapshot.items) {
        records.push_back(item.SerializeAsString());
      }
    }
    REVERB_RETURN_IF_ERROR(
        WriteFile(tmp_dir / kItemsFile, options_.zlib_level, records));
    StopHereForTest("items");
    records.clear();
    REVERB_ASSIGN_OR_RETURN(
        auto chunks, RecordWriter::Create((tmp_dir / kChunksFile).string(),
                                          options_.zlib_level));
    absl::flat_hash_set<uint64_t> seen;
    std::vector<const Chunk*> unique;
    uint64_t total = 0;
    for (const auto& snapshot : snapshots) {
      for (const auto& chunk : snapshot.chunks) {
        if (seen.insert(chunk->key()).second) {
          unique.push_back(chunk.get());
          total += chunk->DataByteSizeLong();
        }
      }
    }
    ProgressLog progress(absl::StrCat("Saving checkpoint ", final_dir.string()),
                         total);
    progress_.SetTotal(static_cast<int64_t>(total));
    for (const Chunk* chunk : unique) {
      REVERB_RETURN_IF_ERROR(chunks->Write(chunk->Serialize()));
      if (chunk == unique.front()) StopHereForTest("chunk");
      progress.Add(chunk->DataByteSizeLong());
      progress_.Add(static_cast<int64_t>(chunk->DataByteSizeLong()));
    }
    REVERB_RETURN_IF_ERROR(chunks->Close());
    progress.Done();
    std::FILE* done = std::fopen((tmp_dir / kDoneFile).c_str(), "wb");
    if (done == nullptr || std::fclose(done) != 0) {
      return absl::InternalError(
          absl::StrCat("Could not create ", (tmp_dir / kDoneFile).string()));
    }
    return absl::OkStatus();
  };
  absl::Status status = write_all();
  snapshots.clear();
  if (status.ok()) {
    SyncDirectory(tmp_dir);
    StopHereForTest("done");
    fs::rename(tmp_dir, final_dir, error);
    if (error) status = FsError("Could not publish", final_dir, error);
  }
  if (!status.ok()) {
    fs::remove_all(tmp_dir, error);
    return status;
  }
  SyncDirectory(root);
  StopHereForTest("renamed");

  // Older checkpoints, and what crashed saves left behind.
  REVERB_ASSIGN_OR_RETURN(std::vector<std::string> complete, ListCheckpoints());
  for (size_t i = keep; i < complete.size(); ++i) {
    fs::remove_all(root / complete[i], error);
  }
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string entry_name = entry.path().filename().string();
    if (entry_name.size() > 4 && entry_name[0] == '.' &&
        entry_name.substr(entry_name.size() - 4) == ".tmp") {
      std::error_code ignored;
      fs::remove_all(entry.path(), ignored);
    }
  }
  return fs::absolute(final_dir).string();
}

absl::StatusOr<std::vector<std::string>> Checkpointer::ListCheckpoints() const {
  std::vector<std::string> names;
  std::error_code error;
  const fs::path root(root_dir_);
  if (!fs::exists(root, error)) return names;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.empty() && name[0] != '.' && entry.is_directory() &&
        fs::exists(entry.path() / kDoneFile)) {
      names.push_back(name);
    }
  }
  if (error) return FsError("Could not list", root, error);
  std::sort(names.rbegin(), names.rend());
  return names;
}

absl::Status Checkpointer::Load(
    const std::string& path,
    absl::Span<const std::shared_ptr<Table>> tables) const {
  const fs::path dir(path);
  if (!fs::exists(dir / kDoneFile)) {
    return absl::NotFoundError(
        absl::StrCat(path, " is not a complete checkpoint (it has no ",
                     kDoneFile, " file)."));
  }
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> by_name;
  std::vector<std::string> names;
  for (const auto& table : tables) {
    by_name[table->name()] = table;
    names.push_back(table->name());
  }
  REVERB_ASSIGN_OR_RETURN(
      auto checkpoints,
      ReadMessages<PriorityTableCheckpoint>(dir / kTablesFile));
  for (const auto& checkpoint : checkpoints) {
    if (!by_name.contains(checkpoint.table_name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Checkpoint ", path, " has table ", checkpoint.table_name(),
          ", which the server does not have. Available tables: [",
          absl::StrJoin(names, ", "), "]."));
    }
    if (!checkpoint.deprecated_items().empty()) {
      return absl::UnimplementedError(
          absl::StrCat("Checkpoint ", path,
                       " stores items inside its tables (a pre-2021 format)."));
    }
  }
  REVERB_ASSIGN_OR_RETURN(auto items,
                          ReadMessages<PrioritizedItem>(dir / kItemsFile));
  REVERB_ASSIGN_OR_RETURN(
      auto chunks,
      ReadChunks(dir / kChunksFile, absl::StrCat("Loading checkpoint ", path)));

  // Every item, checked before any table changes.
  absl::flat_hash_map<std::string, std::vector<TableItem>> table_items;
  for (PrioritizedItem& item : items) {
    if (!by_name.contains(item.table())) {
      return absl::DataLossError(absl::StrCat(
          "Checkpoint ", path, " has an item (", kItemsFile, ") of table ",
          item.table(), ", which its ", kTablesFile, " does not describe."));
    }
    TableItem table_item;
    for (uint64_t key : GetChunkKeys(item.flat_trajectory())) {
      auto it = chunks.find(key);
      if (it == chunks.end()) {
        return absl::DataLossError(absl::StrCat(
            "Item ", item.key(), " of checkpoint ", path, " references chunk ",
            key, ", which is not in ", kChunksFile, "."));
      }
      table_item.chunks.push_back(it->second);
    }
    table_item.item = std::move(item);
    REVERB_RETURN_IF_ERROR(ValidateTableItem(table_item));
    table_items[table_item.item.table()].push_back(std::move(table_item));
  }
  items.clear();
  chunks.clear();
  for (size_t i = 0; i < checkpoints.size(); ++i) {
    const std::string& name = checkpoints[i].table_name();
    absl::Status status =
        by_name[name]->Restore(checkpoints[i], std::move(table_items[name]),
                               options_.use_checkpoint_table_options);
    if (!status.ok()) {
      // No table keeps a part of the checkpoint (the one that refused it
      // holds nothing of it either).
      for (size_t j = 0; j < i; ++j) {
        by_name[checkpoints[j].table_name()]->Reset();
      }
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Checkpointer::LoadLatest(
    absl::Span<const std::shared_ptr<Table>> tables) const {
  REVERB_ASSIGN_OR_RETURN(std::vector<std::string> complete, ListCheckpoints());
  if (complete.empty()) {
    return absl::NotFoundError(
        absl::StrCat("No complete checkpoint in ", root_dir_, "."));
  }
  absl::Status first_error;
  for (const std::string& name : complete) {
    const std::string path = (fs::path(root_dir_) / name).string();
    absl::Status status = Load(path, tables);
    if (status.ok()) return status;
    // A checkpoint that does not match the tables is the caller's error;
    // an unreadable one is skipped for an older one.
    if (!absl::IsDataLoss(status) && !absl::IsInternal(status) &&
        !absl::IsNotFound(status)) {
      return status;
    }
    Log(LogSeverity::kWarning,
        absl::StrCat("Skipping checkpoint ", path, ": ", status.ToString()));
    if (first_error.ok()) first_error = status;
  }
  return first_error;
}

absl::Status Checkpointer::LoadFallbackCheckpoint(
    absl::Span<const std::shared_ptr<Table>> tables) const {
  if (!fallback_checkpoint_path_.has_value()) {
    return absl::NotFoundError("No fallback checkpoint is configured.");
  }
  return Load(*fallback_checkpoint_path_, tables);
}

}  // namespace deepmind::reverb
