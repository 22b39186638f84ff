-- fetch.lua: move up to `max` jobs from queues into working lists.
--
-- KEYS[2i-1]  queue:<q_i>, the i-th queue to try (a LIST; jobs are taken
--             from its RIGHT end, the oldest)
-- KEYS[2i]    the working list of this process for q_i (a LIST; each job is
--             put at its LEFT end, so the RIGHT end holds the oldest fetched)
-- ARGV[1]     max: the most jobs to move (an integer >= 0)
-- ARGV[2]     optional: the prefix of the sequence keys
--             (Keys::SequencePrefix); absent or "": no job is gated
-- ARGV[3]     the prefix of queue keys (Keys::Queue(""): "queue:"), with
--             ARGV[2]
--
-- Pairs are tried in order and each is exhausted before the next, so queue
-- order is strict priority. The lists end exactly as `max` LMOVEs RIGHT
-- LEFT would leave them, but each queue costs three calls (LRANGE, LTRIM,
-- LPUSH) instead of one per job; the script is one atomic step, so every
-- job is always in exactly one of the two lists.
--
-- Sequences (lib/sequence.lua): a job that names a sequence key held by
-- another job does not go to the working list: it waits at the end of the
-- key's list, in the same step, and counts against `max` as a moved job
-- does (so that one call never parks a whole queue).
--
-- Returns a flat array {i, payload, i, payload, ...} in fetch order (oldest
-- first), i being the 1-based index of the pair the payload came from;
-- empty when every queue is empty or max is 0. When jobs waited for their
-- sequence, it ends with {0, n}, n their number. A pair whose queue or
-- working list exists with another type than LIST is skipped, so that one
-- broken queue does not stop the others, and reported first, as {-i,
-- reason}, the reason naming the key and its type.
-- Errors: RQ_INVALID when KEYS is not a list of pairs or max is not an
-- integer >= 0; nothing is written then. WRONGTYPE (TRYAGAIN on a cluster
-- whose slot migrates) when a job's sequence key is of another type (not
-- on this node) and nothing moved before it in this call: that job and
-- those after it stay in their queue.
-- @include lib/args.lua
-- @include lib/sequence.lua

local max = parse_int(ARGV[1], 0)
if max == nil then
  return redis.error_reply('RQ_INVALID fetch: max must be an integer >= 0, got ' ..
                           tostring(ARGV[1]))
end
if #KEYS == 0 or #KEYS % 2 ~= 0 then
  return redis.error_reply('RQ_INVALID fetch: KEYS must be (queue, working) pairs')
end
-- Every pair up front, before any job moves: LTRIM of a good queue and
-- then an LPUSH into a working list of another type would lose the jobs.
local out = {}
local skip = {}
for pair = 1, #KEYS / 2 do
  local bad = check_types('fetch', 'list', 2 * pair - 1, 2 * pair)
  if bad then
    skip[pair] = true
    out[#out + 1] = -pair
    out[#out + 1] = (string.gsub(bad.err, '; nothing was written$', ''))
  end
end

-- LPUSH takes its values as arguments; Lua's stack bounds how many.
local kMaxPerCall = 1000

local sequences = sequence_context(2)
-- Keys taken or found held in this call (sequence key -> jid), and the
-- time a key taken here is held from (read once, when first needed).
local taken, now = {}, nil
local parked = 0
local stop = nil

local wanted = max
for pair = 1, #KEYS / 2 do
  local queue, working = KEYS[2 * pair - 1], KEYS[2 * pair]
  while wanted > 0 and not skip[pair] do
    local take = math.min(wanted, kMaxPerCall)
    -- The oldest `take` jobs, oldest last.
    local jobs = redis.call('LRANGE', queue, -take, -1)
    local count = #jobs
    if count == 0 then break end
    -- What each job of a sequence does, decided (and its keys checked)
    -- before the first write of this round.
    local plans = {}
    if sequences then
      for i = count, 1, -1 do
        -- The marker's tail, not '"sequence"': its first byte is rarer in
        -- a payload, which halves this search, the cost every job pays.
        local decision, seq, bad = 'run', nil, nil
        if string.find(jobs[i], 'sequence"', 1, true) then
          decision, seq, bad = sequence_gate_plan(sequences, jobs[i], queue, taken)
        end
        -- A sequence key of another type (or, on a cluster, on another
        -- node) stops the fetch before this round's first write.
        if bad then stop = bad; break end
        if decision ~= 'run' then plans[i] = {decision, seq} end
        -- Redis's time before the first write (a script that replicates
        -- its commands may not read it after one).
        if decision == 'take' and now == nil then now = sequence_now() end
      end
    end
    if stop then break end
    -- Another round names the queue again, which must not follow the LTRIM
    -- that emptied it: on a Redis Cluster whose slot migrates, Redis takes
    -- a key a script emptied for one on the other node, and fails the
    -- command after the jobs moved. So whether jobs stay is read first, in
    -- the one case where another round is wanted.
    local more = count == take and wanted > count and redis.call('LLEN', queue) > count
    redis.call('LTRIM', queue, 0, -count - 1)
    -- Oldest first: LPUSH puts the last argument leftmost, so the working
    -- list reads as if each job had been moved on its own.
    local moved = {}
    for i = count, 1, -1 do
      local plan = plans[i]
      if plan then sequence_gate_apply(sequences, plan[1], plan[2], jobs[i], now) end
      if plan and plan[1] == 'wait' then
        parked = parked + 1
      else
        moved[#moved + 1] = jobs[i]
        out[#out + 1] = pair
        out[#out + 1] = jobs[i]
      end
    end
    if #moved > 0 then redis.call('LPUSH', working, unpack(moved)) end
    wanted = wanted - count
    if not more then break end
  end
  if wanted == 0 or stop then break end
end
-- Nothing moved yet: the error says which key; else what moved is
-- reported, and the next fetch meets the key again.
if stop and parked == 0 and #out == 0 then return stop end
if parked > 0 then
  out[#out + 1] = 0
  out[#out + 1] = parked
end
return out
