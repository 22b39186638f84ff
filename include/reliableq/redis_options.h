// RedisOptions: where Redis is and how long to wait for it.
//
// Accepted URL forms (as Sidekiq's REDIS_URL):
//   redis://[[user]:password@]host[:port][/db]      port defaults to 6379, db to 0
//   rediss://[[user]:password@]host[:port][/db]     the same over TLS (tls.enabled)
//   unix:///path/to/redis.sock[?db=N][&password=P]
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]
//                                                   the master named `master` by
//                                                   the sentinels listed (port
//                                                   defaults to 26379); user and
//                                                   password are the master's
//   rediss+sentinel://...                           the same over TLS (to the
//                                                   sentinels and the master)
//   redis+cluster://[[user]:password@]host[:port][,host[:port]...][/GROUP]
//                                                   Redis Cluster: any nodes of
//                                                   it (port defaults to 6379),
//                                                   and the queue group; user
//                                                   and password are every
//                                                   node's; database 0 only
//   rediss+cluster://...                            the same over TLS (to every
//                                                   node)
// A sentinel URL takes the query parameters sentinel_username=U and
// sentinel_password=P, for sentinels that require them (requirepass in
// sentinel.conf), and sentinel_timeout=MS. Every form takes group=G, the
// queue group (the cluster form also as its path; both must agree).
// IPv6 hosts go in brackets: redis://[::1]:6380/2. Percent-escapes in the
// user and password are decoded.
//
// Thread safety: a plain value.

#ifndef RELIABLEQ_REDIS_OPTIONS_H_
#define RELIABLEQ_REDIS_OPTIONS_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

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

// Sentinel: where to ask for the master (redis-sentinel, Redis's own
// failover). Off while master_name is empty.
struct RedisSentinelOptions {
  struct Address {
    std::string host;
    int port = 26379;
  };
  // The name the sentinels monitor the master under (sentinel.conf's
  // `sentinel monitor NAME ...`).
  std::string master_name;
  // The sentinels, asked in turn (the one that answered last, first).
  std::vector<Address> sentinels;
  // ACL user and password of the sentinels (not the master's: those are
  // RedisOptions::username and password).
  std::string username;
  std::string password;
  // How long each sentinel gets to connect and answer.
  std::chrono::milliseconds timeout{1000};
  // Connects in a row to an address the sentinels name that ROLE shows is
  // not the master (the sentinels not yet agreed on a promotion), before a
  // connection gives up with an error naming them.
  int role_checks = 3;
};

// Redis Cluster: where to ask for the slot map. Off while seeds is empty.
// A connection serves one hash slot, the slot of its group (below) or of
// route_key: it goes to the primary that owns that slot, asks the seeds
// (and the nodes they named) for the slot map with CLUSTER SLOTS, and
// follows the slot when it moves (MOVED, a failover, a resharding). Every
// key a process touches through one connection is in that slot (the
// layout-2 key names guarantee it); a key of another slot is refused by
// the node (MOVED to another slot), never followed. Each node gets
// connect_timeout to connect and as much to answer the lookup.
struct RedisClusterOptions {
  struct Address {
    std::string host;
    int port = 6379;
  };
  // Any nodes of the cluster; asked in turn for the slot map.
  std::vector<Address> seeds;
  // The key whose slot the connection serves instead of its group's (the
  // directory of groups, say); empty: the slot of "{group}".
  std::string route_key;
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
  // Sentinel; when sentinel.master_name is set, host, port and unix_path
  // are not used: every connection asks the sentinels where the master is,
  // checks ROLE after connecting, and follows the master when it moves.
  RedisSentinelOptions sentinel;
  // Redis Cluster; on when cluster.seeds is not empty. Needs db 0 and a
  // group (or a cluster.route_key), and excludes Sentinel and a unix
  // socket (Validate); the user and password are every node's, TLS goes
  // to every node.
  RedisClusterOptions cluster;
  // The queue group: empty for layout 1 (Sidekiq's key names, one Redis).
  // When set, the data follows layout 2 (reliableq-schema(7), "Key layout
  // for Redis Cluster"): every key, Sidekiq's included, lives under
  // "<prefix>{<group>}:", so that all of a group's keys share one hash
  // slot. Letters, digits, '_', '-' and '.', at most kMaxGroupLength.
  std::string group;
  static constexpr size_t kMaxGroupLength = 64;

  // Parses a URL of one of the forms above. An unknown scheme, a missing
  // host, a bad port or db, trailing garbage, a cluster URL whose path is a
  // number (a database copied from a redis:// URL: a cluster's path is its
  // group, and a group of digits is named with group= instead), or options
  // Validate refuses are kInvalidArgument with the reason (a missing host
  // with the URL's own form); the message shows the URL with its password
  // masked as "***". A cluster URL without a group is
  // accepted (a program may take the group from elsewhere, as `migrate
  // --group` does); Validate, which every connection runs, refuses it.
  static Result<RedisOptions> FromUrl(std::string_view url);

  // kInvalidArgument with a one-line reason when these options cannot
  // work: a group with other characters than letters, digits, '_', '-',
  // '.' or longer than kMaxGroupLength; a cluster without a group (unless
  // cluster.route_key names the slot: the directory of groups), with
  // Sentinel, a unix socket or a database other than 0; a seed without a
  // host or port. Every connection checks it before connecting.
  Status Validate() const;

  // FromUrl($REDIS_URL) when REDIS_URL is set and non-empty, otherwise the
  // defaults above (127.0.0.1:6379, db 0).
  static Result<RedisOptions> FromEnvironment();

  // Where this points, for messages: "127.0.0.1:6379 db 0",
  // "rediss://127.0.0.1:6380 db 0" with TLS, "unix:/tmp/redis.sock db 0", or
  // "master 'mymaster' of sentinels 10.0.0.1:26379, 10.0.0.2:26379 db 0",
  // "cluster 127.0.0.1:7000, 127.0.0.1:7001 group 'orders'"; the others end
  // with " group 'G'" when a group is set. Never includes the password or
  // any TLS file.
  std::string Describe() const;
};

// `text` with the secrets of every URL in it masked as "***", for messages
// and logs that may quote a URL (a mistyped argument, an HTTP handler's
// URL, say): the one masking function of the program and the library. A
// URL runs from its "scheme://" to the end of the line or the next URL;
// masked are the part of its user info after the first ':' up to the last
// '@' (all of it when it has no ':', since a lone user info is the
// password) and the value of every query parameter (a parameter without
// '=' whole), "?token=***&db=***": the query ends at a '#', a blank, a
// quote or an angle bracket. Text that is not a URL is kept.
std::string RedactUrls(std::string_view text);

}  // namespace reliableq

#endif  // RELIABLEQ_REDIS_OPTIONS_H_
