-- ack.lua: acknowledge finished jobs and count them as processed.
--
-- KEYS[1]     stat:processed
-- KEYS[2]     stat:processed:<YYYY-MM-DD> (UTC date of now)
-- KEYS[3..]   working lists the payloads below were fetched into
-- ARGV[2j-1]  k_j: the index into KEYS (3 <= k_j <= #KEYS) of the working
--             list of payload j
-- ARGV[2j]    payload j, byte for byte as it was fetched
--
-- Each payload is removed once (LREM key -1 payload), so two copies of the
-- same string acked twice remove both. The search starts at the tail, where
-- the oldest fetched job (most often the one finishing) sits. Nothing else
-- reads the payloads: each one Lua touches costs Redis a copy and a hash of
-- every byte.
--
-- Both counters grow by the number of pairs, removed or not: a job that ran
-- counts as processed even if a janitor already gave it back. The dated
-- counter expires after 5 years (157680000 s), as Sidekiq's does; the
-- expiry is set when the counter is created.
--
-- Returns the number of payloads actually removed.
-- Errors: RQ_INVALID when ARGV is not pairs or an index is out of range;
-- nothing is written then.

-- @include lib/args.lua

if #ARGV % 2 ~= 0 then
  return redis.error_reply('RQ_INVALID ack: ARGV must be (key index, payload) pairs')
end
for j = 1, #ARGV, 2 do
  local k = parse_int(ARGV[j], 3)
  if k == nil or k > #KEYS then
    return redis.error_reply('RQ_INVALID ack: bad working list index ' .. tostring(ARGV[j]))
  end
end

local pairs_count = #ARGV / 2
local removed = 0
for j = 1, #ARGV, 2 do
  removed = removed + redis.call('LREM', KEYS[tonumber(ARGV[j])], '-1', ARGV[j + 1])
end
if pairs_count > 0 then
  redis.call('INCRBY', KEYS[1], int_string(pairs_count))
  if redis.call('INCRBY', KEYS[2], int_string(pairs_count)) == pairs_count then
    redis.call('EXPIRE', KEYS[2], '157680000')
  end
end
return removed
