-- ack.lua: acknowledge finished jobs and count them as processed.
--
-- KEYS[1]     stat:processed
-- KEYS[2]     stat:processed:<YYYY-MM-DD> (UTC date of now)
-- KEYS[3..]   working lists the payloads below were fetched into
-- ARGV[2j-1]  k_j: the index into KEYS (3 <= k_j <= #KEYS) of the working
--             list of payload j
-- ARGV[2j]    payload j, byte for byte as it was fetched
--
-- Each payload is removed once, the copy nearest the tail, exactly as
-- `LREM key -1 payload` per pair would: two copies of the same string acked
-- twice remove both, and a string not there removes nothing. Jobs mostly
-- finish in the order they were fetched, so the acked payloads are usually
-- the oldest, at the tail: the run of them there goes with one LTRIM, and
-- only the others cost an LREM each.
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
-- Per working list: how many of each payload to remove, and how many in all.
local wanted, totals = {}, {}
for j = 1, #ARGV, 2 do
  local k = parse_int(ARGV[j], 3)
  if k == nil or k > #KEYS then
    return redis.error_reply('RQ_INVALID ack: bad working list index ' .. tostring(ARGV[j]))
  end
  local counts = wanted[k]
  if counts == nil then
    counts = {}
    wanted[k] = counts
    totals[k] = 0
  end
  counts[ARGV[j + 1]] = (counts[ARGV[j + 1]] or 0) + 1
  totals[k] = totals[k] + 1
end

local removed = 0
for k, counts in pairs(wanted) do
  local key = KEYS[k]
  -- The run of acked payloads at the tail, right to left.
  local tail = redis.call('LRANGE', key, -totals[k], -1)
  local run = 0
  for i = #tail, 1, -1 do
    local left = counts[tail[i]]
    if left == nil or left == 0 then break end
    counts[tail[i]] = left - 1
    run = run + 1
  end
  if run > 0 then
    redis.call('LTRIM', key, 0, -run - 1)
    removed = removed + run
  end
  for payload, left in pairs(counts) do
    for _ = 1, left do
      removed = removed + redis.call('LREM', key, '-1', payload)
    end
  end
end

local pairs_count = #ARGV / 2
if pairs_count > 0 then
  redis.call('INCRBY', KEYS[1], int_string(pairs_count))
  if redis.call('INCRBY', KEYS[2], int_string(pairs_count)) == pairs_count then
    redis.call('EXPIRE', KEYS[2], '157680000')
  end
end
return removed
