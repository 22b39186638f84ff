-- requeue.lua: a live process gives jobs of one working list back.
--
-- KEYS[1]  the working list (LEFT end: newest fetched; RIGHT end: oldest)
-- KEYS[2]  queue:<q>, the queue its jobs came from
-- KEYS[3]  dead (ZSET)
-- KEYS[4]  queues (SET of queue names)
-- ARGV[1]  mode: "keep" or "interrupt"
-- ARGV[2]  max_interruptions (mode "interrupt"; integer, negative: no limit)
-- ARGV[3]  now, float seconds with a fractional part (mode "interrupt")
-- ARGV[4]  dead max jobs (mode "interrupt"; integer >= 1)
-- ARGV[5]  dead timeout in seconds (mode "interrupt"; integer >= 0)
-- ARGV[6]  the queue name q (added to `queues` when a job is requeued)
-- ARGV[7]  the prefix of the sequence keys (Keys::SequencePrefix); "":
--          none released
-- ARGV[8]  the prefix of queue keys (Keys::Queue(""))
-- ARGV[9]  the prefix of the queue wake-up channels (Keys::WakeQueue(""))
-- ARGV[10..] payloads, byte for byte as fetched; a multiset: the same
--          string given twice stands for two copies
--
-- keep (quiet: hand back what has not started): every job of the working
-- list that is not one of the listed payloads goes back untouched; the
-- listed ones (the running jobs) stay in the working list, in their order.
-- interrupt (stop past the deadline): every job goes back; a listed one was
-- running, so it goes through the interruption count (requeued with
-- interrupted_count + 1, or to the dead set with error fields when it was
-- interrupted more than max_interruptions times); unlisted ones go back
-- untouched. Listed payloads not in the working list are ignored.
-- Jobs go back to the RIGHT end of the queue, the oldest rightmost, so they
-- are taken next and in the order they were fetched.
--
-- A job that goes dead releases its unique key (lib/unique.lua) and its
-- sequence key (lib/sequence.lua); one put back in its queue keeps both.
--
-- Returns {requeued, dead, kept}.
-- Errors: RQ_INVALID for bad arguments; WRONGTYPE when KEYS[1] exists and
-- is not a LIST, or when a job goes back and KEYS[2] is not a LIST or
-- KEYS[4] not a SET, or goes dead and KEYS[3] is not a ZSET; nothing is
-- written then.

-- @include lib/payload.lua
-- @include lib/features.lua

local mode = ARGV[1]
if mode ~= 'keep' and mode ~= 'interrupt' then
  return redis.error_reply('RQ_INVALID requeue: mode must be keep or interrupt, got ' ..
                           tostring(mode))
end
if ARGV[6] == nil or ARGV[6] == '' then
  return redis.error_reply('RQ_INVALID requeue: the queue name is empty')
end
local max_interruptions, now, dead_max, dead_timeout
if mode == 'interrupt' then
  max_interruptions = parse_int(ARGV[2])
  now = ARGV[3]
  dead_max = parse_int(ARGV[4], 1)
  dead_timeout = parse_int(ARGV[5], 0)
  if max_interruptions == nil or dead_max == nil or dead_timeout == nil then
    return redis.error_reply('RQ_INVALID requeue: bad max_interruptions or dead limits')
  end
  if not is_float_seconds(now) then
    return redis.error_reply('RQ_INVALID requeue: now must be float seconds, got ' ..
                             tostring(now))
  end
end
-- The working list always (it is read, and may be rewritten).
local bad = check_types('requeue', 'list', 1, 1)
if bad then return bad end

local listed = {}
for j = 10, #ARGV do
  listed[ARGV[j]] = (listed[ARGV[j]] or 0) + 1
end

-- A live process's working lists hold at most its concurrency plus its
-- prefetch, so the whole list is read at once.
local jobs = redis.call('LRANGE', KEYS[1], '0', '-1')
-- Where each job goes is decided before anything is written, so that the
-- keys written can be checked first.
local kept, back, dead, leaving = {}, {}, {}, {}
for _, payload in ipairs(jobs) do
  local is_listed = (listed[payload] or 0) > 0
  if is_listed then listed[payload] = listed[payload] - 1 end
  if mode == 'keep' and is_listed then
    kept[#kept + 1] = payload
  else
    leaving[#leaving + 1] = payload
    if mode == 'interrupt' and is_listed then
      local new_payload, goes_dead = interrupt(payload, max_interruptions, now)
      if goes_dead then dead[#dead + 1] = new_payload else back[#back + 1] = new_payload end
    else
      back[#back + 1] = payload
    end
  end
end

-- The queue, `queues` and dead only when written: most reconciles give
-- nothing back and must not fail over keys they do not touch (a queue that
-- is broken must not stop the reconcile of every other queue).
bad = (#back > 0 and check_types('requeue', 'list', 2, 2)) or
    (#back > 0 and check_types('requeue', 'set', 4, 4)) or
    (#dead > 0 and check_types('requeue', 'zset', 3, 3))
if bad then return bad end
local sequences = sequence_context(7)
for _, payload in ipairs(dead) do
  local away = features_reachable(sequences, payload, 'ends', 'requeue')
  if away then return away end
end

give_back(KEYS[2], back, KEYS[3], dead, now, dead_max, dead_timeout)
-- As recover.lua: dead releases a unique key, back to the queue keeps it.
for _, payload in ipairs(dead) do
  features_end(sequences, payload, 'ends')
end
-- The leaving jobs come out of the working list one at a time, so that the
-- kept ones stay where they are and the list is never emptied while
-- something still follows on it (lib/payload.lua): one DEL when nothing
-- stays, else an LREM of each, from the RIGHT (the oldest fetched leave
-- first, and a string given twice stands for as many copies).
if #kept == 0 then
  if #jobs > 0 then redis.call('DEL', KEYS[1]) end
else
  for _, payload in ipairs(leaving) do
    redis.call('LREM', KEYS[1], '-1', payload)
  end
end
if #back > 0 then
  redis.call('SADD', KEYS[4], ARGV[6])
end
return {#back, #dead, #kept}
