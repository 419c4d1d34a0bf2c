#include "cc/service/metrics_http.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cc/support/prometheus_text.h"
#include "cc/support/thread_name.h"

namespace deepmind::reverb {
namespace {

void SetNonBlocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

// Waits (up to `deadline`) until `fd` is ready for `events`.
bool WaitFor(int fd, short events, absl::Time deadline) {  // NOLINT
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd, events, 0};
    const int ready = poll(&p, 1, static_cast<int>(ms));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

void SendAll(int fd, absl::string_view bytes, absl::Time deadline) {
  while (!bytes.empty()) {
    const ssize_t sent = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      bytes.remove_prefix(static_cast<size_t>(sent));
    } else if (sent < 0 &&
               (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return;
    } else {
      return;
    }
  }
}

std::string Response(absl::string_view status, absl::string_view type,
                     absl::string_view body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type,
                      "\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", body);
}

std::string Host(const std::string& bind_address) {
  if (bind_address.size() >= 2 && bind_address.front() == '[' &&
      bind_address.back() == ']') {
    return bind_address.substr(1, bind_address.size() - 2);
  }
  return bind_address;
}

}  // namespace

HttpRequestKind ClassifyHttpRequest(absl::string_view bytes) {
  size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == absl::string_view::npos) head_end = bytes.find("\n\n");
  if (head_end == absl::string_view::npos) {
    return bytes.size() >= MetricsHttpServer::kMaxRequestBytes
               ? HttpRequestKind::kBadRequest
               : HttpRequestKind::kIncomplete;
  }
  if (head_end >= MetricsHttpServer::kMaxRequestBytes) {
    return HttpRequestKind::kBadRequest;
  }
  absl::string_view line = bytes.substr(0, bytes.find('\n'));
  if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
  for (char c : line) {
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f) {
      return HttpRequestKind::kBadRequest;
    }
  }
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() ||
      parts[1][0] != '/' || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return HttpRequestKind::kBadRequest;
  }
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  return parts[0] == "GET" && path == "/metrics" ? HttpRequestKind::kMetrics
                                                 : HttpRequestKind::kNotFound;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& bind_address, int port, Render render) {
  const std::string where = absl::StrCat(bind_address, ":", port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("Metrics port ", port, " is out of range [0, 65535]."));
  }
  const std::string host = Host(bind_address);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (const int error = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                    service.c_str(), &hints, &found);
      error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Could not resolve the metrics address ", where, ": ",
                     gai_strerror(error)));
  }
  std::vector<const addrinfo*> candidates;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    candidates.push_back(a);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const addrinfo* a, const addrinfo* b) {
                     return a->ai_family == AF_INET && b->ai_family != AF_INET;
                   });
  int fd = -1;
  int last_errno = 0;
  for (const addrinfo* a : candidates) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    const int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) {
      break;
    }
    last_errno = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Could not listen for metrics on ", where, ": ",
                     std::strerror(last_errno)));
  }
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const int bound_port =
      address.ss_family == AF_INET
          ? ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port)
          : ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fd);
    return absl::InternalError(
        absl::StrCat("pipe2 failed: ", std::strerror(errno)));
  }
  SetNonBlocking(fd);
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(
      fd, wake[0], wake[1], bound_port, std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_read_fd,
                                     int wake_write_fd, int port, Render render)
    : listen_fd_(listen_fd),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      port_(port),
      render_(std::move(render)) {
  thread_ = std::thread([this] { Loop(); });
  SetThreadName(thread_, "reverb-metrics");
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  const char byte = 0;
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(listen_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
}

void MetricsHttpServer::Loop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd =
        accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;  // EAGAIN, a connection reset, out of files.
    Serve(fd);
    close(fd);
  }
}

void MetricsHttpServer::Serve(int fd) {
  const absl::Time deadline = absl::Now() + kRequestTimeout;
  std::string request;
  HttpRequestKind kind = HttpRequestKind::kIncomplete;
  char buffer[2048];
  while (kind == HttpRequestKind::kIncomplete) {
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got > 0) {
      request.append(buffer, static_cast<size_t>(got));
      kind = ClassifyHttpRequest(request);
    } else if (got < 0 &&
               (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!WaitFor(fd, POLLIN, deadline)) return;
    } else {
      return;  // Closed before a whole head, or an error.
    }
  }
  std::string response;
  switch (kind) {
    case HttpRequestKind::kMetrics:
      response = Response(
          "200 OK",
          absl::StrCat(PrometheusText::kContentType, "; charset=utf-8"),
          render_());
      break;
    case HttpRequestKind::kNotFound:
      response = Response("404 Not Found", "text/plain",
                          "Not found: this server serves GET /metrics.\n");
      break;
    default:
      response = Response("400 Bad Request", "text/plain", "Bad request.\n");
      break;
  }
  SendAll(fd, response, absl::Now() + kRequestTimeout);
  shutdown(fd, SHUT_WR);
  // Until the client closes (briefly): closing with bytes unread would
  // reset the connection, and the client might lose the answer.
  const absl::Time drain_deadline = absl::Now() + absl::Milliseconds(200);
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                     errno != EINTR)) {
      return;
    }
    if (got < 0 && !WaitFor(fd, POLLIN, drain_deadline)) return;
  }
}

}  // namespace deepmind::reverb
