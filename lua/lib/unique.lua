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

-- The hash tag of `key` as Redis Cluster reads it: the text between its
-- first '{' and the first '}' after it, when not empty; else nil.
local function unique_hash_tag(key)
  local open = string.find(key, '{', 1, true)
  if open == nil then return nil end
  local close = string.find(key, '}', open + 1, true)
  if close == nil or close == open + 1 then return nil end
  return string.sub(key, open + 1, close - 1)
end

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
  -- In layout 2 every key a script names carries its group's hash tag,
  -- KEYS[1] among them, and so does every unique key the group took: a key
  -- with another tag is no lock of this group (on a cluster, not even in
  -- this slot), and one named before a move to layout 2 (reliableq
  -- migrate) has none.
  local tag = unique_hash_tag(KEYS[1])
  if tag ~= nil and unique_hash_tag(job.unique_key) ~= tag then return nil end
  return job
end

-- For a script about to release the unique key of the job in `payload`,
-- before it writes anything: nil when the key can be read here, else the
-- error reply to return. On a Redis Cluster whose slot migrates, the lock
-- may already be on the target, or still on the source while the script
-- runs on the target; a read of it alone would find nothing there and
-- leave it held for good, but a read of it together with KEYS[1] (a key
-- this node has) is refused, and the whole move is tried again
-- (TRYAGAIN: a blocking connection waits and sends it again, a worker
-- sends the outcome again after a pause).
local function unique_reachable(payload)
  local job = unique_fields(payload, '"unique_key"')
  if job == nil then return nil end
  local reply = redis.pcall('EXISTS', job.unique_key, KEYS[1])
  if type(reply) == 'table' and reply.err then
    return redis.error_reply('TRYAGAIN a unique key of this slot is not on this node while ' ..
                             'the slot migrates; nothing was written')
  end
  return nil
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
