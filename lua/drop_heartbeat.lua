-- drop_heartbeat.lua: take for dead a process whose connections are all gone.
--
-- KEYS[1]  its heartbeat key (STRING: the client id of the connection its
--          latest beat was sent on; see heartbeat.lua)
-- KEYS[2]  the registry (HASH identity -> registry entry JSON)
-- ARGV[1]  the beat_client of the registry entry the janitor found with no
--          connection left (a positive integer)
-- ARGV[2]  the process's identity
-- ARGV[3]  the registry entry the janitor read, byte for byte
-- ARGV[4]  the run_id of the server whose client list showed none of the
--          process's connections (INFO server)
--
-- Deletes KEYS[1] only while it still holds ARGV[1] and the registry entry
-- is still ARGV[3]: a beat on the same connection after the janitor read
-- the entry may have listed a new queue (a namespace's), whose working list
-- the janitor would not empty; then the next pass reads the new entry. The
-- janitor read the
-- entry, then saw that none of its connections exists any more; a process
-- that has reconnected and beaten since then wrote the id of its new
-- connection here, and stays alive. A connection id is never given out
-- twice by one server run, so once that connection is gone no later beat
-- can write the same value again. After the delete, the recovery pass goes
-- on as for an expired heartbeat (recover.lua and forget.lua check the key
-- again inside each step).
--
-- Deletes nothing either when this server's run_id is not ARGV[4] (or INFO
-- is refused): the client list was read on another server (a failover
-- moved the janitor's connection between the two calls), where the
-- process's connections could not be.
--
-- Returns 1 when the key was deleted, 0 when it is absent, holds another
-- value, or the server is not the one the client list came from.
-- Errors: RQ_INVALID when ARGV[1] is not a positive integer or ARGV[2] or
-- ARGV[3] is missing; WRONGTYPE when KEYS[1] exists and is not a STRING or
-- KEYS[2] exists and is not a HASH; nothing is written then.

-- @include lib/payload.lua

if ARGV[1] == nil or not string.find(ARGV[1], '^[1-9]%d*$') then
  return redis.error_reply('RQ_INVALID drop_heartbeat: the client id must be a positive ' ..
                           'integer, got ' .. tostring(ARGV[1]))
end
if ARGV[2] == nil or ARGV[3] == nil or ARGV[4] == nil then
  return redis.error_reply('RQ_INVALID drop_heartbeat: needs the identity, the entry read ' ..
                           'and the run_id')
end
local bad = check_types('drop_heartbeat', 'string', 1, 1) or
            check_types('drop_heartbeat', 'hash', 2, 2)
if bad then return bad end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[2], ARGV[2]) ~= ARGV[3] then return 0 end
local info = redis.pcall('INFO', 'server')
if type(info) ~= 'string' or string.match(info, 'run_id:(%x+)') ~= ARGV[4] then return 0 end
redis.call('DEL', KEYS[1])
return 1
