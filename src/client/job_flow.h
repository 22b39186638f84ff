// Job flow fields: what expiry, uniqueness and sequences (Job::expires_at,
// Job::expires_in, Job::unique, Job::sequence) add to a job's payload, and
// the unique key a job takes. Pure.
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_CLIENT_JOB_FLOW_H_
#define RELIABLEQ_CLIENT_JOB_FLOW_H_

#include <optional>
#include <string>
#include <string_view>

#include "protocol/keys.h"
#include "protocol/script_calls.h"
#include "reliableq/client.h"
#include "reliableq/job.h"
#include "reliableq/push_result.h"
#include "reliableq/status.h"

namespace reliableq::client {

// True when the job asks for expiry or uniqueness: only then does a push
// pay for the functions below.
inline bool HasFlowFields(const Job& job) {
  return job.expires_at || job.expires_in || job.unique || job.sequence;
}

// kInvalidArgument when job extra `extra_json` names unique_key or
// unique_until: only a unique push (Job::unique) writes them, since the
// worker releases the key a job names. Parses only an extra that mentions
// them.
Status CheckNoUniqueFields(std::string_view extra_json);

// The Redis key of job.unique: keys.Unique(key), key being job.unique->key
// or, when that is empty, "<class>:<hex SHA-256 of the compact args>".
// kInvalidArgument when the key given is empty of meaning (control bytes,
// '"', '\\', over 512 bytes) or args is not JSON. Precondition: job.unique.
Result<std::string> UniqueRedisKey(const protocol::Keys& keys, const Job& job);

// job.extra with the flow fields added after its own: expires_at (epoch
// seconds, created_at + expires_in for expires_in), unique_key (the full
// Redis key, `unique_key`) and unique_until ("success" or "start"),
// sequence (the key, a JSON string) and sequence_release_on_retry (true,
// only when set).
// kInvalidArgument when both expiry fields are given, one is not finite and
// > 0, or extra is not a JSON object or names one of these fields itself.
Result<std::string> ExtraWithFlowFields(const Job& job, double created_at,
                                        const std::string& unique_key);

// A copy of `job` with ExtraWithFlowFields as its extra, and the flow
// options cleared (EncodeJob knows nothing of them); the unique key, if
// any, in `*unique_key`.
Result<Job> JobWithFlowFields(const protocol::Keys& keys, const Job& job, double created_at,
                              std::string* unique_key);

// A copy of `job` with the sequence ClientOptions::sequence_classes or
// sequence_queues switch on for it ("class:<class>" or "queue:<queue>"),
// when it has none; nullopt when neither names it.
std::optional<Job> SwitchedSequence(const ClientOptions& options, const Job& job);

// What push_unique.lua's `reply` (as ReadPushUniqueReply read it) says when
// it did not store job `jid`: another holder of `key` is kDuplicate, a reply
// it could not read is kNotConfirmed; nullopt when the job was stored.
std::optional<PushResult> UniquePushRefusal(const Result<protocol::PushUniqueReply>& reply,
                                            const std::string& jid, const std::string& key);

}  // namespace reliableq::client

#endif  // RELIABLEQ_CLIENT_JOB_FLOW_H_
