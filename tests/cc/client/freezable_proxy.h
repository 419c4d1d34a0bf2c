// FreezableProxy: forwards the TCP connections made to a loopback port of
// its own to a server's port, and can freeze them: while frozen nothing is
// forwarded either way and the connections stay open, as with a host that
// stopped answering (a stopped process, a cut cable without resets). Thaw()
// forwards what was held back, in order, and goes on.
//
// A client reaches a server in its own process directly, not through a
// proxy (cc/client/connection.h): clients of a proxied server in the test's
// process are made under GrpcOnly (server_test_util.h).
#ifndef REVERB_TESTS_CC_CLIENT_FREEZABLE_PROXY_H_
#define REVERB_TESTS_CC_CLIENT_FREEZABLE_PROXY_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

#include "cc/support/mutex.h"

namespace deepmind::reverb::testing {

class FreezableProxy {
 public:
  explicit FreezableProxy(int target_port) : target_port_(target_port) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = Loopback(0);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listener_, 16);
    socklen_t length = sizeof(address);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~FreezableProxy() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
      frozen_ = false;
      for (int fd : sockets_) shutdown(fd, SHUT_RDWR);
    }
    shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    close(listener_);
    for (auto& pump : pumps_) pump.join();
    for (int fd : sockets_) close(fd);
  }

  int port() const { return port_; }

  void Freeze() {
    MutexLock lock(&mu_);
    frozen_ = true;
  }

  void Thaw() {
    MutexLock lock(&mu_);
    frozen_ = false;
  }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
  }

  void Accept() {
    while (true) {
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address = Loopback(target_port_);
      connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address));
      MutexLock lock(&mu_);
      if (stopping_) {
        close(client);
        close(server);
        return;
      }
      sockets_.push_back(client);
      sockets_.push_back(server);
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
      pumps_.emplace_back([this, client, server] { Pump(server, client); });
    }
  }

  // Copies `from` to `to` until either ends, holding data while frozen.
  void Pump(int from, int to) {
    char buffer[1 << 16];
    while (true) {
      const ssize_t n = read(from, buffer, sizeof(buffer));
      if (n <= 0) break;
      {
        MutexLock lock(&mu_);
        auto thawed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !frozen_;
        };
        mu_.Await(absl::Condition(&thawed));
      }
      ssize_t written = 0;
      while (written < n) {
        // Not write(): a peer that has gone must not raise SIGPIPE.
        const ssize_t w = send(to, buffer + written, n - written, MSG_NOSIGNAL);
        if (w <= 0) break;
        written += w;
      }
      if (written < n) break;
    }
    shutdown(to, SHUT_WR);
  }

  const int target_port_;
  int listener_;
  int port_;
  std::thread acceptor_;
  Mutex mu_;
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> sockets_ ABSL_GUARDED_BY(mu_);
  // Written by the acceptor only; joined once it has stopped.
  std::vector<std::thread> pumps_;
};

}  // namespace deepmind::reverb::testing

#endif  // REVERB_TESTS_CC_CLIENT_FREEZABLE_PROXY_H_
