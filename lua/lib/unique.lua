-- lib/unique.lua: begin
--
-- Releases the unique key of a job pushed with uniqueness (push_unique.lua),
-- for the scripts that end a job's life (reliableq-schema(7), "Unique
-- jobs"). Self-contained: it needs nothing of the payload library.
--
-- The payload names its key in the top-level field "unique_key" (the full
-- Redis key) and its holder in "jid". A plain string.find comes first, so
-- a payload without the field costs one substring search and no parse;
-- only a payload that has it is decoded (cjson: only its strings are read,
-- and the payload itself is never written back). Fields of the same names
-- inside args are not taken for the top-level ones.
-- The key is not among the script's KEYS: its name is only known from the
-- payload, and a name without "unique:" is ignored. In layout 2 it begins
-- with the group's prefix, "P{G}:unique:", so it lives in the slot of the
-- keys the script names.

-- The job's top-level fields when its payload mentions `marker`, else nil.
local function unique_fields(payload, marker)
  if not string.find(payload, marker, 1, true) then return nil end
  local ok, job = pcall(cjson.decode, payload)
  if not ok or type(job) ~= 'table' then return nil end
  if type(job.unique_key) ~= 'string' or job.unique_key == '' or type(job.jid) ~= 'string' then
    return nil
  end
  -- Only a unique key (Keys::Unique: the prefix, then "unique:") is ever
  -- released: a payload naming any other key (an application's own, whose
  -- value a crafted jid could match) is not taken for a lock.
  if not string.find(job.unique_key, 'unique:', 1, true) then return nil end
  return job
end

-- Compare-and-delete: deletes the key only while it still holds the jid
-- (a later push of the same key may hold it now). A key of another type is
-- left alone: it is not a lock this job took, and an error here would fail
-- the move it is part of. Returns 1 when deleted.
local function unique_delete(key, jid)
  if redis.pcall('GET', key) ~= jid then return 0 end
  return redis.call('DEL', key)
end

-- Releases the job's unique key, if it holds one. Returns 1 when deleted.
local function unique_release(payload)
  local job = unique_fields(payload, '"unique_key"')
  if job == nil then return 0 end
  return unique_delete(job.unique_key, job.jid)
end

-- lib/unique.lua: end
