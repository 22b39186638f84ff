-- fetch.lua: move up to `max` jobs from queues into working lists.
--
-- KEYS[2i-1]  queue:<q_i>, the i-th queue to try (a LIST; jobs are taken
--             from its RIGHT end, the oldest)
-- KEYS[2i]    the working list of this process for q_i (a LIST; each job is
--             put at its LEFT end, so the RIGHT end holds the oldest fetched)
-- ARGV[1]     max: the most jobs to move (an integer >= 0)
--
-- Pairs are tried in order and each is exhausted before the next, so queue
-- order is strict priority. Every job moves with one LMOVE: it is always in
-- exactly one of the two lists.
--
-- Returns a flat array {i, payload, i, payload, ...} in fetch order, i being
-- the 1-based index of the pair the payload came from; empty when every
-- queue is empty or max is 0.
-- Errors: RQ_INVALID when KEYS is not a list of pairs or max is not an
-- integer >= 0.

-- @include lib/payload.lua

local max = parse_int(ARGV[1], 0)
if max == nil then
  return redis.error_reply('RQ_INVALID fetch: max must be an integer >= 0, got ' ..
                           tostring(ARGV[1]))
end
if #KEYS == 0 or #KEYS % 2 ~= 0 then
  return redis.error_reply('RQ_INVALID fetch: KEYS must be (queue, working) pairs')
end

local out = {}
local fetched = 0
local pair_count = #KEYS / 2
for pair = 1, pair_count do
  if fetched >= max then break end
  local queue, working = KEYS[2 * pair - 1], KEYS[2 * pair]
  while fetched < max do
    local payload = redis.call('LMOVE', queue, working, 'RIGHT', 'LEFT')
    if not payload then break end
    out[#out + 1] = pair
    out[#out + 1] = payload
    fetched = fetched + 1
  end
end
return out
