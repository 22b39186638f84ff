-- limit_release.lua: a worker gives back limiter slots (its jobs finished,
-- or left the process without running), and jobs parked on the limiter go
-- back to their queues while it has room.
--
-- KEYS[1]  limit:<name>, the slot holders (a HASH: holder -> start time)
-- KEYS[2]  limit:<name>:waiting, the parked jobs (a LIST, oldest LEFT)
-- KEYS[3]  queues (a SET of queue names)
-- KEYS[4]  dead (a ZSET), for a parked payload that names no queue
-- ARGV[1]  concurrency N (0: none: nothing is parked, nothing moves)
-- ARGV[2]  the prefix of the queue wake-up channels (Keys::WakeQueue(""))
-- ARGV[3]  now, epoch seconds
-- ARGV[4]  the prefix of queue keys (Keys::Queue(""): "queue:")
-- ARGV[5..] the holders given back ("<n>@<identity>")
--
-- HDEL KEYS[1] each holder; then, for each holder that was there, while
-- the limiter has fewer than N holders, one job from the LEFT of KEYS[2]
-- to the RIGHT end of its queue (taken next), as lib/limit.lua describes.
-- A holder given back twice frees one slot.
--
-- Returns {holders removed, jobs moved back}.
-- Errors: RQ_INVALID on a bad argument; WRONGTYPE naming the key when a
-- key exists with another type; nothing is written then.
-- @include lib/limit.lua

if #KEYS ~= 4 or #ARGV < 5 then
  return redis.error_reply('RQ_INVALID limit_release: want 4 keys and at least 5 arguments')
end
local concurrency, failure = limit_common_args('limit_release')
if concurrency == nil then return failure end

-- The holders are counted before the HDEL, which may empty the hash (a
-- script does not name a key again once it may have emptied it:
-- lib/payload.lua).
local holders = redis.call('HLEN', KEYS[1])
local removed = redis.call('HDEL', KEYS[1], unpack(ARGV, 5, #ARGV))
local moved = 0
if concurrency > 0 and removed > 0 then
  local room = math.min(removed, concurrency - (holders - removed))
  if room > 0 then
    moved = limit_unpark(KEYS[2], room, KEYS[3], KEYS[4], ARGV[4], ARGV[2], ARGV[3])
  end
end
return {removed, moved}
