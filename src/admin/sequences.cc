// Admin's sequences: the keys of lib/sequence.lua read (ListSequences) and
// the operator's scripts sequence_release.lua and sequence_skip.lua.

#include "admin/sequences.h"

#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace reliableq::admin {

Sequences::Sequences(AdminContext& context) : context_(context) {}

Result<SequenceListing> Sequences::List(int64_t limit) {
  if (limit < 1) return Status::InvalidArgument("the sequence limit must be at least 1");
  const std::string since = context_.keys.SequencesSince();
  const std::string last = std::to_string(limit - 1);
  std::vector<redis::Argv> heads = {{"ZRANGE", since, "0", last, "WITHSCORES"}, {"ZCARD", since}};
  Result<std::vector<redis::ReplyPtr>> read = context_.redis->Pipeline(heads);
  if (Status s = context_.Failed(read, heads, "reading sequences"); !s.ok()) return s;
  SequenceListing listing;
  listing.held = redis::CounterValue((*read)[1]);
  for (redis::ScoredMember& m : redis::ScoredMembers((*read)[0])) {
    listing.sequences.push_back(
        SequenceInfo{.key = std::move(m.member), .holder = {}, .held_since = m.score});
  }
  if (listing.sequences.empty()) return listing;

  // The holders in one HMGET, the waiting counts beside it.
  const std::string holders = context_.keys.Sequences();
  std::deque<std::string> waiting;  // the pipeline's arguments point into these
  std::vector<redis::Argv> commands(1);
  commands[0] = {"HMGET", holders};
  for (const SequenceInfo& info : listing.sequences) {
    commands[0].push_back(info.key);
    commands.push_back({"LLEN", waiting.emplace_back(context_.keys.SequenceWaiting(info.key))});
  }
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading sequences"); !s.ok()) return s;
  std::vector<std::string> jids = redis::StringArray((*replies)[0]);
  for (size_t i = 0; i < listing.sequences.size(); ++i) {
    if (i < jids.size()) listing.sequences[i].holder = std::move(jids[i]);
    listing.sequences[i].waiting = redis::CounterValue((*replies)[i + 1]);
  }
  return listing;
}

Result<SequenceRelease> Sequences::Release(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("the sequence key must not be empty");
  Result<redis::ReplyPtr> reply =
      context_.redis->Eval(protocol::SequenceReleaseCall(context_.keys, key));
  if (!reply.ok()) return reply.status().WithContext("releasing a sequence");
  Result<protocol::SequenceReleaseReply> read = protocol::ReadSequenceReleaseReply(*reply);
  if (!read.ok()) return read.status();
  if (!read->held) {
    return Status::NotFound("sequence key '" + std::string(key) +
                            "' is not held; nothing was done");
  }
  return SequenceRelease{.holder = std::move(read->holder), .next = std::move(read->next)};
}

Result<SequenceSkip> Sequences::SkipHead(std::string_view key, const DeadSetLimits& limits) {
  if (key.empty()) return Status::InvalidArgument("the sequence key must not be empty");
  if (Status s = CheckDeadLimits(limits); !s.ok()) return s;
  Result<redis::ReplyPtr> reply = context_.redis->Eval(
      protocol::SequenceSkipCall(context_.keys, key, context_.clock->Now(), limits));
  if (!reply.ok()) return reply.status().WithContext("skipping a sequence's job");
  Result<protocol::SequenceSkipReply> read = protocol::ReadSequenceSkipReply(*reply);
  if (!read.ok()) return read.status();
  if (!read->skipped) {
    return Status::NotFound("no job waits for sequence key '" + std::string(key) +
                            "'; nothing was done");
  }
  return SequenceSkip{.jid = std::move(read->jid), .next = std::move(read->next)};
}

}  // namespace reliableq::admin
