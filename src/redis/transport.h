// Transport: one byte stream to a Redis server, over TCP (IPv4 or IPv6,
// TCP_NODELAY), a unix socket, or TLS over TCP. It owns the socket and,
// with TLS, the OpenSSL session; both connections (Connection, blocking;
// AsyncConnection, on a libuv loop) are built on it.
//
// Why not hiredis's own connections: hiredis 0.14 (Debian's) has no TLS,
// no timeouts on redisAsyncContext, and no way to hand it a socket or an
// I/O layer of our own. hiredis stays as the RESP codec only: replies are
// parsed by its redisReader into the redisReply the rest of the code
// reads, and commands are written by AppendCommand below.
//
// The design:
// - The socket is always non-blocking. StartConnect begins a connect and
//   returns at once; ContinueConnect drives it (the TCP connect, trying
//   each address the host resolved to, then the TLS handshake) whenever
//   the socket is ready as wants() says. The blocking Connect is the same
//   two steps with poll(2) in between, all within one deadline, so there is
//   one connect path for both connections.
// - Read and Write never block. Each reports bytes moved, would-block with
//   the readiness it waits for, EOF or an error. With TLS the readiness is
//   not always the obvious one: SSL_read may need to write and SSL_write to
//   read, and SSL may hold decrypted bytes that poll cannot see
//   (has_buffered()).
// - WriteAll and ReadSome wait with poll(2) up to a deadline, for the
//   blocking connection.
// - Every message names where it tried: "127.0.0.1:6390", "[::1]:6390",
//   "unix:/path/redis.sock"; never a password or key material.
//
// Name resolution (getaddrinfo) blocks, as it did in hiredis; a host given
// as an address resolves at once.
//
// Above this layer (reliableq-schema(7), DEPLOYMENTS):
// - Discovery (discovery.h). A connection takes its Endpoint from
//   Endpoint::Of(options), a fixed address, or with Sentinel from the
//   process-wide Discovery, which answers "where is the master" and keeps
//   a topology epoch; with Redis Cluster, from the Discovery of the
//   connection's hash slot, which answers "which primary owns slot S"
//   (CLUSTER SLOTS, MOVED) the same way. A connection that meets
//   READONLY, a failed connect, a replica (ROLE) or +switch-master makes
//   Discovery look again; a MOVED names the new owner; a new answer
//   raises the epoch. The blocking Connection compares the epoch before
//   each call and reconnects when it moved; an AsyncConnection drops
//   within a watchdog tick (its owner reconnects and reconciles, as after
//   any break), so every connection of a process follows the server
//   together.
// - An idle worker's wake-ups arrive on one subscribed AsyncConnection
//   (SetOnMessage); auto-pipelined pushes use the same write buffer and
//   reply FIFO as any command.
//
// Thread safety: one thread at a time.

