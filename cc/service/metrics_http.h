// MetricsHttpServer: a minimal HTTP/1.1 responder for Prometheus' scrapes.
//
// One thread accepts connections on `bind_address:port` and serves them one
// at a time: it reads a request's head (at most kMaxRequestBytes, within
// kRequestTimeout), answers `GET /metrics` (any query string) with 200 and
// what `render` returns (Prometheus text, prometheus_text.h), any other
// method or path with 404, a head that is malformed or too large with 400,
// and closes the connection (no keep-alive; a client that sends nothing is
// dropped at the timeout). Request bodies are not read. Nothing a client
// sends can stop the thread; a slow client delays the next one by at most
// kRequestTimeout (plus the time to send it the answer, bounded as well).
//
// `bind_address` is as the gRPC server's ("localhost", "127.0.0.1", "[::]",
// "0.0.0.0", ...): an IPv4 address is preferred where a name has both, and
// an IPv6 wildcard also accepts IPv4.
#ifndef REVERB_CC_SERVICE_METRICS_HTTP_H_
#define REVERB_CC_SERVICE_METRICS_HTTP_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cc/support/export.h"

namespace deepmind::reverb {

// What the bytes received so far ask for.
enum class HttpRequestKind {
  kIncomplete,  // No end of the head yet, and within kMaxRequestBytes.
  kMetrics,     // GET /metrics.
  kNotFound,    // A well-formed request for anything else.
  kBadRequest,  // Malformed, or no end of the head within the limit.
};
REVERB_EXPORT HttpRequestKind ClassifyHttpRequest(absl::string_view bytes);

class REVERB_EXPORT MetricsHttpServer {
 public:
  static constexpr size_t kMaxRequestBytes = 8 << 10;
  static constexpr absl::Duration kRequestTimeout = absl::Seconds(2);

  using Render = std::function<std::string()>;

  // Listens on `bind_address:port` (0: a free port). INVALID_ARGUMENT if
  // the address does not resolve or cannot be bound (the port in use).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& bind_address, int port, Render render);

  // Stops.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

  // Closes the listening socket once the connection being served (if any)
  // is done. Idempotent; not thread-safe.
  void Stop();

 private:
  MetricsHttpServer(int listen_fd, int wake_read_fd, int wake_write_fd,
                    int port, Render render);
  void Loop();
  void Serve(int fd);

  const int listen_fd_;
  const int wake_read_fd_;
  const int wake_write_fd_;
  const int port_;
  const Render render_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace deepmind::reverb

#endif  // REVERB_CC_SERVICE_METRICS_HTTP_H_
