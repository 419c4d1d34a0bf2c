#include "cc/service/metrics_http.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace deepmind::reverb {
namespace {

TEST(ClassifyHttpRequestTest, Kinds) {
  using K = HttpRequestKind;
  EXPECT_EQ(ClassifyHttpRequest(""), K::kIncomplete);
  EXPECT_EQ(ClassifyHttpRequest("GET /metrics HTTP/1.1\r\nHost: x\r\n"),
            K::kIncomplete);
  EXPECT_EQ(ClassifyHttpRequest("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            K::kMetrics);
  EXPECT_EQ(ClassifyHttpRequest("GET /metrics?x=1 HTTP/1.0\n\n"), K::kMetrics);
  EXPECT_EQ(ClassifyHttpRequest("GET / HTTP/1.1\r\n\r\n"), K::kNotFound);
  EXPECT_EQ(ClassifyHttpRequest("POST /metrics HTTP/1.1\r\n\r\n"),
            K::kNotFound);
  EXPECT_EQ(ClassifyHttpRequest("GET /metricsx HTTP/1.1\r\n\r\n"),
            K::kNotFound);
  EXPECT_EQ(ClassifyHttpRequest("\r\n\r\n"), K::kBadRequest);
  EXPECT_EQ(ClassifyHttpRequest("GET /metrics\r\n\r\n"), K::kBadRequest);
  EXPECT_EQ(ClassifyHttpRequest("GET metrics HTTP/1.1\r\n\r\n"),
            K::kBadRequest);
  EXPECT_EQ(ClassifyHttpRequest("GET /metrics SPDY/3\r\n\r\n"), K::kBadRequest);
  EXPECT_EQ(
      ClassifyHttpRequest(std::string("GET /me\0trics HTTP/1.1\r\n\r\n", 27)),
      K::kBadRequest);
  EXPECT_EQ(ClassifyHttpRequest(
                std::string(MetricsHttpServer::kMaxRequestBytes, 'a')),
            K::kBadRequest);
  EXPECT_EQ(ClassifyHttpRequest(
                std::string(MetricsHttpServer::kMaxRequestBytes - 1, 'a')),
            K::kIncomplete);
}

// A socket connected to 127.0.0.1:port, or -1.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` and reads the answer until the server closes.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  EXPECT_GE(fd, 0);
  if (!request.empty()) {
    EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
  }
  std::string answer;
  char buffer[4096];
  ssize_t got;
  while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
    answer.append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  return answer;
}

std::unique_ptr<MetricsHttpServer> StartServer() {
  auto server = MetricsHttpServer::Start("localhost", 0,
                                         [] { return std::string("m 1\n"); });
  EXPECT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  return *std::move(server);
}

TEST(MetricsHttpServerTest, ServesMetrics) {
  auto server = StartServer();
  const std::string answer = Exchange(
      server->port(), "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(answer,
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            "Content-Length: 4\r\nConnection: close\r\n\r\nm 1\n");
}

TEST(MetricsHttpServerTest, NotFoundAndBadRequests) {
  auto server = StartServer();
  EXPECT_EQ(Exchange(server->port(), "GET / HTTP/1.1\r\n\r\n").substr(0, 22),
            "HTTP/1.1 404 Not Found");
  EXPECT_EQ(Exchange(server->port(), "\x01\x02garbage\r\n\r\n").substr(0, 24),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(Exchange(server->port(),
                     std::string(3 * MetricsHttpServer::kMaxRequestBytes, 'x'))
                .substr(0, 24),
            "HTTP/1.1 400 Bad Request");
  // A client that closes at once gets nothing, and the server goes on.
  EXPECT_EQ(Exchange(server->port(), ""), "");
  EXPECT_EQ(
      Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n").substr(0, 15),
      "HTTP/1.1 200 OK");
}

TEST(MetricsHttpServerTest, SilentClientIsDroppedAtTheTimeout) {
  auto server = StartServer();
  const int silent = Connect(server->port());
  ASSERT_GE(silent, 0);
  const absl::Time start = absl::Now();
  // Served after the silent one times out.
  EXPECT_EQ(
      Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n").substr(0, 15),
      "HTTP/1.1 200 OK");
  EXPECT_GE(absl::Now() - start,
            MetricsHttpServer::kRequestTimeout - absl::Milliseconds(100));
  char byte;
  EXPECT_EQ(recv(silent, &byte, 1, 0), 0);  // Closed without an answer.
  close(silent);
}

TEST(MetricsHttpServerTest, PortInUseFails) {
  auto server = StartServer();
  auto second = MetricsHttpServer::Start("localhost", server->port(),
                                         [] { return std::string(); });
  EXPECT_EQ(second.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(second.status().message().find("Could not listen for metrics"),
            std::string::npos)
      << second.status();
}

TEST(MetricsHttpServerTest, StopEndsTheThread) {
  auto server = StartServer();
  const int port = server->port();
  server->Stop();
  server->Stop();
  EXPECT_EQ(Connect(port), -1);
}

}  // namespace
}  // namespace deepmind::reverb
