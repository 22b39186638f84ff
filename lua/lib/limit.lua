-- lib/limit.lua: begin
--
-- Helpers shared by limit_release.lua and limit_reap.lua: moving the jobs
-- parked on a full concurrency limit back to their queues.
--
-- Valid under Lua 5.1 (Redis) and Lua 5.4 (the unit test).

-- json_field_span, and int_string, parse_int and check_types.
-- @include lib/payload.lua

-- The queue named by a payload's top-level "queue" field when it is a plain
-- JSON string (no escapes: the worker parks only jobs whose queue field
-- names the queue they were fetched from, byte for byte), else nil.
local function limit_payload_queue(payload)
  local start, stop = json_field_span(payload, 'queue')
  if start == nil then return nil end
  local name = string.match(string.sub(payload, start, stop), '^"([^"\\]+)"$')
  return name
end

-- Moves up to `room` jobs from the LEFT (oldest) end of the waiting list
-- `waiting_key` to the RIGHT end of their queues, where a fetch takes them
-- next; names each queue in `queues_key` and wakes an idle worker on
-- wake_prefix .. queue when the queue was empty. A payload without a plain
-- queue field (the worker parks none), or whose queue key holds another
-- type than a list, goes to `dead_key` rather than blocking the others
-- (never lost: each job is looked at before it moves). The caller checked
-- the types of waiting_key, queues_key and dead_key. Returns the number of
-- jobs moved back. A queue's key is queue_prefix .. its name
-- (Keys::Queue("")), the one key these scripts derive from a payload: in
-- layout 2 it carries the same hash tag as the limiter's keys
-- (reliableq-schema(7)). Where each job goes is read first, and the
-- waiting list loses them in one LTRIM, its last command (a script does not
-- name a key again once it may have emptied it: lib/payload.lua).
local function limit_unpark(waiting_key, room, queues_key, dead_key, queue_prefix, wake_prefix,
                            now)
  local to_queue, to_dead = {}, {}
  while #to_queue < room do
    local payload = redis.call('LINDEX', waiting_key, #to_queue + #to_dead)
    if not payload then break end
    local queue = limit_payload_queue(payload)
    local queue_type = 'none'
    if queue ~= nil then
      -- On a Redis Cluster whose slot migrates, a queue key this node does
      -- not have (it moved, or does not exist) cannot be named here: the
      -- job stays parked, with those after it, for a later release or the
      -- janitor's reap.
      local reply = redis.pcall('TYPE', queue_prefix .. queue)
      if type(reply) == 'table' then
        if reply.err then break end
        reply = reply.ok
      end
      queue_type = reply
    end
    if queue == nil or (queue_type ~= 'list' and queue_type ~= 'none') then
      to_dead[#to_dead + 1] = payload
    else
      to_queue[#to_queue + 1] = {queue, payload}
    end
  end
  local taken = #to_queue + #to_dead
  if taken == 0 then return 0 end
  redis.call('LTRIM', waiting_key, taken, -1)
  for _, payload in ipairs(to_dead) do
    redis.call('ZADD', dead_key, now, payload)
  end
  for _, job in ipairs(to_queue) do
    local queue, payload = job[1], job[2]
    local length = redis.call('RPUSH', queue_prefix .. queue, payload)
    redis.call('SADD', queues_key, queue)
    if length == 1 and wake_prefix ~= '' then
      redis.call('PUBLISH', wake_prefix .. queue, queue)
    end
  end
  return #to_queue
end

-- The common arguments of limit_release.lua and limit_reap.lua (named
-- `script` in errors): ARGV[1] the concurrency N, ARGV[3] now; KEYS[1..4]
-- the holders HASH, the waiting LIST, queues SET and dead ZSET. Returns
-- N, or nil and the error reply.
local function limit_common_args(script)
  local concurrency = parse_int(ARGV[1], 0)
  local now = tonumber(ARGV[3])
  if concurrency == nil or now == nil or now ~= now then
    return nil, redis.error_reply('RQ_INVALID ' .. script .. ': bad arguments')
  end
  local bad = check_types(script, 'hash', 1, 1) or check_types(script, 'list', 2, 2) or
      check_types(script, 'set', 3, 3) or check_types(script, 'zset', 4, 4)
  if bad then return nil, bad end
  return concurrency
end

-- lib/limit.lua: end
