#include "redis/redirect_follower.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "redis/connection.h"

namespace reliableq::redis {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kFirstWait{2};
constexpr std::chrono::milliseconds kLongestWait{100};

}  // namespace

RedirectFollower::RedirectFollower(Connection* owner) : owner_(owner) {}

RedirectFollower::~RedirectFollower() = default;

Result<ReplyPtr> RedirectFollower::Follow(const std::vector<std::string_view>& argv,
                                          ReplyPtr reply) {
  const int slot = owner_->discovery_->slot();
  Clock::time_point deadline = Clock::now() + owner_->options_.command_timeout;
  std::chrono::milliseconds wait = kFirstWait;
  std::string where = owner_->at_.Describe();
  while (reply->type == REDIS_REPLY_ERROR) {
    std::string_view text = View(reply.get());
    std::optional<Redirect> redirect = ParseRedirect(text);
    bool again = IsTryAgainReply(text);
    if (!redirect && !again) break;
    if (redirect && !redirect->ask && redirect->slot != slot) {
      return Status::InvalidArgument("a key of slot " + std::to_string(redirect->slot) +
                                     " on a connection that serves slot " + std::to_string(slot) +
                                     " (" + std::string(text) + ")");
    }
    if (Clock::now() >= deadline) break;
    ReplyPtr next;
    Status sent;
    if (again) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      std::this_thread::sleep_for(std::min(wait, left));
      wait = std::min(wait * 2, kLongestWait);
      sent = owner_->Exchange(argv, &next);
      where = owner_->at_.Describe();
    } else if (redirect->ask) {
      sent = AskAt(*redirect, argv, &next);
      where = ask_at_.Describe();
    } else {
      // The owner's Discovery took the new owner from the reply (it saw it
      // in RoundTrip) and dropped the connection: this reconnects there.
      sent = owner_->Exchange(argv, &next);
      where = owner_->at_.Describe();
    }
    if (!sent.ok()) return sent;
    reply = std::move(next);
  }
  if (reply->type != REDIS_REPLY_ERROR) return reply;
  std::string_view text = View(reply.get());
  Status error = FromErrorReply(text);
  // Any other error reply (a script's, say) is the command's answer, as
  // without a cluster; a redirection still there after the command
  // timeout says where it was met.
  if (!ParseRedirect(text) && !IsTryAgainReply(text)) return error;
  return error.WithContext("slot " + std::to_string(slot) + " at " + where + ", for " +
                           std::to_string(owner_->options_.command_timeout.count()) + " ms");
}

Status RedirectFollower::AskAt(const Redirect& ask, const std::vector<std::string_view>& argv,
                               ReplyPtr* reply) {
  Endpoint to{ask.host.empty() ? owner_->at_.host : ask.host, ask.port, {}};
  if (ask_ == nullptr || ask_at_.host != to.host || ask_at_.port != to.port) {
    // A plain connection to the target: this one command is sent there
    // whoever owns the slot in the map, so no Discovery of its own.
    RedisOptions node = owner_->options_;
    node.cluster = RedisClusterOptions();
    node.group.clear();
    node.host = to.host;
    node.port = to.port;
    Result<std::unique_ptr<Connection>> made = Connection::Create(node);
    if (!made.ok()) return made.status();
    ask_ = std::move(*made);
    ask_at_ = to;
    // The target has not run our scripts yet: an EVALSHA there would be
    // NOSCRIPT, which the caller cannot fix on its own connection.
    Status loaded = ask_->LoadScripts();
    if (!loaded.ok()) {
      ask_.reset();
      return loaded.WithContext("ASK to " + to.Describe());
    }
  }
  Result<std::vector<ReplyPtr>> replies = ask_->Pipeline({{"ASKING"}, argv});
  owner_->last_progress_ = ask_->last_progress();
  owner_->last_writer_ = ask_.get();
  if (!replies.ok()) {
    return replies.status().WithContext("ASK to " + to.Describe() + " for slot " +
                                        std::to_string(ask.slot));
  }
  *reply = std::move((*replies)[1]);
  return Status::OK();
}

}  // namespace reliableq::redis
