-- push_unique.lua: push one job unless its unique key is held, and take the
-- key for it, in one step.
--
-- KEYS[1]  the job's unique key (P unique:<key>; a STRING holding the jid
--          of the job that holds it)
-- KEYS[2]  queues (SET of queue names); mode "now" only
-- KEYS[3]  queue:<q> (a LIST) for mode "now", schedule (a ZSET) for "at"
-- ARGV[1]  mode: "now" (to its queue) or "at" (into schedule)
-- ARGV[2]  the job's jid, the value the key takes
-- ARGV[3]  the key's time to live in milliseconds, "" or "0" for none
-- ARGV[4]  the payload, byte for byte
-- ARGV[5]  mode "now": the queue's name q; mode "at": the due time, epoch
--          seconds as FormatEpoch writes them
-- ARGV[6]  mode "now": the queue's wake-up channel (Keys::WakeQueue(q));
--          mode "at": the scheduled jobs' channel (Keys::WakeScheduled)
--
-- When KEYS[1] exists, nothing is written and its value, the jid of the
-- job holding it, is returned. Otherwise SET KEYS[1] jid (PX ttl when
-- given), then as push.lua (mode "now": LPUSH, SADD, PUBLISH when the
-- queue was empty) or schedule.lua (mode "at": ZADD, PUBLISH when it is
-- the earliest) would. push.lua and schedule.lua stay as they are: pushes
-- without uniqueness pay nothing for it.
--
-- Returns 1 when the job was pushed, or the holder's jid (a string).
-- Errors: RQ_INVALID for a bad mode, ttl or due time, or missing ARGV;
-- WRONGTYPE naming the key when KEYS[1] is not a STRING, KEYS[2] not a SET
-- or KEYS[3] not a LIST (mode "now") or ZSET (mode "at"); nothing is
-- written then.
-- @include lib/args.lua

local mode = ARGV[1]
if #KEYS ~= 3 or #ARGV ~= 6 or (mode ~= 'now' and mode ~= 'at') then
  return redis.error_reply('RQ_INVALID push_unique: want 3 keys, 6 arguments and mode now or at')
end
local ttl = 0
if ARGV[3] ~= '' then
  ttl = parse_int(ARGV[3], 0)
  if ttl == nil then
    return redis.error_reply('RQ_INVALID push_unique: ttl must be an integer >= 0, got ' ..
                             ARGV[3])
  end
end
local at = tonumber(ARGV[5])
if mode == 'at' and (at == nil or at ~= at) then
  return redis.error_reply('RQ_INVALID push_unique: the due time must be a number, got ' ..
                           ARGV[5])
end
local bad = check_types('push_unique', 'string', 1, 1) or
    (mode == 'now' and (check_types('push_unique', 'set', 2, 2) or
                        check_types('push_unique', 'list', 3, 3))) or
    (mode == 'at' and check_types('push_unique', 'zset', 3, 3))
if bad then return bad end

local holder = redis.call('GET', KEYS[1])
if holder then return holder end
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
else
  redis.call('SET', KEYS[1], ARGV[2])
end
if mode == 'now' then
  local length = redis.call('LPUSH', KEYS[3], ARGV[4])
  redis.call('SADD', KEYS[2], ARGV[5])
  if length == 1 then redis.call('PUBLISH', ARGV[6], ARGV[5]) end
else
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[4])
  if redis.call('ZCOUNT', KEYS[3], '-inf', ARGV[5]) == 1 then
    redis.call('PUBLISH', ARGV[6], ARGV[5])
  end
end
return 1
