-- schedule.lua: schedule a job for later, and wake the workers that sleep
-- until the earliest scheduled job when this one comes first.
--
-- KEYS[1]  schedule (a ZSET: payload -> epoch seconds it is due at)
-- ARGV[1]  the time it is due at, epoch seconds as FormatEpoch writes them
-- ARGV[2]  the payload, byte for byte
-- ARGV[3]  the wake-up channel of scheduled jobs (Keys::WakeScheduled; a
--          channel, not a key)
--
-- ZADD schedule ARGV[1] ARGV[2], as Sidekiq's client does. Then, when no
-- other member of schedule is due at or before ARGV[1], the job is the
-- earliest one: PUBLISH ARGV[3] ARGV[1], so that a poller sleeping until
-- the earliest due time it knew wakes up and sleeps until this one
-- instead. A job due no earlier than another one publishes nothing: the
-- pollers already wake up before it is due.
--
-- Returns 1 when the payload was added, 0 when it was already scheduled
-- (its time is now ARGV[1]).
-- Errors: RQ_INVALID when ARGV[1] is not a number or ARGV[2] or ARGV[3] is
-- missing; WRONGTYPE naming the key when KEYS[1] exists and is not a ZSET;
-- nothing is written then.
-- @include lib/args.lua

if #KEYS ~= 1 or #ARGV ~= 3 then
  return redis.error_reply('RQ_INVALID schedule: want 1 key and 3 arguments, got ' ..
                           int_string(#KEYS) .. ' and ' .. int_string(#ARGV))
end
local at = tonumber(ARGV[1])
-- at ~= at: NaN, which ZADD refuses only after the type check.
if at == nil or at ~= at then
  return redis.error_reply('RQ_INVALID schedule: the due time must be a number, got ' ..
                           ARGV[1])
end
local bad = check_types('schedule.lua', 'zset', 1, 1)
if bad then return bad end

local added = redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
if redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[1]) == 1 then
  redis.call('PUBLISH', ARGV[3], ARGV[1])
end
return added
