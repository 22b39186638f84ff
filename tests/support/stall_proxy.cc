#include "support/stall_proxy.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace reliableq::testing {

namespace {

sockaddr_un Address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    std::fprintf(stderr, "stall proxy: socket path too long: %s\n", path.c_str());
    std::abort();
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Copies what `from` has to `to` (also into *copied); false when either
// end is done.
bool Forward(int from, int to, std::string* copied) {
  char buffer[16384];
  ssize_t n = read(from, buffer, sizeof buffer);
  if (n <= 0) return false;
  copied->assign(buffer, static_cast<size_t>(n));
  for (ssize_t sent = 0; sent < n;) {
    ssize_t w = write(to, buffer + sent, static_cast<size_t>(n - sent));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    sent += w;
  }
  return true;
}

}  // namespace

StallProxy::StallProxy(std::string listen_path, std::string upstream_path)
    : listen_path_(std::move(listen_path)), upstream_path_(std::move(upstream_path)) {
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address = Address(listen_path_);
  unlink(listen_path_.c_str());
  if (listen_fd_ < 0 ||
      bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listen_fd_, 64) != 0) {
    std::fprintf(stderr, "stall proxy: cannot listen on %s: %s\n", listen_path_.c_str(),
                 std::strerror(errno));
    std::abort();
  }
  thread_ = std::thread([this] { Run(); });
}

StallProxy::~StallProxy() {
  stopping_ = true;
  thread_.join();
  close(listen_fd_);
  unlink(listen_path_.c_str());
}

void StallProxy::StallAfter(std::string needle) {
  needle_ = std::move(needle);
  armed_ = true;
}

void StallProxy::Run() {
  // Pairs of (client, upstream) descriptors.
  std::vector<std::pair<int, int>> links;
  while (!stopping_) {
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    if (!stalled_) {
      for (auto [client, upstream] : links) {
        fds.push_back({client, POLLIN, 0});
        fds.push_back({upstream, POLLIN, 0});
      }
    }
    // A short timeout, so that Stall, Resume and the end are seen at once.
    if (poll(fds.data(), fds.size(), 10) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      int upstream = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un address = Address(upstream_path_);
      if (client >= 0 && upstream >= 0 &&
          connect(upstream, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
        links.emplace_back(client, upstream);
      } else {
        if (client >= 0) close(client);
        if (upstream >= 0) close(upstream);
      }
    }
    std::vector<std::pair<int, int>> open;
    for (size_t i = 0; i < links.size(); ++i) {
      auto [client, upstream] = links[i];
      bool alive = true;
      if (fds.size() > 1 + 2 * i) {
        short from_client = fds[1 + 2 * i].revents;
        short from_upstream = fds[2 + 2 * i].revents;
        std::string copied;
        if (from_client & (POLLIN | POLLHUP | POLLERR)) {
          alive = Forward(client, upstream, &copied);
          if (alive && armed_ && copied.find(needle_) != std::string::npos) {
            armed_ = false;
            stalled_ = true;
          }
        }
        if (alive && (from_upstream & (POLLIN | POLLHUP | POLLERR))) {
          alive = Forward(upstream, client, &copied);
        }
      }
      if (alive) {
        open.emplace_back(client, upstream);
      } else {
        close(client);
        close(upstream);
      }
    }
    links = std::move(open);
  }
  for (auto [client, upstream] : links) {
    close(client);
    close(upstream);
  }
}

}  // namespace reliableq::testing
