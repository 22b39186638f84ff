#include "client/client_options.h"

#include <string>

#include "protocol/keys.h"

namespace reliableq::client {

Result<RedisOptions> ClientConnectionOptions(const RedisOptions& options,
                                             const ClientOptions& client) {
  if (client.wait_replicas < 0) {
    return Status::InvalidArgument("wait_replicas is " + std::to_string(client.wait_replicas) +
                                   ": it must be 0 (off) or the number of replicas to wait for");
  }
  if (client.wait_timeout.count() <= 0) {
    return Status::InvalidArgument("wait_timeout is " +
                                   std::to_string(client.wait_timeout.count()) +
                                   " ms: it must be more than 0 (WAIT 0 would wait forever)");
  }
  if (!client.spool_dir.empty() && client.spool_replay_window.count() < 1) {
    return Status::InvalidArgument("spool_replay_window is " +
                                   std::to_string(client.spool_replay_window.count()) +
                                   " s: it must be at least 1 s");
  }
  for (const auto* names : {&client.sequence_classes, &client.sequence_queues}) {
    for (const std::string& name : *names) {
      if (name.empty()) {
        return Status::InvalidArgument(
            "sequence_classes and sequence_queues name no empty class or queue");
      }
    }
  }
  // The spool and the client build their keys from these two.
  if (Status s = protocol::CheckKeyLayout(client.prefix, options.group); !s.ok()) return s;
  RedisOptions out = options;
  if (client.wait_replicas > 0) out.command_timeout += client.wait_timeout;
  return out;
}

}  // namespace reliableq::client
