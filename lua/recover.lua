-- recover.lua: give back the jobs of one working list of a dead process.
--
-- KEYS[1]  the heartbeat key of the list's owner
-- KEYS[2]  the working list (LEFT end: newest fetched; RIGHT end: oldest)
-- KEYS[3]  queue:<q>, the queue its jobs came from
-- KEYS[4]  dead (ZSET)
-- KEYS[5]  queues (SET of queue names)
-- ARGV[1]  max_interruptions: a job interrupted more often goes to dead
--          (integer; negative means no limit)
-- ARGV[2]  now, float seconds with a fractional part
-- ARGV[3]  limit: the most jobs to look at in this call (integer >= 1)
-- ARGV[4]  force: "1" to recover even though the heartbeat key exists
-- ARGV[5]  dry run: "1" to only count what would move
-- ARGV[6]  dead max jobs (integer >= 1)
-- ARGV[7]  dead timeout in seconds (integer >= 0)
-- ARGV[8]  the queue name q (added to `queues` when a job is requeued)
-- ARGV[9]  offset: the first index of the working list to look at (dry run
--          only; integer >= 0)
-- ARGV[10] optional: the prefix of the sequence keys
--          (Keys::SequencePrefix); absent or "": none released
-- ARGV[11] the prefix of queue keys (Keys::Queue(""))
-- ARGV[12] the prefix of the queue wake-up channels (Keys::WakeQueue(""))
--
-- The heartbeat is checked here, inside the same atomic step as the moves,
-- so a process that beat again since the caller looked keeps its jobs.
-- Jobs move newest first: each is taken from the LEFT of the working list
-- and pushed on the RIGHT of the queue, so the oldest ends rightmost and is
-- taken next, as it would have been. Each one gets interrupted_count + 1;
-- one interrupted more than max_interruptions times goes to the dead set
-- with error fields instead. A dry run looks at LRANGE offset ..
-- offset+limit-1 only and writes nothing. A job that goes dead releases
-- its unique key (lib/unique.lua) and its sequence key (lib/sequence.lua:
-- the key goes to the oldest job waiting for it); one put back in its
-- queue keeps both, and so runs before any other job of its sequence.
--
-- Returns {"alive", 0, 0, LLEN working} when the heartbeat exists and force
-- is not set; otherwise {"ok", requeued, dead, remaining}, remaining being
-- the jobs left in the list (dry run: max(0, LLEN - offset - limit)).
-- Errors: RQ_INVALID for bad arguments; WRONGTYPE when KEYS[2] exists and
-- is not a LIST, or when a job goes back and KEYS[3] is not a LIST or
-- KEYS[5] not a SET, or goes dead and KEYS[4] is not a ZSET (checked after
-- the heartbeat, for a dry run too); nothing is written then.

-- @include lib/payload.lua
-- @include lib/features.lua

local max_interruptions = parse_int(ARGV[1])
local now = ARGV[2]
local limit = parse_int(ARGV[3], 1)
local force = ARGV[4]
local dry_run = ARGV[5]
local dead_max = parse_int(ARGV[6], 1)
local dead_timeout = parse_int(ARGV[7], 0)
local queue_name = ARGV[8]
if max_interruptions == nil then
  return redis.error_reply('RQ_INVALID recover: bad max_interruptions ' .. tostring(ARGV[1]))
end
if not is_float_seconds(now) then
  return redis.error_reply('RQ_INVALID recover: now must be float seconds, got ' ..
                           tostring(now))
end
if limit == nil then
  return redis.error_reply('RQ_INVALID recover: limit must be an integer >= 1')
end
if (force ~= '0' and force ~= '1') or (dry_run ~= '0' and dry_run ~= '1') then
  return redis.error_reply('RQ_INVALID recover: force and dry run must be 0 or 1')
end
if dead_max == nil or dead_timeout == nil then
  return redis.error_reply('RQ_INVALID recover: bad dead max jobs or timeout')
end
if queue_name == nil or queue_name == '' then
  return redis.error_reply('RQ_INVALID recover: the queue name is empty')
end
local offset = 0
if dry_run == '1' then
  offset = parse_int(ARGV[9], 0)
  if offset == nil then
    return redis.error_reply('RQ_INVALID recover: offset must be an integer >= 0')
  end
end

if force ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return {'alive', 0, 0, redis.call('LLEN', KEYS[2])}
end
local bad = check_types('recover', 'list', 2, 2)
if bad then return bad end

-- Where each job goes is decided before anything is written (a dry run
-- stops there), so that the keys written can be checked first.
local jobs = redis.call('LRANGE', KEYS[2], int_string(offset), int_string(offset + limit - 1))
local back, dead = {}, {}
for _, payload in ipairs(jobs) do
  local new_payload, goes_dead = interrupt(payload, max_interruptions, now)
  if goes_dead then dead[#dead + 1] = new_payload else back[#back + 1] = new_payload end
end
-- Only the keys this call writes: most lists a pass looks at are empty, and
-- it must not fail over keys it does not touch. A dry run checks them too,
-- so that it foretells the real run.
bad = (#back > 0 and (check_types('recover', 'list', 3, 3) or
                      check_types('recover', 'set', 5, 5))) or
    (#dead > 0 and check_types('recover', 'zset', 4, 4))
if bad then return bad end

if dry_run == '1' then
  local remaining = redis.call('LLEN', KEYS[2]) - offset - limit
  if remaining < 0 then remaining = 0 end
  return {'ok', #back, #dead, remaining}
end

local sequences = sequence_context(10)
for _, payload in ipairs(dead) do
  local away = features_reachable(sequences, payload, 'ends', 'recover')
  if away then return away end
end
-- What stays is counted before the LTRIM, which may empty the list: a
-- script does not name a key again once it may have emptied it
-- (lib/payload.lua).
local remaining = redis.call('LLEN', KEYS[2]) - #jobs
if #jobs > 0 then
  redis.call('LTRIM', KEYS[2], int_string(#jobs), '-1')
end
give_back(KEYS[3], back, KEYS[4], dead, now, dead_max, dead_timeout)
-- A job sent to dead frees its unique key; one put back in its queue keeps
-- it: it has not run to success yet, and a second push while it waits
-- there is still refused.
for _, payload in ipairs(dead) do
  features_end(sequences, payload, 'ends')
end
if #back > 0 then
  redis.call('SADD', KEYS[5], queue_name)
end
return {'ok', #back, #dead, remaining}
