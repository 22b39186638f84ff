-- kill.lua: move entries of the retry set to the dead set.
--
-- KEYS[1]  the sorted set the entries are in (retry)
-- KEYS[2]  dead (ZSET)
-- ARGV[1]  now, float seconds with a fractional part: the dead-set score
-- ARGV[2]  dead max jobs (integer >= 1)
-- ARGV[3]  dead timeout in seconds (integer >= 0)
-- ARGV[4]  the prefix of the sequence keys (Keys::SequencePrefix); "":
--          none released
-- ARGV[5]  the prefix of queue keys (Keys::Queue(""))
-- ARGV[6]  the prefix of the queue wake-up channels (Keys::WakeQueue(""))
-- ARGV[7..] the entries, byte for byte as they are stored in KEYS[1]
--
-- Each entry moves only if ZREM still removes that exact string here (the
-- caller found it by reading the set), and goes into dead unchanged, as
-- Sidekiq's SortedEntry#kill puts it there, with Sidekiq's dead-set insert:
-- ZADD, then the trims by age and by count. Removal and insert are one
-- atomic step, so the job is in one of the two sets at every instant.
--
-- A killed job's life ends: its unique key, if it holds one, is released
-- (lib/unique.lua, compare-and-delete), and its sequence key, if it holds
-- one, goes to the oldest job waiting for it (lib/sequence.lua).
--
-- Returns {killed, missing}: missing entries were no longer in KEYS[1].
-- Errors: RQ_INVALID for a bad now or dead limits; WRONGTYPE when KEYS[1]
-- or KEYS[2] exists and is not a ZSET; nothing is written then.

-- @include lib/payload.lua
-- @include lib/features.lua

local now = ARGV[1]
if not is_float_seconds(now) then
  return redis.error_reply('RQ_INVALID kill: now must be float seconds, got ' .. tostring(now))
end
local dead_max = parse_int(ARGV[2], 1)
local dead_timeout = parse_int(ARGV[3], 0)
if dead_max == nil or dead_timeout == nil then
  return redis.error_reply('RQ_INVALID kill: bad dead limits')
end
local bad = check_types('kill', 'zset', 1, 2)
if bad then return bad end

local sequences = sequence_context(4)
for j = 7, #ARGV do
  local away = features_reachable(sequences, ARGV[j], 'ends', 'kill')
  if away then return away end
end
local take = zset_remover(KEYS[1])
local killed = {}
for j = 7, #ARGV do
  if take(ARGV[j]) then killed[#killed + 1] = ARGV[j] end
end
dead_add(KEYS[2], now, killed, dead_max, dead_timeout)
for _, payload in ipairs(killed) do
  features_end(sequences, payload, 'ends')
end
return {#killed, #ARGV - 6 - #killed}
