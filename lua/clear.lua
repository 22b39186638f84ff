-- clear.lua: delete a whole job set or queue, and a queue's name in
-- `queues`, all or nothing.
--
-- KEYS[1]  the key to delete: schedule, retry or dead (a ZSET), or
--          queue:<q> (a LIST)
-- KEYS[2]  (a queue only) queues, the SET of queue names
-- ARGV[1]  the type KEYS[1] must have: "zset" or "list"
-- ARGV[2]  (a queue only) q, removed from KEYS[2]
--
-- Sidekiq's SortedSet#clear and Queue#clear, which send their UNLINK and
-- SREM in a MULTI: there Redis runs the UNLINK even when the read before it
-- failed on a key of the wrong type, so a clear reported as failed had
-- deleted the key all the same. Here every key is checked first.
--
-- Returns {size, removed}: how many members or jobs KEYS[1] held, and how
-- many keys and names were removed (0: there was nothing to clear).
-- Errors: RQ_INVALID for a bad type or a queue without its name; WRONGTYPE
-- naming the key when KEYS[1] is not of type ARGV[1] or KEYS[2] not a SET;
-- nothing is written then.
-- @include lib/args.lua

local want = ARGV[1]
if (want ~= 'zset' and want ~= 'list') or (#KEYS == 2) ~= (ARGV[2] ~= nil) then
  return redis.error_reply('RQ_INVALID clear: want ARGV[1] zset or list, and ARGV[2] with KEYS[2]')
end
local bad = check_types('clear', want, 1, 1) or (#KEYS == 2 and check_types('clear', 'set', 2, 2))
if bad then return bad end

local size
if want == 'zset' then size = redis.call('ZCARD', KEYS[1]) else size = redis.call('LLEN', KEYS[1]) end
local removed = redis.call('UNLINK', KEYS[1])
if #KEYS == 2 then removed = removed + redis.call('SREM', KEYS[2], ARGV[2]) end
return {size, removed}
