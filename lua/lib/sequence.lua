-- lib/sequence.lua: begin
--
-- Sequences (reliableq-schema(7), "Sequences"): the jobs of one sequence
-- key run one at a time, in the order their queue gives them, across every
-- worker. Self-contained: it needs nothing of the payload library.
--
-- A job names its key in the top-level field "sequence" (a non-empty
-- string, or an integer, taken as its decimal text). Its keys, P being the
-- caller's prefix (Keys::SequencePrefix: "reliableq:", or "P{G}:" in a
-- queue group, so that every one lives in the slot of the script's KEYS):
--   P sequences          HASH   key -> jid of the job that holds it
--   P sequences:since    ZSET   key -> when its holder took it (seconds)
--   P sequence:<key>     LIST   the jobs that wait for it, oldest LEFT
-- A key that nobody holds has none of these: an idle sequence costs no
-- memory. While a key's list has jobs, the key is held.
--
-- fetch.lua gates (sequence_gate_*): a fetched job of a key nobody holds
-- takes it and runs; the holder's own job (back from a retry, or put back
-- by a janitor) runs; any other waits in the key's list instead of the
-- working list. The scripts that end a job's life release it
-- (sequence_release): the key goes to the oldest waiting job, which goes
-- to the RIGHT end of its queue (taken next), or is let go.
--
-- A plain string.find comes first: a payload without the field costs one
-- substring search and no parse. A job whose top-level "queue" does not
-- name the queue it was fetched from (Keys::Queue of it) is not gated: its
-- release could not send it back where it came from.
--
-- Valid under Lua 5.1 (Redis) and Lua 5.4 (the unit test).

-- Payloads decoded in this call (payload -> sequence, or false): a script
-- looks at one payload for its checks and again for its writes.
local sequence_seen = {}

-- The sequence of a payload: {key, jid, queue, release_on_retry} when it
-- names one, else nil.
local function sequence_decode(payload)
  local ok, job = pcall(cjson.decode, payload)
  if not ok or type(job) ~= 'table' then return nil end
  local key = job.sequence
  if type(key) == 'number' then
    -- Beyond 2^53 cjson has rounded it already: such a key is not read.
    if key ~= math.floor(key) or key ~= key or math.abs(key) >= 2 ^ 53 then return nil end
    key = string.format('%d', key)
  end
  if type(key) ~= 'string' or key == '' or type(job.jid) ~= 'string' or job.jid == '' or
      type(job.queue) ~= 'string' or job.queue == '' then
    return nil
  end
  return {key = key, jid = job.jid, queue = job.queue,
          release_on_retry = job.sequence_release_on_retry == true}
end
local function sequence_of(payload)
  if not string.find(payload, '"sequence"', 1, true) then return nil end
  local seq = sequence_seen[payload]
  if seq == nil then
    seq = sequence_decode(payload) or false
    sequence_seen[payload] = seq
  end
  return seq or nil
end

-- The names of the keys of the sequence context `ctx` ({prefix,
-- queue_prefix, wake_prefix}, from the script's ARGV).
local function sequence_holders(ctx) return ctx.prefix .. 'sequences' end
local function sequence_since(ctx) return ctx.prefix .. 'sequences:since' end
local function sequence_waiting(ctx, key) return ctx.prefix .. 'sequence:' .. key end

-- Redis's clock, float seconds (scripts replicate their effects, so TIME
-- may be read before a write).
local function sequence_now()
  local time = redis.call('TIME')
  return string.format('%d.%06d', tonumber(time[1]), tonumber(time[2]))
end

-- A script checks every key it may write before its first write: Redis
-- keeps the writes made before a command that fails, so a WRONGTYPE after
-- a job moved would lose it. On a Redis Cluster whose slot migrates, a key
-- not on this node fails its read, and the script stops before any write
-- (TRYAGAIN for the caller). Each check is made once per call.
local sequence_checked = {}

