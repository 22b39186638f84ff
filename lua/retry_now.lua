-- retry_now.lua: move entries of schedule, retry or dead to their queues now.
--
-- KEYS[1]    the sorted set the entries are in: schedule, retry or dead
-- KEYS[2]    queues (SET of queue names)
-- KEYS[3..]  queue:<q> for every queue named by the entries below
-- ARGV[1]    now, float seconds with a fractional part: the new enqueued_at
-- ARGV[2]    "1": a retry_count that is an integer becomes retry_count - 1
--            (Sidekiq's SortedEntry#retry, the "Retry now" of its Web UI);
--            "0": retry_count is left alone (SortedEntry#add_to_queue)
-- ARGV[3j]   k_j: the index into KEYS (>= 3) of entry j's queue, j = 1, 2...
-- ARGV[3j+1] the name of that queue (added to `queues`)
-- ARGV[3j+2] entry j, byte for byte as it is stored in KEYS[1]
--
-- The caller found the entries by reading the set; each one moves only if
-- ZREM still removes that exact string here, so an entry that somebody else
-- moved or deleted meanwhile is neither pushed nor pushed twice. ZREM, LPUSH
-- and SADD happen in this one script: the job is in the set or in its queue
-- at every instant (Sidekiq's API removes it in one step and pushes it in
-- another). The pushed payload is the entry with enqueued_at = now and, with
-- ARGV[2] = "1", retry_count - 1, both edited as text: every other byte
-- stays.
--
-- Returns {moved, missing}: missing entries were no longer in the set.
-- Errors: RQ_INVALID for bad arguments or an entry that is not a JSON
-- object; WRONGTYPE when KEYS[1] exists and is not a ZSET, KEYS[2] not a
-- SET or a KEYS[3..] not a LIST; checked before anything is written, so
-- nothing is written then.

-- @include lib/payload.lua

local now = ARGV[1]
if not is_float_seconds(now) then
  return redis.error_reply('RQ_INVALID retry_now: now must be float seconds, got ' ..
                           tostring(now))
end
local decrement = ARGV[2]
if decrement ~= '0' and decrement ~= '1' then
  return redis.error_reply('RQ_INVALID retry_now: the retry_count flag must be 0 or 1')
end
if #ARGV < 3 or (#ARGV - 2) % 3 ~= 0 then
  return redis.error_reply(
      'RQ_INVALID retry_now: ARGV must end in (key index, name, entry) triples')
end
for j = 3, #ARGV, 3 do
  local k = parse_int(ARGV[j], 3)
  if k == nil or k > #KEYS then
    return redis.error_reply('RQ_INVALID retry_now: bad queue index ' .. tostring(ARGV[j]))
  end
  if json_scan(ARGV[j + 2], 'enqueued_at') == nil then
    return redis.error_reply('RQ_INVALID retry_now: an entry is not a JSON object')
  end
end
local bad = check_types('retry_now', 'zset', 1, 1) or check_types('retry_now', 'set', 2, 2) or
    check_types('retry_now', 'list', 3, #KEYS)
if bad then return bad end

-- The entry with retry_count one lower, when that is an integer Lua can
-- count exactly (Sidekiq: `msg["retry_count"] -= 1 if msg["retry_count"]`;
-- 0 becomes -1, which the next failure turns back into 0).
local function lower_retry_count(payload)
  local start, stop = json_field_span(payload, 'retry_count')
  if start == nil then return payload end
  local raw = string.sub(payload, start, stop)
  if #raw > 15 or not string.find(raw, '^%-?%d+$') then return payload end
  return json_set_field(payload, 'retry_count', int_string(tonumber(raw) - 1))
end

local moved, missing = 0, 0
local take = zset_remover(KEYS[1])
for j = 3, #ARGV, 3 do
  local k = tonumber(ARGV[j])
  local name, entry = ARGV[j + 1], ARGV[j + 2]
  if not take(entry) then
    missing = missing + 1
  else
    local payload = entry
    if decrement == '1' then payload = lower_retry_count(payload) end
    payload = json_set_field(payload, 'enqueued_at', now)
    redis.call('LPUSH', KEYS[k], payload)
    redis.call('SADD', KEYS[2], name)
    moved = moved + 1
  end
end
return {moved, missing}
