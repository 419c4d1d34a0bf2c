// Shared-memory segments: files under /dev/shm that one process writes and
// another maps, and the file-system chores around them (names, sweeps).
//
// A segment holds one serialized chunk and nothing else. Every name of a
// server's starts with "reverb-<pid>-<pid namespace>-<token>" (ServerPrefix)
// so that what a killed server leaves behind can be told from what live
// servers hold, and swept (SweepDeadServers). The protocol above these files is
// in cc/service/shared_memory_host.h and cc/client/shared_memory_client.h.
//
// Files and directories are created readable by their owner only.
#ifndef REVERB_CC_SUPPORT_SHM_SEGMENT_H_
#define REVERB_CC_SUPPORT_SHM_SEGMENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "cc/support/export.h"
#include "cc/support/segment_mappings.h"
#include "cc/support/segment_pool.h"

namespace deepmind::reverb {

// Where segments live.
inline constexpr char kSharedMemoryDir[] = "/dev/shm";

// False if the environment variable REVERB_SHARED_MEMORY is "0".
REVERB_EXPORT bool SharedMemoryAllowed();

// `name` (relative to kSharedMemoryDir) as a path.
REVERB_EXPORT std::string SegmentPath(absl::string_view name);

// The inode of this process's pid namespace (0 if unknown).
REVERB_EXPORT uint64_t PidNamespace();

// Whether process `pid` (of this pid namespace) is alive: it exists and is
// not a zombie.
REVERB_EXPORT bool ProcessAlive(int64_t pid);

// 16 random hex digits, for names.
REVERB_EXPORT std::string RandomToken();

// "reverb-<this pid>-<PidNamespace()>-<token>".
REVERB_EXPORT std::string ServerPrefix(absl::string_view token);

// Makes file `name` (it must not exist) holding `pieces`, one after the
// other, written by the kernel (no mapping: the pages are filled as they
// are allocated). With `reuse`, a file taken from that pool (one of as
// many pages as `pieces` need first: resizing another frees pages or adds
// fresh ones) is overwritten if it has one: its pages are already
// allocated, which spares the kernel allocating and zeroing fresh ones.
// With `mappings` (writable), a file they have kept is written through its
// mapping, and the others are kept.
REVERB_EXPORT absl::Status WriteSegment(
    absl::string_view name, absl::Span<const absl::string_view> pieces,
    SegmentPool* reuse = nullptr, SegmentMappings* mappings = nullptr);

// Makes file `name` of `size` bytes as WriteSegment does (one of `reuse`'s
// if it holds one) and returns a writable mapping of it, its pages
// allocated, which `mappings` (writable) keep: the caller writes the bytes
// in place. The file holds whatever its pages held before.
REVERB_EXPORT absl::StatusOr<std::shared_ptr<char>> MapNewSegment(
    absl::string_view name, size_t size, SegmentPool* reuse,
    SegmentMappings& mappings);

// A segment, opened.
struct REVERB_EXPORT OpenSegment {
  int fd = -1;
  size_t size = 0;
  OpenSegment() = default;
  OpenSegment(OpenSegment&& other) noexcept;
  OpenSegment& operator=(OpenSegment&&) = delete;
  ~OpenSegment();  // Closes fd.
};

// Opens segment `name`: a regular file (not a link) of this process's user,
// not empty. NOT_FOUND if it does not exist, INVALID_ARGUMENT if it is not
// such a file.
REVERB_EXPORT absl::StatusOr<OpenSegment> OpenSegmentFile(
    absl::string_view name);

// The bytes of `segment`, mapped read-only. The mapping stays until the
// last copy of the Cord goes, then `on_release` runs. If the segment cannot
// be mapped (too many mappings, say), its bytes are read into memory
// instead and `on_release` runs at once.
REVERB_EXPORT absl::StatusOr<absl::Cord> MapSegment(
    const OpenSegment& segment, std::function<void()> on_release);

// As MapSegment, through `mappings`: the mapping kept of the segment's file
// if there is one (then `*kept` is true), else a mapping kept from now on
// (else MapSegment's). `on_release` runs once the Cord's last copy goes.
REVERB_EXPORT absl::StatusOr<absl::Cord> MapKeptSegment(
    const OpenSegment& segment, SegmentMappings& mappings,
    std::function<void()> on_release, bool* kept = nullptr);

// Reads `length` bytes of segment `name` from `offset` into `out` (with
// pread: nothing is mapped). The errors of OpenSegmentFile; INTERNAL if it
// cannot be read or is shorter.
REVERB_EXPORT absl::Status ReadSegment(absl::string_view name, size_t offset,
                                       char* out, size_t length);

// The names in directory `dir` (a name; empty: kSharedMemoryDir itself)
// but "." and ".."; none if it cannot be read (or is not a directory).
REVERB_EXPORT std::vector<std::string> ListSegments(absl::string_view dir);

// Removes `name` and, if it is a directory, the files in it first. Errors
// (it does not exist, say) are ignored.
REVERB_EXPORT void RemoveSegmentTree(absl::string_view name);

// Removes (RemoveSegmentTree) every entry of kSharedMemoryDir for which
// `pid_of` gives a process (> 0) that is not alive.
REVERB_EXPORT void RemoveSegmentsOfDeadProcesses(
    absl::FunctionRef<int64_t(absl::string_view name)> pid_of);

// Removes what servers that are gone left under kSharedMemoryDir: every
// entry named "reverb-<pid>-<pid namespace>-..." of this pid namespace whose
// process is not alive.
REVERB_EXPORT void SweepDeadServers();

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SUPPORT_SHM_SEGMENT_H_
