// Fuzzes ClassifyHttpRequest (cc/service/metrics_http.h), which reads the
// bytes any client sends the metrics port. Whatever the bytes, it answers
// one of its kinds without crashing; only a complete head (or a too large
// one) is decided, and what it decided stays decided as more bytes come
// (its answer reads the head only); bytes at the limit without an end of
// head are always a bad request.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cc/service/metrics_http.h"
#include "fuzz/fuzz_check.h"

using deepmind::reverb::ClassifyHttpRequest;
using deepmind::reverb::HttpRequestKind;
using deepmind::reverb::MetricsHttpServer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const HttpRequestKind kind = ClassifyHttpRequest(input);
  FUZZ_CHECK(kind == HttpRequestKind::kIncomplete ||
             kind == HttpRequestKind::kMetrics ||
             kind == HttpRequestKind::kNotFound ||
             kind == HttpRequestKind::kBadRequest);
  if (kind != HttpRequestKind::kIncomplete) {
    FUZZ_CHECK(ClassifyHttpRequest(input + "x") == kind);
  }
  if (kind == HttpRequestKind::kMetrics) {
    FUZZ_CHECK(input.rfind("GET /metrics", 0) == 0);
  }
  if (kind == HttpRequestKind::kIncomplete) {
    FUZZ_CHECK(size < MetricsHttpServer::kMaxRequestBytes);
    FUZZ_CHECK(ClassifyHttpRequest(
                   input + std::string(MetricsHttpServer::kMaxRequestBytes,
                                       'x')) == HttpRequestKind::kBadRequest);
  }
  return 0;
}
