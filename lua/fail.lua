-- fail.lua: move a failed job from its working list to retry or dead.
--
-- KEYS[1]  the working list the job was fetched into
-- KEYS[2]  the target ZSET: retry (mode "retry") or dead (mode "dead");
--          unused with mode "drop"
-- KEYS[3]  stat:processed
-- KEYS[4]  stat:processed:<YYYY-MM-DD>
-- KEYS[5]  stat:failed
-- KEYS[6]  stat:failed:<YYYY-MM-DD>
-- ARGV[1]  the original payload, byte for byte as it was fetched
-- ARGV[2]  the new payload, already carrying retry_count, error fields and
--          failed_at/retried_at
-- ARGV[3]  score: when to retry (float seconds; mode "retry" only)
-- ARGV[4]  mode: "retry" (ZADD retry score new), "dead" (Sidekiq's dead-set
--          insert with trims) or "drop" (only remove it)
-- ARGV[5]  now, float seconds with a fractional part (mode "dead": the
--          dead-set score)
-- ARGV[6]  dead max jobs (mode "dead"; integer >= 1)
-- ARGV[7]  dead timeout in seconds (mode "dead"; integer >= 0)
-- ARGV[8]  "1": count the execution (processed +1 and failed +1, both the
--          totals and the dated keys, which expire after 157680000 s);
--          "0": count nothing (a payload that is not valid JSON, as Sidekiq);
--          "2": count it only when the job was still in the working list
--          (a call sent again after its reply was lost: if the first one
--          ran, it moved and counted the job already)
-- ARGV[9]  optional: the wake-up channel of scheduled jobs
--          (reliableq:wake:scheduled with the default prefix). Mode
--          "retry": when the job it adds is the earliest member of retry,
--          PUBLISH this channel the score (ARGV[3] as given), so that idle
--          workers sleeping until a later head wake at its time. Absent or
--          "": no PUBLISH.
--
-- The target is written only when LREM working 1 original removed the job:
-- if a janitor already gave the job back, it lives in its queue and must not
-- be in two places. The stats are counted in both cases: the job did run.
--
-- Modes "dead" and "drop" release the job's unique key, if it holds one
-- (lib/unique.lua, compare-and-delete), when the job moved; "retry" keeps
-- it.
--
-- The PUBLISH (ARGV[9]) comes after every write. A message nobody hears
-- is lost; the retry is then found by the next fallback read of the heads
-- by any worker's poller (reliableq-schema(7), promote.lua).
--
-- Returns 1 when the job was moved, 0 when it was not in the working list.
-- Errors: RQ_INVALID for a bad mode, count flag, score, now or dead limits;
-- WRONGTYPE when a key it may write exists with another type (KEYS[1] not
-- a LIST, KEYS[2] not a ZSET unless the mode is "drop", KEYS[3..6] not
-- STRINGs when the count flag is not "0"); nothing is written then. When
-- one of KEYS[3..6] holds a string that is not an integer, nothing is
-- counted and the job still moves.

-- @include lib/payload.lua
-- @include lib/unique.lua

local mode = ARGV[4]
if mode ~= 'retry' and mode ~= 'dead' and mode ~= 'drop' then
  return redis.error_reply('RQ_INVALID fail: mode must be retry, dead or drop, got ' ..
                           tostring(mode))
end
if ARGV[8] ~= '0' and ARGV[8] ~= '1' and ARGV[8] ~= '2' then
  return redis.error_reply('RQ_INVALID fail: count flag must be 0, 1 or 2')
end
if mode == 'retry' and tonumber(ARGV[3]) == nil then
  return redis.error_reply('RQ_INVALID fail: bad retry score ' .. tostring(ARGV[3]))
end
if mode == 'dead' then
  if not is_float_seconds(ARGV[5]) then
    return redis.error_reply('RQ_INVALID fail: now must be float seconds, got ' ..
                             tostring(ARGV[5]))
  end
  if parse_int(ARGV[6], 1) == nil or parse_int(ARGV[7], 0) == nil then
    return redis.error_reply('RQ_INVALID fail: bad dead max jobs or timeout')
  end
end
-- The counters too, though no job is lost on them: INCRBY on a key of
-- another type would fail the script after the move, and again every time
-- the outcome is sent.
local bad = check_types('fail', 'list', 1, 1) or
    (mode ~= 'drop' and check_types('fail', 'zset', 2, 2)) or
    (ARGV[8] ~= '0' and check_types('fail', 'string', 3, 6))
if bad then return bad end

-- A counter that holds something else than an integer (set by hand) would
-- fail INCRBY after the move, and the outcome would be sent again forever:
-- such counters are left alone, and the job moves all the same.
local countable = ARGV[8] ~= '0'
for i = 3, 6 do
  if countable then
    local value = redis.call('GET', KEYS[i])
    if value and not string.find(value, '^%-?%d+$') then countable = false end
  end
end

if mode ~= 'retry' then
  local away = unique_reachable(ARGV[1])
  if away then return away end
end

local wake = false
local moved = redis.call('LREM', KEYS[1], '1', ARGV[1])
if moved > 0 then
  if mode == 'retry' then
    redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
    -- Only when it is the head: the workers already wake at the head's
    -- time, which is not after any other member's (one tied with the head
    -- but sorted after it is due at that same time).
    if ARGV[9] and ARGV[9] ~= '' and redis.call('ZRANK', KEYS[2], ARGV[2]) == 0 then
      wake = true
    end
  elseif mode == 'dead' then
    dead_add(KEYS[2], ARGV[5], {ARGV[2]}, ARGV[6], ARGV[7])
  end
  -- Its life ends in dead or here: a unique key it holds is free again.
  -- A retry keeps it: the job has not succeeded yet.
  if mode ~= 'retry' then unique_release(ARGV[1]) end
end
if countable and (ARGV[8] == '1' or (ARGV[8] == '2' and moved > 0)) then
  redis.call('INCRBY', KEYS[3], '1')
  redis.call('INCRBY', KEYS[4], '1')
  redis.call('EXPIRE', KEYS[4], '157680000')
  redis.call('INCRBY', KEYS[5], '1')
  redis.call('INCRBY', KEYS[6], '1')
  redis.call('EXPIRE', KEYS[6], '157680000')
end
if wake then redis.call('PUBLISH', ARGV[9], ARGV[3]) end
if moved > 0 then return 1 end
return 0
