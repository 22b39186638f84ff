-- periodic_declare.lua: record a worker's declaration of a periodic job,
-- which replaces the one recorded (the newest declaration wins), and say
-- whose it replaced.
--
-- KEYS[1]  periodic (SET: the names of the periodic jobs)
-- KEYS[2]  periodic:<name> (HASH)
-- ARGV[1]  the name
-- ARGV[2]  the declaration's digest
-- ARGV[3]  the declaring worker's identity
-- ARGV[4]  now, epoch seconds
-- ARGV[5..] field, value pairs of the declaration: cron, timezone, class,
--          queue, args, retry (see periodic_plan DefinitionOf)
--
-- SADD periodic name; HSET the fields, digest, declared_by, declared_at.
-- The tick bookkeeping (last_tick, ...) stays.
-- Returns {previous digest, previous declared_by}, '' for each when there
-- was none.
-- Errors: RQ_INVALID for bad ARGV; WRONGTYPE naming the key when a key
-- exists with another type; nothing is written then.
-- @include lib/args.lua

if #KEYS ~= 2 or ARGV[4] == nil or (#ARGV - 4) % 2 ~= 0 then
  return redis.error_reply('RQ_INVALID periodic_declare: want 2 KEYS and ARGV name, digest, ' ..
                           'declared_by, now, then field/value pairs')
end
local bad = check_types('periodic_declare', 'set', 1, 1) or
    check_types('periodic_declare', 'hash', 2, 2)
if bad then return bad end

local previous = redis.call('HMGET', KEYS[2], 'digest', 'declared_by')
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'digest', ARGV[2], 'declared_by', ARGV[3], 'declared_at', ARGV[4],
           unpack(ARGV, 5))
return {previous[1] or '', previous[2] or ''}
