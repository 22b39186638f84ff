-- push.lua: push jobs onto their queues, all or nothing.
--
-- KEYS[1]    queues (SET of queue names)
-- KEYS[i+1]  queue:<q_i>, the i-th queue pushed to (a LIST), i = 1..#KEYS-1
-- ARGV[..]   for each queue in KEYS order: its name q_i, the number n_i of
--            payloads for it, then those n_i payloads, byte for byte
--
-- SADD queues q_1 q_2 ..., then for each queue one LPUSH of its payloads in
-- the order given (the first given is taken first), as Sidekiq's client
-- does in a MULTI. Every key is checked before the first write: in a MULTI
-- Redis runs the LPUSH even when the SADD fails, so a push reported as
-- failed could still enqueue its job, and a caller who retries it would
-- run it twice. Here a key of the wrong type fails the push with nothing
-- written.
--
-- Returns the number of payloads pushed.
-- Errors: RQ_INVALID when ARGV does not match KEYS; WRONGTYPE naming the
-- key when KEYS[1] exists and is not a SET or a KEYS[i+1] not a LIST;
-- nothing is written then.
-- @include lib/args.lua

if #KEYS < 2 then
  return redis.error_reply('RQ_INVALID push: KEYS must be queues and at least one queue')
end
-- Where each queue's payloads start in ARGV, checked before anything else.
local names, starts, counts = {}, {}, {}
local at = 1
for i = 1, #KEYS - 1 do
  local n = parse_int(ARGV[at + 1], 1)
  if ARGV[at] == nil or n == nil or at + 1 + n > #ARGV then
    return redis.error_reply('RQ_INVALID push: ARGV does not match KEYS at queue ' ..
                             string.format('%d', i))
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
for i = 1, #KEYS - 1 do
  local first, last = starts[i], starts[i] + counts[i] - 1
  while first <= last do
    local upto = math.min(last, first + kMaxPerCall - 1)
    redis.call('LPUSH', KEYS[i + 1], unpack(ARGV, first, upto))
    first = upto + 1
  end
  pushed = pushed + counts[i]
end
return pushed
