// RedisOptions: where Redis is and how long to wait for it.
//
// Accepted URL forms (as Sidekiq's REDIS_URL):
//   redis://[[user]:password@]host[:port][/db]      port defaults to 6379, db to 0
//   rediss://[[user]:password@]host[:port][/db]     the same over TLS (tls.enabled)
//   unix:///path/to/redis.sock[?db=N][&password=P]
// IPv6 hosts go in brackets: redis://[::1]:6380/2. Percent-escapes in the
// user and password are decoded.
//
// Thread safety: a plain value.

#ifndef RELIABLEQ_REDIS_OPTIONS_H_
#define RELIABLEQ_REDIS_OPTIONS_H_

#include <chrono>
#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq {

// TLS to Redis (redis-server built with TLS, started with --tls-port).
// File contents are never shown in messages; their paths are.
struct RedisTlsOptions {
  // Connect with TLS. Set by a rediss:// URL. TCP only: with unix_path set
  // a connection fails with kInvalidArgument.
  bool enabled = false;
  // PEM file of the CAs that may sign the server's certificate; empty means
  // the system's default trust store.
  std::string ca_file;
  // PEM client certificate (chain) and its unencrypted private key, for a
  // server that asks for one (tls-auth-clients); both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must carry, also sent as SNI; empty
  // means the host. An IP address is checked against the certificate's IP
  // addresses (and not sent as SNI).
  std::string server_name;
  // Check the server's certificate and name. Turning this off makes the
  // connection open to anyone who can intercept it; for tests only.
  bool verify_peer = true;
};

struct RedisOptions {
  // TCP host; ignored when unix_path is set.
  std::string host = "127.0.0.1";
  // TCP port.
  int port = 6379;
  // Unix socket path; when non-empty it is used instead of host:port.
  std::string unix_path;
  // Logical database selected after connecting.
  int db = 0;
  // ACL user (Redis 6+); empty means the default user.
  std::string username;
  // Password sent with AUTH; empty means no AUTH.
  std::string password;
  // How long to wait for a connection (and its AUTH/SELECT) to be made.
  std::chrono::milliseconds connect_timeout{2000};
  // How long to wait for the reply to one command before the connection is
  // declared broken. Blocking commands get their own timeout added to it.
  std::chrono::milliseconds command_timeout{5000};
  // TLS; off unless the URL is rediss:// or tls.enabled is set.
  RedisTlsOptions tls;

  // Parses a URL of one of the forms above. An unknown scheme, a missing
  // host, a bad port or db, or trailing garbage is kInvalidArgument with the
  // reason; the message shows the URL with its password masked as "***".
  static Result<RedisOptions> FromUrl(std::string_view url);

  // FromUrl($REDIS_URL) when REDIS_URL is set and non-empty, otherwise the
  // defaults above (127.0.0.1:6379, db 0).
  static Result<RedisOptions> FromEnvironment();

  // Where this points, for messages: "127.0.0.1:6379 db 0",
  // "rediss://127.0.0.1:6380 db 0" with TLS, or "unix:/tmp/redis.sock db 0".
  // Never includes the password or any TLS file.
  std::string Describe() const;
};

// `text` with the password of every URL in it masked as "***", for messages
// that may quote a URL (a mistyped argument, say). A URL runs from its
// "scheme://" to the end of the line or the next URL; masked are the part
// of its user info after the first ':' up to the last '@' (all of it when
// it has no ':', since a lone user info is the password) and the value of
// each password= query parameter. Text that is not a URL is kept.
std::string RedactUrls(std::string_view text);

}  // namespace reliableq

#endif  // RELIABLEQ_REDIS_OPTIONS_H_