#ifndef RELIABLEQ_REDIS_TRANSPORT_H_
#define RELIABLEQ_REDIS_TRANSPORT_H_

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/tls.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::redis {

// Readiness a transport waits for; the same bits as libuv's UV_READABLE
// and UV_WRITABLE, so they can be handed to uv_poll_start as they are.
inline constexpr int kReadable = 1;
inline constexpr int kWritable = 2;

// Where a server is.
struct Endpoint {
  std::string host;       // TCP host name or address
  int port = 0;           // TCP port
  std::string unix_path;  // when non-empty, used instead of host:port

  static Endpoint Of(const RedisOptions& options);
  // "127.0.0.1:6379", "[::1]:6379" or "unix:/path/redis.sock".
  std::string Describe() const;
};

// The buffer each connection reads into: what one Read may bring. A fetch
// reply of a full batch fits; larger replies take several reads.
inline constexpr size_t kReadBufferBytes = 64 * 1024;

// The outcome of one non-blocking step.
struct IoResult {
  enum class Kind { kDone, kWouldBlock, kEof, kError };
  Kind kind = Kind::kDone;
  size_t bytes = 0;  // kDone: bytes moved (Read/Write)
  int wants = 0;     // kWouldBlock: kReadable or kWritable
  Status error;      // kError

  static IoResult Done(size_t n) { return {Kind::kDone, n, 0, {}}; }
  static IoResult Block(int wants) { return {Kind::kWouldBlock, 0, wants, {}}; }
  static IoResult Eof() { return {Kind::kEof, 0, 0, {}}; }
  static IoResult Error(Status s) { return {Kind::kError, 0, 0, std::move(s)}; }
};

class Transport {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Starts connecting to `endpoint`, with TLS when `tls` is not null (not
  // with a unix socket: kInvalidArgument). Fails at once only when no
  // socket could be made or the name did not resolve; otherwise the
  // transport is connecting: drive it with ContinueConnect.
  static Result<std::unique_ptr<Transport>> StartConnect(
      const Endpoint& endpoint, std::shared_ptr<const TlsContext> tls);

  // StartConnect and ContinueConnect until connected or `deadline`
  // (kTimeout, naming the endpoint).
  static Result<std::unique_ptr<Transport>> Connect(const Endpoint& endpoint,
                                                    std::shared_ptr<const TlsContext> tls,
                                                    Deadline deadline);

  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // One step of the connect: kDone once the stream is established (TLS
  // handshake included), kWouldBlock with what to wait for, or kError
  // ("TLS handshake with 127.0.0.1:6390 failed: certificate verify failed
  // (...)"; "cannot connect to 127.0.0.1:6390: Connection refused").
  IoResult ContinueConnect();
  bool connected() const { return phase_ == Phase::kConnected; }

  // At most `len` bytes, never blocking. kDone has bytes > 0.
  IoResult Read(char* buf, size_t len);
  // At most `len` bytes (len > 0), never blocking. kDone has bytes > 0.
  IoResult Write(const char* buf, size_t len);

  // True when SSL holds bytes a Read returns without the socket becoming
  // readable (poll cannot see them); false without TLS.
  bool has_buffered() const;

  // Blocking helpers for Connection: all of `data`, or at least one byte
  // (0 means EOF), waiting with poll(2) until `deadline` (kTimeout).
  Status WriteAll(std::string_view data, Deadline deadline);
  Result<size_t> ReadSome(char* buf, size_t len, Deadline deadline);

  int fd() const { return fd_; }
  // What the last would-block waited for (kReadable, kWritable).
  int wants() const { return wants_; }
  const std::string& where() const { return where_; }
  bool tls() const { return tls_ != nullptr; }

 private:
  enum class Phase { kTcp, kTls, kConnected };

  Transport(std::string where, std::string host, std::shared_ptr<const TlsContext> tls)
      : where_(std::move(where)), host_(std::move(host)), tls_(std::move(tls)) {}
  // Opens a socket and starts a connect to addresses_[next_address_++];
  // false once every address failed (error in *why).
  bool TryNextAddress(Status* why);
  IoResult FinishTcp();
  IoResult Handshake();
  IoResult SslResult(int ret, bool reading);
  Status WaitFor(int events, Deadline deadline, const char* doing);
  void CloseSocket();

  std::string where_;
  std::string host_;
  std::shared_ptr<const TlsContext> tls_;
  SslPtr ssl_;
  int fd_ = -1;
  int wants_ = kWritable;
  Phase phase_ = Phase::kTcp;
  std::vector<sockaddr_storage> addresses_;
  std::vector<socklen_t> address_lengths_;
  size_t next_address_ = 0;
  Status last_error_;
  bool read_any_ = false;  // a Read returned bytes
};

// Appends `argv` as one command in Redis's protocol (an array of bulk
// strings) to `*wire`.
void AppendCommand(std::string* wire, const std::string_view* argv, size_t argc);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_TRANSPORT_H_
