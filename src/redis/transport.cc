#include "redis/transport.h"

#include <hiredis/read.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "redis/errors.h"

namespace reliableq::redis {

namespace {

using Clock = std::chrono::steady_clock;

Status SocketError(const char* doing, int error, const std::string& where) {
  return FromTransportError(REDIS_ERR_IO, std::strerror(error), where).WithContext(doing);
}

Status Closed(const std::string& where) {
  return FromTransportError(REDIS_ERR_EOF, "Server closed the connection", where);
}

}  // namespace

Endpoint Endpoint::Of(const RedisOptions& options) {
  return Endpoint{options.host, options.port, options.unix_path};
}

std::string Endpoint::Describe() const {
  if (!unix_path.empty()) return "unix:" + unix_path;
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<std::unique_ptr<Transport>> Transport::StartConnect(const Endpoint& endpoint,
                                                           std::shared_ptr<const TlsContext> tls) {
  std::string where = endpoint.Describe();
  if (tls != nullptr && !endpoint.unix_path.empty()) {
    return Status::InvalidArgument("TLS is for TCP connections, not the unix socket " + where);
  }
  std::unique_ptr<Transport> t(new Transport(where, endpoint.host, std::move(tls)));
  if (!endpoint.unix_path.empty()) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (endpoint.unix_path.size() >= sizeof address.sun_path) {
      return Status::InvalidArgument("unix socket path too long: " + where);
    }
    std::memcpy(address.sun_path, endpoint.unix_path.c_str(), endpoint.unix_path.size() + 1);
    sockaddr_storage storage{};
    std::memcpy(&storage, &address, sizeof address);
    t->addresses_.push_back(storage);
    t->address_lengths_.push_back(sizeof address);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    std::string port = std::to_string(endpoint.port);
    int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found);
    if (rc != 0) {
      return Status::IoError("cannot resolve '" + endpoint.host + "' (Redis at " + where +
                             "): " + gai_strerror(rc));
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      sockaddr_storage storage{};
      std::memcpy(&storage, a->ai_addr, a->ai_addrlen);
      t->addresses_.push_back(storage);
      t->address_lengths_.push_back(a->ai_addrlen);
    }
    freeaddrinfo(found);
  }
  Status why;
  if (!t->TryNextAddress(&why)) return why;
  return t;
}

Result<std::unique_ptr<Transport>> Transport::Connect(const Endpoint& endpoint,
                                                      std::shared_ptr<const TlsContext> tls,
                                                      Deadline deadline) {
  Result<std::unique_ptr<Transport>> started = StartConnect(endpoint, std::move(tls));
  if (!started.ok()) return started;
  Transport& t = **started;
  while (true) {
    IoResult step = t.ContinueConnect();
    if (step.kind == IoResult::Kind::kDone) return started;
    if (step.kind == IoResult::Kind::kError) return step.error;
    Status waited = t.WaitFor(step.wants, deadline, "connecting");
    if (!waited.ok()) return waited;
  }
}

Transport::~Transport() { CloseSocket(); }

void Transport::CloseSocket() {
  ssl_.reset();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool Transport::TryNextAddress(Status* why) {
  while (next_address_ < addresses_.size()) {
    CloseSocket();
    size_t i = next_address_++;
    const auto* address = reinterpret_cast<const sockaddr*>(&addresses_[i]);
    fd_ = socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      last_error_ = SocketError("cannot connect", errno, where_);
      continue;
    }
    if (address->sa_family != AF_UNIX) {
      // Commands are small and each waits for its reply: Nagle would hold
      // them back.
      int one = 1;
      setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (connect(fd_, address, address_lengths_[i]) == 0 || errno == EINPROGRESS) {
      phase_ = Phase::kTcp;
      wants_ = kWritable;
      return true;
    }
    last_error_ = SocketError("cannot connect", errno, where_);
  }
  CloseSocket();
  *why = last_error_.ok() ? Status::IoError("no address to connect to for " + where_)
                          : last_error_;
  return false;
}

IoResult Transport::ContinueConnect() {
  if (phase_ == Phase::kTcp) {
    IoResult tcp = FinishTcp();
    if (tcp.kind != IoResult::Kind::kDone) return tcp;
  }
  if (phase_ == Phase::kTls) return Handshake();
  return IoResult::Done(0);
}

IoResult Transport::FinishTcp() {
  while (true) {
    pollfd p{fd_, POLLOUT, 0};
    if (poll(&p, 1, 0) == 0) return IoResult::Block(wants_ = kWritable);
    int error = 0;
    socklen_t len = sizeof error;
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
    if (error == 0) break;
    last_error_ = SocketError("cannot connect", error, where_);
    Status why;
    if (!TryNextAddress(&why)) return IoResult::Error(why);
  }
  if (tls_ == nullptr) {
    phase_ = Phase::kConnected;
    return IoResult::Done(0);
  }
  Result<SslPtr> ssl = tls_->NewSession(fd_, host_, where_);
  if (!ssl.ok()) return IoResult::Error(ssl.status());
  ssl_ = std::move(*ssl);
  phase_ = Phase::kTls;
  return IoResult::Done(0);
}

IoResult Transport::Handshake() {
  ERR_clear_error();
  int ret = SSL_connect(ssl_.get());
  if (ret == 1) {
    phase_ = Phase::kConnected;
    return IoResult::Done(0);
  }
  int saved_errno = errno;
  int error = SSL_get_error(ssl_.get(), ret);
  if (error == SSL_ERROR_WANT_READ) return IoResult::Block(wants_ = kReadable);
  if (error == SSL_ERROR_WANT_WRITE) return IoResult::Block(wants_ = kWritable);
  return IoResult::Error(Status::IoError("TLS handshake with " + where_ + " failed: " +
                                         TlsFailureReason(ssl_.get(), error, saved_errno)));
}

IoResult Transport::SslResult(int ret, bool reading) {
  int saved_errno = errno;
  int error = SSL_get_error(ssl_.get(), ret);
  switch (error) {
    case SSL_ERROR_WANT_READ:
      return IoResult::Block(wants_ = kReadable);
    case SSL_ERROR_WANT_WRITE:
      return IoResult::Block(wants_ = kWritable);
    default:
      break;
  }
  bool refused_early = !read_any_ && ClientCertificateMissing(ssl_.get());
  bool eof = error == SSL_ERROR_ZERO_RETURN ||
             (error == SSL_ERROR_SYSCALL && saved_errno == 0 && ERR_peek_error() == 0);
  if (eof && !refused_early) {
    return reading ? IoResult::Eof() : IoResult::Error(Closed(where_));
  }
  std::string reason = TlsFailureReason(ssl_.get(), error, saved_errno);
  if (refused_early && reason.find("certificate required") == std::string::npos) {
    reason += " (the server asked for a client certificate and none is configured; it may "
              "require one)";
  }
  return IoResult::Error(Status::IoError("TLS error with " + where_ + ": " + reason));
}

IoResult Transport::Read(char* buf, size_t len) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    size_t n = 0;
    int ret = SSL_read_ex(ssl_.get(), buf, len, &n);
    if (ret == 1) {
      read_any_ = true;
      return IoResult::Done(n);
    }
    return SslResult(ret, true);
  }
  while (true) {
    ssize_t n = recv(fd_, buf, len, 0);
    if (n > 0) return IoResult::Done(static_cast<size_t>(n));
    if (n == 0) return IoResult::Eof();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::Block(wants_ = kReadable);
    return IoResult::Error(SocketError("reading", errno, where_));
  }
}

