// Linked into every fuzz target: protobuf logs an error for each string
// field with invalid UTF-8 it parses, which fuzzing makes on most inputs;
// the log is noise there and slows the run.
#include "google/protobuf/stubs/logging.h"

namespace {

const bool kQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

}  // namespace
