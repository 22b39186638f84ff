#include "server/queue_pauses.h"

#include "redis/reply.h"
#include "base/text_escape.h"

namespace reliableq::server {

QueuePauses::QueuePauses(redis::AsyncConnection& command, const protocol::Keys& keys, QueueSet& queues,
                         const base::Logger& log, Events events)
    : command_(command),
      key_(keys.Paused()),
      queues_(queues),
      log_(log),
      events_(std::move(events)) {}

Status QueuePauses::Load(redis::Connection& connection) {
  Result<redis::ReplyPtr> reply = connection.Command({"SMEMBERS", key_});
  if (!reply.ok()) return reply.status();
  Result<std::vector<std::string>> names = redis::ToStrings(*reply);
  if (!names.ok()) {
    return Status::Script("cannot read the paused queues at " + key_ + ": " +
                          names.status().message());
  }
  Apply({names->begin(), names->end()});
  return Status::OK();
}

void QueuePauses::Refresh() {
  if (!command_.ready()) return;
  uint64_t messages_before = messages_;
  command_.Command({"SMEMBERS", key_}, [this, messages_before](const Status& s,
                                                               redis::ReplyRef reply) {
    if (!s.ok()) return;  // the connection's own handling reports it
    if (messages_ != messages_before) return;
    Result<std::vector<std::string>> names = redis::ToStrings(reply);
    if (!names.ok()) {
      if (!read_failure_logged_) {
        read_failure_logged_ = true;
        std::string error = names.status().message();
        log_.Log(LogLevel::kWarn, base::LogEvent("paused_unreadable").WithError(error),
                 "cannot read the paused queues at %s: %s; pauses stay as they were",
                 base::Escaped(key_).c_str(), base::Escaped(error).c_str());
      }
      return;
    }
    read_failure_logged_ = false;
    Apply({names->begin(), names->end()});
  });
}

void QueuePauses::OnMessage(std::string_view message) {
  size_t space = message.find(' ');
  if (space == std::string_view::npos) return;
  std::string_view verb = message.substr(0, space);
  std::string name(message.substr(space + 1));
  std::set<std::string> names = names_;
  if (verb == "pause") {
    names.insert(std::move(name));
  } else if (verb == "resume") {
    names.erase(name);
  } else {
    return;
  }
  ++messages_;
  Apply(std::move(names));
}

void QueuePauses::Apply(std::set<std::string> names) {
  std::vector<uint32_t> paused;
  std::vector<uint32_t> resumed;
  for (uint32_t q : queues_.SetPaused({names.begin(), names.end()})) {
    const std::string& name = queues_[q].name;
    if (queues_.paused(q)) {
      log_.Log(LogLevel::kInfo, base::LogEvent("queue_paused").WithQueue(name),
               "queue %s is paused: no new jobs from it", base::Escaped(name).c_str());
      paused.push_back(q);
    } else {
      log_.Log(LogLevel::kInfo, base::LogEvent("queue_resumed").WithQueue(name), "queue %s is resumed",
               base::Escaped(name).c_str());
      resumed.push_back(q);
    }
  }
  names_ = std::move(names);
  if (!paused.empty()) events_.on_paused(paused);
  if (!resumed.empty()) events_.on_resumed(resumed);
}

}  // namespace reliableq::server
