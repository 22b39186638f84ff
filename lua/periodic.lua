-- periodic.lua: push the job of one tick of a periodic job, exactly once
-- across every worker that declares it, and record that it was pushed, in
-- one step.
--
-- KEYS[1]  periodic:<name> (HASH: the recorded declaration, see
--          periodic_declare.lua, and last_tick, last_pushed_at, last_jid)
-- KEYS[2]  periodic:<name>:ticks (ZSET: the ticks pushed, member and score
--          the tick's epoch seconds)
-- KEYS[3]  queues (SET of queue names)
-- KEYS[4]  queue:<q>, the job's queue (LIST)
-- ARGV[1]  the digest of the caller's declaration
-- ARGV[2]  the tick, integer epoch seconds
-- ARGV[3]  how many ticks the ZSET keeps (>= 1)
-- ARGV[4]  'tick', or 'catch_up': a tick from before the caller started,
--          pushed only when it is later than every tick recorded
-- ARGV[5]  the queue's wake-up channel (Keys::WakeQueue(q); not a key)
-- ARGV[6]  the queue's name q
-- ARGV[7]  the payload
-- ARGV[8]  the jid in the payload
-- ARGV[9]  now, epoch seconds: a 'tick' later than now is early, and now
--          is recorded as last_pushed_at; empty: Redis's own clock (TIME),
--          which workers give, so that a worker whose clock runs ahead
--          pushes no tick early (reliableq-schema(7), CLOCKS)
--
-- Refuses, writing nothing, in this order: a declaration that is not
-- recorded (KEYS[1] has no digest: the caller declares again); a recorded
-- digest other than ARGV[1] (another worker's declaration won); a tick
-- already in the ZSET; for tick, a tick later than now; a tick older than every tick the ZSET keeps when it
-- is full (its record is gone, so it may have been pushed); for catch_up,
-- a tick not later than the latest recorded. Otherwise it adds the tick,
-- trims the ZSET to its ARGV[3] latest ticks, sets last_tick,
-- last_pushed_at and last_jid, adds q to queues and LPUSHes the payload,
-- publishing q on ARGV[5] when the queue was empty (as push.lua does).
--
-- Returns {'pushed'}, {'undeclared'}, {'conflict', declared_by},
-- {'duplicate'}, {'early', now}, {'too_late'} or {'superseded', latest
-- tick}.
-- Errors: RQ_INVALID for bad ARGV; WRONGTYPE naming the key when a key
-- exists with another type; nothing is written then.
-- @include lib/args.lua

local tick = parse_int(ARGV[2], 0)
local keep = parse_int(ARGV[3], 1)
local mode = ARGV[4]
if #KEYS ~= 4 or tick == nil or keep == nil or (mode ~= 'tick' and mode ~= 'catch_up') or
    ARGV[9] == nil then
  return redis.error_reply('RQ_INVALID periodic: want 4 KEYS and ARGV digest, tick, keep, ' ..
                           'mode, channel, queue, payload, jid, now')
end
local bad = check_types('periodic', 'hash', 1, 1) or check_types('periodic', 'zset', 2, 2) or
    check_types('periodic', 'set', 3, 3) or check_types('periodic', 'list', 4, 4)
if bad then return bad end

local recorded = redis.call('HGET', KEYS[1], 'digest')
if not recorded then return {'undeclared'} end
if recorded ~= ARGV[1] then
  return {'conflict', redis.call('HGET', KEYS[1], 'declared_by') or ''}
end
local now = ARGV[9]
if now == '' then
  local time = redis.call('TIME')
  now = string.format('%d.%06d', tonumber(time[1]), tonumber(time[2]))
end
if tonumber(now) == nil then
  return redis.error_reply('RQ_INVALID periodic: now must be epoch seconds, got ' .. now)
end
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return {'duplicate'} end
if mode == 'tick' and tick > tonumber(now) then return {'early', now} end
local latest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if mode == 'catch_up' and latest[2] and tonumber(latest[2]) >= tick then
  return {'superseded', latest[2]}
end
if redis.call('ZCARD', KEYS[2]) >= keep then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if tick < tonumber(oldest[2]) then return {'too_late'} end
end

redis.call('ZADD', KEYS[2], tick, ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(keep + 1))
if latest[2] == nil or tick > tonumber(latest[2]) then
  redis.call('HSET', KEYS[1], 'last_tick', ARGV[2], 'last_pushed_at', now,
             'last_jid', ARGV[8])
end
redis.call('SADD', KEYS[3], ARGV[6])
if redis.call('LPUSH', KEYS[4], ARGV[7]) == 1 then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return {'pushed'}
