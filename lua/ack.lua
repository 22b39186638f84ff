-- ack.lua: the successes of jobs whose payloads carry a feature marker (a
-- unique key, a sequence key), many in one step: each job leaves its
-- working list and its features end with it (lib/features.lua). A success
-- without a marker is the worker's pipelined LREM instead; every other
-- outcome is finish.lua.
--
-- KEYS[1]  the working list the jobs were fetched into
-- ARGV[1]  the prefix of the sequence keys (Keys::SequencePrefix); "":
--          no sequence key is handed on
-- ARGV[2]  the prefix of queue keys (Keys::Queue(""): "queue:")
-- ARGV[3]  the prefix of the queue wake-up channels (Keys::WakeQueue(""))
-- ARGV[4..] for each job, six arguments: its payload, byte for byte as
--          fetched; its jid and its sequence key as the worker read them
--          from the payload (lib/sequence.lua's reading; "" for none), so
--          that the payload is not decoded again here; the key of its final
--          record (Keys::JobRecord(jid)), or "" for none; the record (JSON);
--          its retention in seconds (integer >= 1 with a record)
--
-- Each job is removed with LREM KEYS[1] -1 payload (from the tail, where
-- the oldest fetched job sits). Only a job that was still there ends its
-- features and gets its record (SET EX): one a janitor gave back lives in
-- its queue and runs again. Nothing is counted here: the worker counts
-- successes with its batched acks.
--
-- Every check comes before the first write (the working list's type, the
-- arguments, each job's feature keys), so that an error leaves every job
-- where it was.
--
-- Returns an array with one integer per job, in order: 1 when it was moved,
-- 0 when it was not in the working list.
-- Errors: RQ_INVALID when the jobs are not given in sixes or a record has
-- no retention >= 1; WRONGTYPE when KEYS[1] is not a LIST or a feature's
-- key is of another type; TRYAGAIN when a feature's key is not on this
-- node while the slot migrates; nothing is written then.

-- @include lib/args.lua
-- @include lib/features.lua

if #KEYS ~= 1 or #ARGV < 3 or (#ARGV - 3) % 6 ~= 0 then
  return redis.error_reply('RQ_INVALID ack: want 1 key, 3 arguments and 6 per job')
end
local sequences = sequence_context(1)
local bad = check_types('ack', 'list', 1, 1)
if bad then return bad end
-- The job's sequence as the worker read it; nil (read here) when the
-- worker found no key but the payload names the field, so that a reading
-- the two disagree on never leaves a key held.
local function known_sequence(i)
  if ARGV[i + 2] == '' and string.find(ARGV[i], '"sequence"', 1, true) then return nil end
  return {key = ARGV[i + 2], jid = ARGV[i + 1]}
end

for i = 4, #ARGV, 6 do
  if ARGV[i + 3] ~= '' then
    if parse_int(ARGV[i + 5], 1) == nil then
      return redis.error_reply('RQ_INVALID ack: a record needs a retention >= 1')
    end
    -- The record's key is not among KEYS: read with KEYS[1], it fails
    -- here, before any write, when it is not on this node while the slot
    -- migrates.
    local reply = redis.pcall('EXISTS', ARGV[i + 3], KEYS[1])
    if type(reply) == 'table' and reply.err then
      return redis.error_reply('TRYAGAIN a record key of this slot is not on this node while ' ..
                               'the slot migrates; nothing was written')
    end
  end
  local away = features_reachable(sequences, ARGV[i], 'ends', 'ack', known_sequence(i))
  if away then return away end
end

-- No LREM once the list may be empty: a script does not name a key again
-- once it may have emptied it (lib/payload.lua).
local left = redis.call('LLEN', KEYS[1])
local moved = {}
for i = 4, #ARGV, 6 do
  local removed = 0
  if left > 0 then removed = redis.call('LREM', KEYS[1], '-1', ARGV[i]) end
  left = left - removed
  if removed > 0 then
    features_end(sequences, ARGV[i], 'ends', known_sequence(i))
    if ARGV[i + 3] ~= '' then
      redis.call('SET', ARGV[i + 3], ARGV[i + 4], 'EX', ARGV[i + 5])
    end
    moved[#moved + 1] = 1
  else
    moved[#moved + 1] = 0
  end
end
return moved
