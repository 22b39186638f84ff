-- lib/features.lua: begin
--
-- What each feature a payload carries does where a run of the job ends
-- (reliableq-schema(7), "THE END OF A JOB'S LIFE"), for every script that
-- ends a run: finish.lua, ack.lua, kill.lua, recover.lua and requeue.lua.
-- A new feature adds its case to both functions, behind a marker its
-- payload carries. Needs lib/args.lua included before it.
--
-- `how` the run ends:
--   'ends'   the job's life ends (done, dead, discard, expire, killed)
--   'retry'  it waits for a retry
--   'waits'  it waits to run again otherwise (snooze)
-- `sequences` is the sequence context (lib/sequence.lua,
-- sequence_context), nil when the caller gave none.

-- @include lib/unique.lua
-- @include lib/sequence.lua

-- Whether the run hands the job's sequence key on: its life ends, or it
-- waits for a retry and says "sequence_release_on_retry": true.
local function features_hand_on(sequences, payload, how)
  if sequences == nil then return false end
  if how == 'ends' then return true end
  if how ~= 'retry' then return false end
  local seq = sequence_of(payload)
  return seq ~= nil and seq.release_on_retry
end

-- Before any write: nil when every key the run's end touches can be
-- written here, else the error reply to return (TRYAGAIN on a cluster
-- whose slot migrates, WRONGTYPE for a key of another type). `known`,
-- when given, is the job's sequence as the caller read it ({key, jid}; key
-- "" for none), so that the payload is not decoded for it again.
local function features_reachable(sequences, payload, how, script, known)
  if how == 'ends' then
    local away = unique_reachable(payload)
    if away then return away end
  end
  if not features_hand_on(sequences, payload, how) then return nil end
  if known == nil then return sequence_reachable(sequences, payload, script) end
  if known.key == '' then return nil end
  return sequence_job_reachable(sequences, known.key, known.jid, script)
end

-- The features' writes, once the job moved.
local function features_end(sequences, payload, how, known)
  if how == 'ends' then unique_release(payload) end
  if not features_hand_on(sequences, payload, how) then return end
  if known == nil then
    sequence_release(sequences, payload)
  elseif known.key ~= '' then
    sequence_job_release(sequences, known.key, known.jid)
  end
end

-- lib/features.lua: end
