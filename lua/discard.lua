-- discard.lua: take an expired job out of its working list unrun, count
-- it, and release its unique key.
--
-- KEYS[1]  the working list the job was fetched into
-- KEYS[2]  stat:expired (P stat:expired, a STRING counter)
-- ARGV[1]  the payload, byte for byte as it was fetched
-- ARGV[2]  "1": count it; "2": count it only when it was still in the
--          working list (a call sent again after its reply was lost)
--
-- LREM working -1 payload (from the tail, where the oldest fetched job
-- sits); when it removed the job, its unique key, if any, is released
-- (lib/unique.lua, compare-and-delete). When a janitor already gave the
-- job back to its queue, nothing moves and its key stays with it.
--
-- Returns 1 when the job was removed, 0 when it was not in the list.
-- Errors: RQ_INVALID for a bad count flag; WRONGTYPE when KEYS[1] is not a
-- LIST or KEYS[2] not a STRING; nothing is written then. A counter holding
-- something else than an integer is left alone, and the job still goes.
-- @include lib/args.lua
-- @include lib/unique.lua

if #KEYS ~= 2 or ARGV[1] == nil or (ARGV[2] ~= '1' and ARGV[2] ~= '2') then
  return redis.error_reply('RQ_INVALID discard: want 2 keys, the payload and count flag 1 or 2')
end
local bad = check_types('discard', 'list', 1, 1) or check_types('discard', 'string', 2, 2)
if bad then return bad end
local away = unique_reachable(ARGV[1])
if away then return away end

local moved = redis.call('LREM', KEYS[1], '-1', ARGV[1])
if moved > 0 then unique_release(ARGV[1]) end
if ARGV[2] == '1' or moved > 0 then
  local value = redis.call('GET', KEYS[2])
  if not value or string.find(value, '^%-?%d+$') then redis.call('INCR', KEYS[2]) end
end
return moved
