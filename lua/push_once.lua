-- push_once.lua: push jobs to their queues or into schedule, each jid at
-- most once within the replay window, all or nothing. The pushes of a
-- client with a spool and of the spool's drains, which may send a job that
-- is already stored again: a send that sits unanswered in a stalled
-- server's socket buffer outlives its sender, so only Redis can tell that
-- a jid was stored (reliableq-schema(7), "Client spool").
--
-- KEYS[1]      queues (SET of queue names)
-- KEYS[2]      schedule (ZSET)
-- KEYS[2i+1]   pushed:<jid_i>, the record of the i-th job (a STRING),
--              i = 1..n
-- KEYS[2i+2]   where the i-th job goes: queue:<q_i> (a LIST), or KEYS[2]
--              itself for a job scheduled for later
-- ARGV[1]      the records' lifetime, whole seconds (the replay window)
-- ARGV[2]      the prefix of the queues' wake-up channels: queue q's
--              channel is ARGV[2] .. q (Keys::WakeQueue; not a key)
-- ARGV[3]      the wake-up channel of scheduled jobs (Keys::WakeScheduled)
-- ARGV[2i+2]   the i-th job's queue name q_i, or, for a scheduled job, the
--              time it is due at, epoch seconds as FormatEpoch writes them
-- ARGV[2i+3]   the i-th job's payload, byte for byte
--
-- In order, each job whose record does not exist takes it (SET 1 NX EX
-- ARGV[1]) and is pushed as push.lua (LPUSH, SADD, PUBLISH when its queue
-- was empty) or schedule.lua (ZADD, PUBLISH when it is the earliest) would
-- push it; a job whose record exists was stored by an earlier send of the
-- same jid (or an earlier job of this call) and is skipped: it is not
-- pushed again, and that is no error. With several jobs every key is
-- checked before the first write. One job (every single push of a spooling
-- client, every push of a drain) lets its writes check the types, as
-- push.lua's single push does, and takes back what it wrote when one is
-- refused. push.lua and schedule.lua stay as they are: a client without a
-- spool pays nothing for the records.
--
-- Returns the number of jobs pushed (0 when every jid was stored already).
-- Errors: RQ_INVALID when KEYS and ARGV do not match, the lifetime is not
-- an integer above 0 or a due time is not a number; WRONGTYPE naming the
-- key when KEYS[1] is not a SET, KEYS[2] not a ZSET, a record not a STRING
-- or a queue key not a LIST (one job: only the keys it writes); nothing is
-- written then.
-- @include lib/args.lua

local njobs = (#KEYS - 2) / 2
if njobs < 1 or njobs % 1 ~= 0 or #ARGV ~= 3 + 2 * njobs then
  return redis.error_reply('RQ_INVALID push_once: want 2 keys and a record and a target per ' ..
                           'job, 3 arguments and a name and a payload per job; got ' ..
                           int_string(#KEYS) .. ' keys and ' .. int_string(#ARGV) ..
                           ' arguments')
end
local ttl = parse_int(ARGV[1], 1)
if ttl == nil then
  return redis.error_reply('RQ_INVALID push_once: the lifetime must be an integer above 0, ' ..
                           'got ' .. ARGV[1])
end

-- One job: no TYPE before the writes (with them Redis took about 1.5 times
-- as long per call). SET NX first: a record that exists is a replay,
-- or a key of the wrong type, which one TYPE tells apart; then the push,
-- each write taking back the ones before it when it is refused.
if njobs == 1 then
  local record, target, name, payload = KEYS[3], KEYS[4], ARGV[4], ARGV[5]
  local scheduled = target == KEYS[2]
  local at = tonumber(name)
  if scheduled and (at == nil or at ~= at) then
    return redis.error_reply('RQ_INVALID push_once: the due time must be a number, got ' .. name)
  end
  if not redis.call('SET', record, '1', 'NX', 'EX', ttl) then
    return check_types('push_once', 'string', 3, 3) or 0
  end
  if scheduled then
    local added = redis.pcall('ZADD', target, name, payload)
    if type(added) == 'table' then
      redis.call('DEL', record)
      return check_types('push_once', 'zset', 2, 2) or added
    end
    if redis.call('ZCOUNT', target, '-inf', name) == 1 then redis.call('PUBLISH', ARGV[3], name) end
    return 1
  end
  local length = redis.pcall('LPUSH', target, payload)
  if type(length) == 'table' then
    redis.call('DEL', record)
    return check_types('push_once', 'list', 4, 4) or length
  end
  local added = redis.pcall('SADD', KEYS[1], name)
  if type(added) == 'table' then
    redis.call('LPOP', target)
    redis.call('DEL', record)
    return check_types('push_once', 'set', 1, 1) or added
  end
  if length == 1 then redis.call('PUBLISH', ARGV[2] .. name, name) end
  return 1
end

local bad = check_types('push_once', 'set', 1, 1) or check_types('push_once', 'zset', 2, 2)
if bad then return bad end
local checked = {}
for i = 1, njobs do
  local record, target = 2 * i + 1, 2 * i + 2
  bad = check_types('push_once', 'string', record, record)
  if bad then return bad end
  if KEYS[target] == KEYS[2] then
    local at = tonumber(ARGV[2 * i + 2])
    -- at ~= at: NaN, which ZADD refuses only after the writes before it.
    if at == nil or at ~= at then
      return redis.error_reply('RQ_INVALID push_once: the due time must be a number, got ' ..
                               ARGV[2 * i + 2])
    end
  elseif not checked[KEYS[target]] then
    bad = check_types('push_once', 'list', target, target)
    if bad then return bad end
    checked[KEYS[target]] = true
  end
end

local pushed, names, named = 0, {}, {}
for i = 1, njobs do
  local target, name, payload = KEYS[2 * i + 2], ARGV[2 * i + 2], ARGV[2 * i + 3]
  if redis.call('SET', KEYS[2 * i + 1], '1', 'NX', 'EX', ttl) then
    if target == KEYS[2] then
      redis.call('ZADD', target, name, payload)
      if redis.call('ZCOUNT', target, '-inf', name) == 1 then
        redis.call('PUBLISH', ARGV[3], name)
      end
    else
      -- 1: the queue was empty before this call (a call's pushes only
      -- lengthen it).
      if redis.call('LPUSH', target, payload) == 1 then
        redis.call('PUBLISH', ARGV[2] .. name, name)
      end
      if not named[name] then
        named[name] = true
        names[#names + 1] = name
      end
    end
    pushed = pushed + 1
  end
end
-- SADD takes its members as arguments; Lua's stack bounds how many.
local kMaxPerCall = 1000
for first = 1, #names, kMaxPerCall do
  redis.call('SADD', KEYS[1], unpack(names, first, math.min(#names, first + kMaxPerCall - 1)))
end
return pushed
