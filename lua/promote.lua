-- promote.lua: move due jobs of `schedule` or `retry` to their queues.
--
-- KEYS[1]    the sorted set the jobs are due in: schedule or retry
-- KEYS[2]    queues (SET of queue names)
-- KEYS[3]    dead (ZSET), for members that are not a job
-- KEYS[4..]  queue:<q> for every queue named by the jobs below
-- ARGV[1]    now, float seconds with a fractional part: the new enqueued_at
--            and the bound of what is due; empty: Redis's own clock (TIME),
--            which workers give, so that a worker whose clock runs ahead
--            moves no job early (reliableq-schema(7), CLOCKS)
-- ARGV[2]    dead max jobs (integer >= 1)
-- ARGV[3]    dead timeout in seconds (integer >= 0)
-- ARGV[4]    the wake channel prefix (Keys::WakeQueue("")), or "" for none
-- ARGV[3j+2] k_j: the index into KEYS (>= 4) of member j's queue, or 0 when
--            the member is not a job (it goes to dead as it is)
-- ARGV[3j+3] the name of that queue (added to `queues`)
-- ARGV[3j+4] member j, byte for byte as it is stored in KEYS[1]
--
-- The caller read the members with ZRANGEBYSCORE; each is moved only if
-- its score is still at most now (else it is left, counted as early) and
-- ZREM still removes it here, so two processes promoting the same member
-- push it once, and a member is always in the set or in its queue, never
-- in neither (Sidekiq's poller pops and pushes in two steps and can lose a
-- job between them). The pushed payload is the member with enqueued_at set
-- to now, edited as text: every other byte stays. A push that finds its
-- queue empty publishes the queue's name on ARGV[4]..name, as push.lua
-- does, so that an idle worker starts the job at once.
--
-- Returns {promoted, dead, skipped, early}: skipped members were no longer
-- in the set (somebody else promoted or deleted them); early ones are not
-- due yet by now (the caller's bound ran ahead of Redis's clock).
-- Errors: RQ_INVALID for bad arguments; WRONGTYPE when KEYS[1] or KEYS[3]
-- exists and is not a ZSET, KEYS[2] not a SET or a KEYS[4..] not a LIST;
-- nothing is written then.

-- @include lib/payload.lua

local now = ARGV[1]
if now == '' then
  local time = redis.call('TIME')
  now = string.format('%d.%06d', tonumber(time[1]), tonumber(time[2]))
end
if not is_float_seconds(now) then
  return redis.error_reply('RQ_INVALID promote: now must be float seconds, got ' ..
                           tostring(now))
end
local dead_max = parse_int(ARGV[2], 1)
local dead_timeout = parse_int(ARGV[3], 0)
if dead_max == nil or dead_timeout == nil then
  return redis.error_reply('RQ_INVALID promote: bad dead limits')
end
if ARGV[4] == nil or (#ARGV - 4) % 3 ~= 0 then
  return redis.error_reply('RQ_INVALID promote: ARGV must end in (key index, name, member) triples')
end
local wake_prefix = ARGV[4]
for j = 5, #ARGV, 3 do
  local k = parse_int(ARGV[j], 0)
  if k == nil or (k ~= 0 and (k < 4 or k > #KEYS)) then
    return redis.error_reply('RQ_INVALID promote: bad queue index ' .. tostring(ARGV[j]))
  end
end
local bad = check_types('promote', 'zset', 1, 1) or check_types('promote', 'set', 2, 2) or
    check_types('promote', 'zset', 3, 3) or check_types('promote', 'list', 4, #KEYS)
if bad then return bad end

-- Every score is read before the first ZREM, which may empty the set
-- (lib/payload.lua: no key is named again once it may be empty).
local due_by = tonumber(now)
local early = {}
for j = 5, #ARGV, 3 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[j + 2])
  if score and tonumber(score) > due_by then early[j] = true end
end

local promoted, skipped, early_count = 0, 0, 0
local dead = {}
local take = zset_remover(KEYS[1])
for j = 5, #ARGV, 3 do
  local k = tonumber(ARGV[j])
  local name, member = ARGV[j + 1], ARGV[j + 2]
  if early[j] then
    early_count = early_count + 1
  elseif not take(member) then
    skipped = skipped + 1
  elseif k == 0 then
    dead[#dead + 1] = member
  else
    local payload = json_set_field(member, 'enqueued_at', now)
    if payload == nil then
      dead[#dead + 1] = member
    else
      if redis.call('LPUSH', KEYS[k], payload) == 1 and wake_prefix ~= '' then
        redis.call('PUBLISH', wake_prefix .. name, name)
      end
      redis.call('SADD', KEYS[2], name)
      promoted = promoted + 1
    end
  end
end
dead_add(KEYS[3], now, dead, dead_max, dead_timeout)
return {promoted, #dead, skipped, early_count}