IoResult Transport::Write(const char* buf, size_t len) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    size_t n = 0;
    int ret = SSL_write_ex(ssl_.get(), buf, len, &n);
    if (ret == 1) return IoResult::Done(n);
    return SslResult(ret, false);
  }
  while (true) {
    // MSG_NOSIGNAL: a peer that went away is an error here, not SIGPIPE.
    ssize_t n = send(fd_, buf, len, MSG_NOSIGNAL);
    if (n >= 0) return IoResult::Done(static_cast<size_t>(n));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::Block(wants_ = kWritable);
    return IoResult::Error(SocketError("writing", errno, where_));
  }
}

bool Transport::has_buffered() const {
  return ssl_ != nullptr && SSL_has_pending(ssl_.get()) == 1;
}

Status Transport::WaitFor(int events, Deadline deadline, const char* doing) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return Status::Timeout(std::string("no answer in time ") + doing + " (Redis at " + where_ +
                             ")");
    }
    pollfd p{fd_, static_cast<short>(((events & kReadable) ? POLLIN : 0) |
                                     ((events & kWritable) ? POLLOUT : 0)),
             0};
    // Rounded up, so that a wait of less than a millisecond still waits.
    int rc = poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (rc > 0) return Status::OK();  // also POLLERR/POLLHUP: the next call says why
    if (rc < 0 && errno != EINTR) return SocketError("waiting", errno, where_);
  }
}

Status Transport::WriteAll(std::string_view data, Deadline deadline) {
  while (!data.empty()) {
    IoResult r = Write(data.data(), data.size());
    switch (r.kind) {
      case IoResult::Kind::kDone:
        data.remove_prefix(r.bytes);
        break;
      case IoResult::Kind::kWouldBlock: {
        Status waited = WaitFor(r.wants, deadline, "writing");
        if (!waited.ok()) return waited;
        break;
      }
      case IoResult::Kind::kEof:
        return Closed(where_);
      case IoResult::Kind::kError:
        return r.error;
    }
  }
  return Status::OK();
}

Result<size_t> Transport::ReadSome(char* buf, size_t len, Deadline deadline) {
  while (true) {
    IoResult r = Read(buf, len);
    switch (r.kind) {
      case IoResult::Kind::kDone:
        return r.bytes;
      case IoResult::Kind::kEof:
        return size_t{0};
      case IoResult::Kind::kError:
        return r.error;
      case IoResult::Kind::kWouldBlock: {
        Status waited = WaitFor(r.wants, deadline, "reading");
        if (!waited.ok()) return waited;
        break;
      }
    }
  }
}

void AppendCommand(std::string* wire, const std::string_view* argv, size_t argc) {
  auto append_header = [wire](char kind, size_t n) {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    (void)ec;  // 24 digits hold any size_t
    *wire += kind;
    wire->append(digits, end);
    *wire += "\r\n";
  };
  append_header('*', argc);
  for (size_t i = 0; i < argc; ++i) {
    append_header('$', argv[i].size());
    wire->append(argv[i]);
    *wire += "\r\n";
  }
}

}  // namespace reliableq::redis