-- nil when `key` is absent or a `kind`, else the error reply to return.
local function sequence_check_key(key, kind, script)
  if sequence_checked[key] then return nil end
  local reply = redis.pcall('TYPE', key)
  if type(reply) == 'table' and reply.err then
    return redis.error_reply('TRYAGAIN ' .. script .. ': a key of this slot is not on this ' ..
                             'node while the slot migrates; nothing was written')
  end
  if type(reply) == 'table' then reply = reply.ok end
  if reply ~= kind and reply ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. script .. ': key ' .. key .. ' holds a ' ..
                             tostring(reply) .. ', not a ' .. kind .. '; nothing was written')
  end
  sequence_checked[key] = true
  return nil
end

-- The holders' HASH and the since ZSET, which every hold touches.
local function sequence_check_index(ctx, script)
  return sequence_check_key(sequence_holders(ctx), 'hash', script) or
      sequence_check_key(sequence_since(ctx), 'zset', script)
end

-- Those and key `seq.key`'s waiting list (the operator's scripts).
local function sequence_check(ctx, seq, script)
  return sequence_check_index(ctx, script) or
      sequence_check_key(sequence_waiting(ctx, seq.key), 'list', script)
end

-- fetch.lua's gate, in two halves so that every read and check comes
-- before the fetch's first write. sequence_gate_plan decides, for the job
-- in `payload` fetched from queue key `queue_key`: 'run' (not gated, or
-- its holder's own), 'take' (the key is free: it takes it and runs) or
-- 'wait', with its sequence; `taken` (key -> jid) carries the keys taken
-- or found held earlier in the same fetch. Returns the decision, the
-- sequence, and an error reply when a key cannot be written.
local function sequence_gate_plan(ctx, payload, queue_key, taken)
  local seq = sequence_of(payload)
  if seq == nil or ctx.queue_prefix .. seq.queue ~= queue_key then return 'run' end
  local holder = taken[seq.key]
  if holder == nil then
    local bad = sequence_check_index(ctx, 'fetch')
    if bad then return nil, nil, bad end
    holder = redis.call('HGET', sequence_holders(ctx), seq.key)
  end
  if not holder then
    taken[seq.key] = seq.jid
    return 'take', seq
  end
  taken[seq.key] = holder
  if holder == seq.jid then return 'run', seq end
  local bad = sequence_check_key(sequence_waiting(ctx, seq.key), 'list', 'fetch')
  if bad then return nil, nil, bad end
  return 'wait', seq
end

-- The write half: a 'take' holds the key from `now`; a 'wait' joins the
-- end of the key's list.
local function sequence_gate_apply(ctx, decision, seq, payload, now)
  if decision == 'take' then
    redis.call('HSET', sequence_holders(ctx), seq.key, seq.jid)
    redis.call('ZADD', sequence_since(ctx), now, seq.key)
  elseif decision == 'wait' then
    redis.call('RPUSH', sequence_waiting(ctx, seq.key), payload)
  end
end

-- What a release of each key will find, read before the script's first
-- write, so that the writes read nothing (a key the script emptied cannot
-- be named again on a cluster whose slot migrates, and a script that
-- replicates its commands may not read TIME after a write): key ->
-- {holder = its holder's jid or false, next = the payload at the head of
-- its list or false, now = Redis's time when a job waits}; {handed = true}
-- once this script handed the key on, so that no other job of the script
-- hands it on again before the new holder ran.
local sequence_planned = {}

-- The plan of `key`, made when first needed.
local function sequence_plan(key)
  local plan = sequence_planned[key]
  if plan == nil then
    plan = {}
    sequence_planned[key] = plan
  end
  return plan
end

-- For a script about to hand key `key` on, before it writes anything: nil
-- when it can, else the error reply to return. The head of its list is
-- read (a list of another type fails here, before any write) and the next
-- job's queue is checked.
local function sequence_key_reachable(ctx, key, script)
  local bad = sequence_check_index(ctx, script)
  if bad then return bad end
  local plan = sequence_plan(key)
  if plan.next ~= nil then return nil end
  local next_payload = redis.pcall('LINDEX', sequence_waiting(ctx, key), '0')
  if type(next_payload) == 'table' and next_payload.err then
    return sequence_check_key(sequence_waiting(ctx, key), 'list', script) or
        redis.error_reply(next_payload.err)
  end
  plan.next = next_payload
  plan.now = sequence_now()
  if not next_payload then return nil end
  local next_seq = sequence_of(next_payload)
  if next_seq == nil then return nil end
  return sequence_check_key(ctx.queue_prefix .. next_seq.queue, 'list', script)
end

-- The same for the job `jid` of key `key`, which hands the key on only
-- when it holds it: a job that does not hold it costs one read.
local function sequence_job_reachable(ctx, key, jid, script)
  local bad = sequence_check_index(ctx, script)
  if bad then return bad end
  local plan = sequence_plan(key)
  if plan.holder == nil then plan.holder = redis.call('HGET', sequence_holders(ctx), key) end
  if plan.holder ~= jid then return nil end
  return sequence_key_reachable(ctx, key, script)
end

-- For a script about to release the key of the job in `payload`, before it
-- writes anything: nil when it can, else the error reply to return.
local function sequence_reachable(ctx, payload, script)
  local seq = sequence_of(payload)
  if seq == nil then return nil end
  return sequence_job_reachable(ctx, seq.key, seq.jid, script)
end

-- The holder a key is given when the entry at the head of its list names
-- no sequence (edited by hand): the key stays held, so the jobs behind the
-- entry keep their place and the hold shows in `reliableq sequences` and
-- its age, until `reliableq sequence skip` moves the entry away.
local kSequenceStuck = '(not a job)'

-- Hands key `key` on: to the oldest job waiting for it, which goes to the
-- RIGHT end of its queue (a PUBLISH on its wake-up channel when the queue
-- was empty), or lets it go when none waits. Returns the jid it went to,
-- or false.
local function sequence_hand_on(ctx, key)
  local waiting = sequence_waiting(ctx, key)
  local plan = sequence_planned[key] or {}
  sequence_planned[key] = {handed = true}
  local next_payload = plan.next
  if next_payload == nil then next_payload = redis.call('LINDEX', waiting, '0') end
  local now = plan.now or sequence_now()
  local next_seq = next_payload and sequence_of(next_payload)
  if next_payload and not next_seq then
    redis.call('HSET', sequence_holders(ctx), key, kSequenceStuck)
    redis.call('ZADD', sequence_since(ctx), now, key)
    return false
  end
  if not next_seq then
    redis.call('HDEL', sequence_holders(ctx), key)
    redis.call('ZREM', sequence_since(ctx), key)
    return false
  end
  -- The LPOP is the list's last command: it may empty it (a script does
  -- not name a key again once it may have emptied it: lib/payload.lua).
  redis.call('LPOP', waiting)
  redis.call('HSET', sequence_holders(ctx), key, next_seq.jid)
  redis.call('ZADD', sequence_since(ctx), now, key)
  local queue_length = redis.call('RPUSH', ctx.queue_prefix .. next_seq.queue, next_payload)
  if queue_length == 1 and ctx.wake_prefix ~= '' then
    redis.call('PUBLISH', ctx.wake_prefix .. next_seq.queue, next_seq.queue)
  end
  return next_seq.jid
end

-- Hands key `key` on when job `jid` holds it (another job holds it once an
-- operator released it, or once this script handed it on). Returns the
-- jid the key went to, or false.
local function sequence_job_release(ctx, key, jid)
  local plan = sequence_planned[key]
  if plan and plan.handed then return false end
  local holder = plan and plan.holder
  if holder == nil then holder = redis.call('HGET', sequence_holders(ctx), key) end
  if holder ~= jid then return false end
  return sequence_hand_on(ctx, key)
end

-- The same for the job in `payload`.
local function sequence_release(ctx, payload)
  local seq = sequence_of(payload)
  if seq == nil then return false end
  return sequence_job_release(ctx, seq.key, seq.jid)
end

-- The sequence context from ARGV[first..first+2] (prefix, queue prefix,
-- wake prefix); nil when ARGV[first] is absent or empty (a caller without
-- sequences: nothing is gated or released).
local function sequence_context(first)
  local prefix = ARGV[first]
  if prefix == nil or prefix == '' then return nil end
  return {prefix = prefix, queue_prefix = ARGV[first + 1] or '', wake_prefix = ARGV[first + 2] or ''}
end

-- lib/sequence.lua: end
