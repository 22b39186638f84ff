-- limit_acquire.lua: a fetched job of a limited class takes a slot of its
-- limiter and may start, or is parked until the limiter has room.
--
-- KEYS[1]  the worker's working list the job was fetched into (a LIST)
-- KEYS[2]  limit:<name>, the slot holders (a HASH: holder -> start time)
-- KEYS[3]  limit:<name>:starts, the rate window (a ZSET: holder -> start
--          time, epoch seconds)
-- KEYS[4]  limit:<name>:waiting, jobs parked on a full concurrency limit
--          (a LIST, oldest at the LEFT)
-- KEYS[5]  schedule (a ZSET: payload -> epoch seconds it is due at)
-- ARGV[1]  the payload, byte for byte as fetched
-- ARGV[2]  the holder: "<n>@<identity>", n unique within the process, so
--          that limit_reap.lua finds the holders of dead processes
-- ARGV[3]  now, epoch seconds; empty: Redis's own clock (TIME), which the
--          worker asks for, so that workers whose clocks disagree still
--          keep one rate window between them
-- ARGV[4]  concurrency N (0: none)
-- ARGV[5]  rate R (0: none)
-- ARGV[6]  the rate's period, seconds
-- ARGV[7]  jitter, seconds (>= 0), added to the time a rate-limited job
--          is scheduled at, so that parked jobs do not all come back at once
-- ARGV[8]  the wake-up channel of scheduled jobs (Keys::WakeScheduled; a
--          channel, not a key)
--
-- When the job is not in KEYS[1] (the process was taken for dead and a
-- janitor recovered it), nothing is written. When N > 0 and the limiter
-- has N holders: LREM the job from KEYS[1] and RPUSH it to KEYS[4]
-- (limit_release.lua and limit_reap.lua move it back to its queue when a
-- slot frees). Else, when R > 0 and R starts lie in the window (now -
-- period, now]: LREM the job and ZADD it to schedule at the time the
-- oldest of them leaves the window, plus the jitter (PUBLISH that time on
-- ARGV[8] when it is the earliest scheduled job, as schedule.lua does).
-- Else HSET KEYS[2] holder now, and when R > 0 ZADD KEYS[3] now holder:
-- the job holds a slot and may start. Each step moves the job from one
-- place to one other, in one script.
--
-- Returns {'start'}, {'waiting', holders}, {'scheduled', at} or {'gone'}.
-- Errors: RQ_INVALID on a bad argument; WRONGTYPE naming the key when a
-- key exists with another type; nothing is written then.
-- @include lib/args.lua

if #KEYS ~= 5 or #ARGV ~= 8 then
  return redis.error_reply('RQ_INVALID limit_acquire: want 5 keys and 8 arguments')
end
local payload, holder = ARGV[1], ARGV[2]
local now, now_text = tonumber(ARGV[3]), ARGV[3]
if ARGV[3] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) + tonumber(time[2]) / 1e6
  now_text = string.format('%.6f', now)
end
local concurrency = parse_int(ARGV[4], 0)
local rate = parse_int(ARGV[5], 0)
local period = tonumber(ARGV[6])
local jitter = tonumber(ARGV[7])
if now == nil or now ~= now or concurrency == nil or rate == nil or period == nil or
    period ~= period or jitter == nil or jitter ~= jitter or jitter < 0 or
    (rate > 0 and period <= 0) or holder == '' then
  return redis.error_reply('RQ_INVALID limit_acquire: bad arguments')
end
local bad = check_types('limit_acquire', 'list', 1, 1) or
    check_types('limit_acquire', 'hash', 2, 2) or check_types('limit_acquire', 'zset', 3, 3) or
    check_types('limit_acquire', 'list', 4, 4) or check_types('limit_acquire', 'zset', 5, 5)
if bad then return bad end

if not redis.call('LPOS', KEYS[1], payload) then return {'gone'} end

if concurrency > 0 then
  local holders = redis.call('HLEN', KEYS[2])
  if holders >= concurrency then
    redis.call('LREM', KEYS[1], -1, payload)
    redis.call('RPUSH', KEYS[4], payload)
    return {'waiting', holders}
  end
end

if rate > 0 then
  -- The starts in the window are counted without removing the older ones
  -- first: that removal may empty the key, which the script then could not
  -- name again on a Redis Cluster whose slot migrates (lib/payload.lua).
  -- They go after the ZADD below, or while the window stays full.
  local window_start = string.format('(%.6f', now - period)
  if redis.call('ZCOUNT', KEYS[3], window_start, '+inf') >= rate then
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%.6f', now - period))
    local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    local at = string.format('%.6f', tonumber(oldest[2]) + period + jitter)
    redis.call('LREM', KEYS[1], -1, payload)
    redis.call('ZADD', KEYS[5], at, payload)
    if redis.call('ZCOUNT', KEYS[5], '-inf', at) == 1 then
      redis.call('PUBLISH', ARGV[8], at)
    end
    return {'scheduled', at}
  end
  redis.call('ZADD', KEYS[3], now_text, holder)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%.6f', now - period))
  -- An idle limiter's window empties itself.
  redis.call('PEXPIRE', KEYS[3], int_string(math.ceil(period * 1000) + 1000))
end
redis.call('HSET', KEYS[2], holder, now_text)
return {'start'}
