-- push.lua: push jobs onto their queues, all or nothing, and wake the
-- workers that wait for an empty queue.
--
-- KEYS[1]    queues (SET of queue names)
-- KEYS[i+1]  queue:<q_i>, the i-th queue pushed to (a LIST), i = 1..#KEYS-1
-- ARGV[1]    the prefix of the wake-up channels: queue q_i's channel is
--            ARGV[1] .. q_i (Keys::WakeQueue; a channel, not a key)
-- ARGV[2..]  for each queue in KEYS order: its name q_i, the number n_i of
--            payloads for it, then those n_i payloads, byte for byte
--
-- SADD queues q_1 q_2 ..., then for each queue one LPUSH of its payloads in
-- the order given (the first given is taken first), as Sidekiq's client
-- does in a MULTI. In a MULTI Redis runs the LPUSH even when the SADD
-- fails, so a push reported as failed could still enqueue its job, and a
-- caller who retries it would run it twice. Here a key of the wrong type
-- fails the push with nothing written: every key is checked before the
-- first write, except for one payload to one queue (a single push), which
-- writes first and takes its LPUSH back when the SADD fails (see below).
--
-- When a queue's length after its LPUSHes is n_i, the queue was empty
-- before this call: PUBLISH ARGV[1]..q_i q_i, so that an idle worker
-- sleeping on that queue wakes up now instead of at its next poll. A push
-- to a queue that already holds jobs publishes nothing: a worker that
-- left jobs in it is not idle on it.
--
-- Returns the number of payloads pushed.
-- Errors: RQ_INVALID when ARGV does not match KEYS; WRONGTYPE naming the
-- key when KEYS[1] exists and is not a SET or a KEYS[i+1] not a LIST;
-- nothing is written then.
-- @include lib/args.lua

local nqueues = #KEYS - 1
local wake = ARGV[1]
if nqueues < 1 or wake == nil then
  return redis.error_reply('RQ_INVALID push: KEYS must be queues and at least one queue, ' ..
                           'ARGV must start with the wake-up channel prefix')
end

-- One queue, one payload (every Client::Push): no type checks before the
-- writes, because the writes check types themselves and this case can
-- take its one write back. With the TYPE calls and the tables of the
-- general case below, Redis took about 1.5 times as long per single push
-- (pipelined EVALSHAs: about 150,000 against 220,000 a second here), and
-- Redis's time bounds how fast single pushes can go. LPUSH first: a queue
-- key of the wrong type fails it with nothing written. Then SADD: when
-- `queues` is of the wrong type, the LPOP takes back the payload just
-- pushed (no other client ran in between), and the key is as it was. Only
-- a keyspace-event listener sees the LPUSH and the LPOP go by.
if nqueues == 1 and #ARGV == 4 and ARGV[3] == '1' then
  local name = ARGV[2]
  local length = redis.pcall('LPUSH', KEYS[2], ARGV[4])
  if type(length) == 'table' then
    return check_types('push', 'list', 2, 2) or length
  end
  local added = redis.pcall('SADD', KEYS[1], name)
  if type(added) == 'table' then
    redis.call('LPOP', KEYS[2])
    return check_types('push', 'set', 1, 1) or added
  end
  if length == 1 then redis.call('PUBLISH', wake .. name, name) end
  return 1
end

-- Where each queue's payloads start in ARGV, checked before anything else.
local names, starts, counts = {}, {}, {}
local at = 2
for i = 1, nqueues do
  local n = parse_int(ARGV[at + 1], 1)
  if ARGV[at] == nil or n == nil or at + 1 + n > #ARGV then
    return redis.error_reply('RQ_INVALID push: ARGV does not match KEYS at queue ' ..
                             int_string(i))
  end
  names[i], starts[i], counts[i] = ARGV[at], at + 2, n
  at = at + 2 + n
end
if at ~= #ARGV + 1 then
  return redis.error_reply('RQ_INVALID push: ARGV has more than KEYS names')
end
local bad = check_types('push', 'set', 1, 1) or check_types('push', 'list', 2, #KEYS)
if bad then return bad end

redis.call('SADD', KEYS[1], unpack(names))
-- LPUSH takes its values as arguments; Lua's stack bounds how many.
local kMaxPerCall = 1000
local pushed = 0
for i = 1, nqueues do
  local first, last = starts[i], starts[i] + counts[i] - 1
  local length
  while first <= last do
    local upto = math.min(last, first + kMaxPerCall - 1)
    length = redis.call('LPUSH', KEYS[i + 1], unpack(ARGV, first, upto))
    first = upto + 1
  end
  if length == counts[i] then redis.call('PUBLISH', wake .. names[i], names[i]) end
  pushed = pushed + counts[i]
end
return pushed
