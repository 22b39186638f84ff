-- limit_reap.lua: the janitor frees the slots of processes that died, and
-- moves parked jobs back to their queues while the limiter has room.
--
-- KEYS[1]  limit:<name>, the slot holders (a HASH: holder -> start time)
-- KEYS[2]  limit:<name>:waiting, the parked jobs (a LIST, oldest LEFT)
-- KEYS[3]  queues (a SET of queue names)
-- KEYS[4]  dead (a ZSET), for a parked payload that names no queue
-- KEYS[5..] the heartbeat keys of the processes named by the holders the
--          caller read (Keys::Heartbeat(identity))
-- ARGV[1]  concurrency N (0: none)
-- ARGV[2]  the prefix of the queue wake-up channels (Keys::WakeQueue(""))
-- ARGV[3]  now, epoch seconds
-- ARGV[4]  the prefix of heartbeat keys (Keys::Heartbeat(""))
-- ARGV[5]  the prefix of queue keys (Keys::Queue(""): "queue:")
--
-- HDEL every holder "<n>@<identity>" of KEYS[1] whose heartbeat key
-- ARGV[4] .. identity is among KEYS[5..] and does not exist (the process
-- is dead: its janitor-recovered jobs hold no slot any more); holders of
-- processes the caller did not list are left alone. Then, when N > 0,
-- moves jobs from KEYS[2] back to their queues while the limiter has
-- fewer than N holders (at most N - holders of them): the safety net for
-- a release that was never sent.
--
-- Returns {holders removed, jobs moved back}.
-- Errors: RQ_INVALID on a bad argument; WRONGTYPE naming the key when a
-- key exists with another type; nothing is written then.
-- @include lib/limit.lua

if #KEYS < 4 or #ARGV ~= 5 then
  return redis.error_reply('RQ_INVALID limit_reap: want at least 4 keys and 5 arguments')
end
local concurrency, failure = limit_common_args('limit_reap')
if concurrency == nil then return failure end

local dead = {}
for i = 5, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then dead[KEYS[i]] = true end
end
-- The holders of dead processes go in one HDEL, counted before it: it may
-- empty the hash (a script does not name a key again once it may have
-- emptied it: lib/payload.lua).
local fields = redis.call('HKEYS', KEYS[1])
local gone = {}
if next(dead) ~= nil then
  for _, field in ipairs(fields) do
    local identity = string.match(field, '^%d+@(.+)$')
    if identity ~= nil and dead[ARGV[4] .. identity] then gone[#gone + 1] = field end
  end
end
local removed = 0
if #gone > 0 then removed = redis.call('HDEL', KEYS[1], unpack(gone)) end
local moved = 0
if concurrency > 0 then
  local room = concurrency - (#fields - removed)
  if room > 0 then
    moved = limit_unpark(KEYS[2], room, KEYS[3], KEYS[4], ARGV[5], ARGV[2], ARGV[3])
  end
end
return {removed, moved}
