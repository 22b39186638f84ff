-- finish.lua: the end of one run of a job, in one step: the job leaves its
-- working list for where its outcome sends it, is counted, and the
-- features its payload carries end or wait with it (reliableq-schema(7),
-- "The end of a job's life"). The worker sends every outcome here but a
-- success: that is its pipelined LREM, or ack.lua for a job whose payload
-- carries a feature marker. Mode "done" serves other callers.
--
-- KEYS[1]  the working list the job was fetched into
-- KEYS[2]  the target ZSET: retry (mode "retry"), schedule ("snooze") or
--          dead ("dead"); unused by the other modes
-- KEYS[3]  stat:processed
-- KEYS[4]  stat:processed:<YYYY-MM-DD>
-- KEYS[5]  stat:failed
-- KEYS[6]  stat:failed:<YYYY-MM-DD>
-- KEYS[7]  stat:expired (reliableq's, a STRING counter)
-- KEYS[8]  optional: the job's final record, <prefix>job:<jid> (with
--          ARGV[10])
-- ARGV[1]  the payload, byte for byte as it was fetched
-- ARGV[2]  the payload it moves as (modes "retry", "snooze", "dead"): the
--          worker's edit of it (error fields, retry_count, snooze_count);
--          unused by the others
-- ARGV[3]  score in the target (float seconds; "retry" and "snooze")
-- ARGV[4]  mode, what the run came to:
--            "done"     succeeded: removed                 counts processed
--            "snooze"   not yet: ZADD schedule score new   counts processed
--            "retry"    failed: ZADD retry score new       counts processed, failed
--            "dead"     failed for good: the dead set      counts processed, failed
--            "discard"  failed, dropped (retry false, dead false, a discard)
--                                                          counts processed, failed
--            "expire"   never ran, its expires_at passed   counts expired
-- ARGV[5]  now, float seconds with a fractional part (mode "dead": the
--          dead-set score)
-- ARGV[6]  dead max jobs (mode "dead"; integer >= 1)
-- ARGV[7]  dead timeout in seconds (mode "dead"; integer >= 0)
-- ARGV[8]  "1": count the run as the mode says (the processed and failed
--          totals and their dated keys, which expire after 157680000 s);
--          "0": count nothing (a payload that is not a job, as Sidekiq);
--          "2": count it only when the job was still in the working list
--          (a call sent again after its reply was lost: if the first one
--          ran, it moved and counted the job already)
-- ARGV[9]  optional: the wake-up channel of scheduled jobs
--          (reliableq:wake:scheduled with the default prefix). Modes
--          "retry" and "snooze": when the job it adds is the earliest member
--          of its target, PUBLISH this channel the score (ARGV[3] as given),
--          so that idle workers sleeping until a later head wake at its
--          time. Absent or "": no PUBLISH.
-- ARGV[10] optional: the job's final record (JSON), SET into KEYS[8] with
--          EX ARGV[11] when the job moved and its life ends here (modes
--          done, dead, discard, expire); absent or "": no record
-- ARGV[11] the record's retention in seconds (integer >= 1; with ARGV[10])
-- ARGV[12] optional: the prefix of the sequence keys
--          (Keys::SequencePrefix); absent or "": no sequence is released
-- ARGV[13] the prefix of queue keys (Keys::Queue(""): "queue:")
-- ARGV[14] the prefix of the queue wake-up channels (Keys::WakeQueue(""))
--
-- The target is written only when LREM working -1 original removed the job
-- (from the tail, where the oldest fetched job sits): if a janitor already
-- gave the job back, it lives in its queue and must not be in two places.
-- The counts are made in both cases (but see ARGV[8] "2"): the job did run.
--
-- The features, each a case of lib/features.lua, keyed by a marker in the
-- payload: the unique key (lib/unique.lua) and the sequence key
-- (lib/sequence.lua, ARGV[12..14]: handed on to the oldest job waiting for
-- it) are released when the job's life ends (done, dead, discard, expire)
-- and kept while it waits to run again (retry, snooze), but for a sequence
-- whose job says "sequence_release_on_retry": true, which a retry releases
-- too. A feature's key is not among KEYS: its name comes from the payload,
-- in the slot of KEYS[1] (layout 2's hash tag).
--
-- The record (ARGV[10]) is written only when the job moved: when a janitor
-- gave it back, it runs again and its next end writes one.
--
-- The PUBLISH (ARGV[9]) comes after every write. A message nobody hears is
-- lost; the job is then found by the next fallback read of the heads by any
-- worker's poller (reliableq-schema(7), promote.lua).
--
-- Returns 1 when the job was moved, 0 when it was not in the working list.
-- Errors: RQ_INVALID for a bad mode, count flag, score, now or dead limits;
-- WRONGTYPE when a key it may write exists with another type (KEYS[1] not a
-- LIST, KEYS[2] not a ZSET in the modes that write it, the counters the mode
-- counts not STRINGs, a sequence key it releases not of its type, or the
-- queue it hands the key on to not a LIST); nothing is written then.
-- TRYAGAIN when a unique or sequence key is not on this node while the
-- slot migrates; nothing is written then either. A counter that holds a
-- string that is not an integer is left alone, and the job still moves.

-- @include lib/args.lua
-- @include lib/dead.lua
-- @include lib/features.lua

local sequences = sequence_context(12)
-- How the run ends, for the features the payload carries.
local HOW = {done = 'ends', dead = 'ends', discard = 'ends', expire = 'ends', retry = 'retry',
             snooze = 'waits'}

-- mode -> {target ZSET written, counts processed, counts failed, life ends}
local MODES = {
  done = {false, true, false, true},
  snooze = {true, true, false, false},
  retry = {true, true, true, false},
  dead = {true, true, true, true},
  discard = {false, true, true, true},
  expire = {false, false, false, true},
}

local mode = MODES[ARGV[4]]
if mode == nil then
  return redis.error_reply('RQ_INVALID finish: mode must be done, snooze, retry, dead, ' ..
                           'discard or expire, got ' .. tostring(ARGV[4]))
end
local writes_target, counts_processed, counts_failed, life_ends =
    mode[1], mode[2], mode[3], mode[4]
local flag = ARGV[8]
if flag ~= '0' and flag ~= '1' and flag ~= '2' then
  return redis.error_reply('RQ_INVALID finish: count flag must be 0, 1 or 2')
end
if (ARGV[4] == 'retry' or ARGV[4] == 'snooze') and tonumber(ARGV[3]) == nil then
  return redis.error_reply('RQ_INVALID finish: bad score ' .. tostring(ARGV[3]))
end
local record = ARGV[10] ~= nil and ARGV[10] ~= ''
if record and (KEYS[8] == nil or parse_int(ARGV[11], 1) == nil) then
  return redis.error_reply('RQ_INVALID finish: a record needs KEYS[8] and a retention >= 1')
end
if ARGV[4] == 'dead' then
  if not is_float_seconds(ARGV[5]) then
    return redis.error_reply('RQ_INVALID finish: now must be float seconds, got ' ..
                             tostring(ARGV[5]))
  end
  if parse_int(ARGV[6], 1) == nil or parse_int(ARGV[7], 0) == nil then
    return redis.error_reply('RQ_INVALID finish: bad dead max jobs or timeout')
  end
end

-- The counters too, though no job is lost on them: INCRBY on a key of
-- another type would fail the script after the move, and again every time
-- the outcome is sent.
local counters = {}
if flag ~= '0' then
  if counts_processed then counters[#counters + 1] = 3; counters[#counters + 1] = 4 end
  if counts_failed then counters[#counters + 1] = 5; counters[#counters + 1] = 6 end
  if ARGV[4] == 'expire' then counters[#counters + 1] = 7 end
end
local bad = check_types('finish', 'list', 1, 1) or
    (writes_target and check_types('finish', 'zset', 2, 2))
if bad then return bad end
for _, i in ipairs(counters) do
  bad = check_types('finish', 'string', i, i)
  if bad then return bad end
end
-- A counter that holds something else than an integer (set by hand) would
-- fail INCRBY after the move, and the outcome would be sent again forever:
-- such counters are left alone, and the job moves all the same.
local countable = {}
for _, i in ipairs(counters) do
  local value = redis.call('GET', KEYS[i])
  if not value or string.find(value, '^%-?%d+$') then countable[#countable + 1] = i end
end

local away = features_reachable(sequences, ARGV[1], HOW[ARGV[4]], 'finish')
if away then return away end

local wake = false
local moved = redis.call('LREM', KEYS[1], '-1', ARGV[1])
if moved > 0 then
  if ARGV[4] == 'dead' then
    dead_add(KEYS[2], ARGV[5], {ARGV[2]}, ARGV[6], ARGV[7])
  elseif writes_target then
    redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
    -- Only when it is the head: the workers already wake at the head's
    -- time, which is not after any other member's (one tied with the head
    -- but sorted after it is due at that same time).
    if ARGV[9] and ARGV[9] ~= '' and redis.call('ZRANK', KEYS[2], ARGV[2]) == 0 then
      wake = true
    end
  end
  features_end(sequences, ARGV[1], HOW[ARGV[4]])
  if life_ends and record then redis.call('SET', KEYS[8], ARGV[10], 'EX', ARGV[11]) end
end
if flag == '1' or (flag == '2' and moved > 0) then
  for _, i in ipairs(countable) do
    redis.call('INCRBY', KEYS[i], '1')
    if i == 4 or i == 6 then redis.call('EXPIRE', KEYS[i], '157680000') end
  end
end
if wake then redis.call('PUBLISH', ARGV[9], ARGV[3]) end
if moved > 0 then return 1 end
return 0
