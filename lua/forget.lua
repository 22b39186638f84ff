-- forget.lua: unregister a process that owns no jobs any more.
--
-- KEYS[1]    its heartbeat key
-- KEYS[2]    the registry (HASH identity -> registry entry JSON)
-- KEYS[3]    processes (Sidekiq's SET of identities)
-- KEYS[4]    <identity>, Sidekiq's process HASH
-- KEYS[5]    <identity>:work
-- KEYS[6]    <identity>:workers
-- KEYS[7..]  every working list of the process (one per queue it serves)
-- ARGV[1]    identity
-- ARGV[2]    force: "1" to forget it even though its heartbeat exists (a
--            process stopping cleanly forgets itself)
--
-- The registry entry is the janitor's only way to find the working lists,
-- so it is removed only when every one of them is empty. The heartbeat is
-- checked here too: a process that beat again since the janitor looked is
-- kept.
--
-- Returns 1 when the process was forgotten (registry entry, processes
-- member, heartbeat, process hash and both work hashes removed), 0 when its
-- heartbeat exists (without force) or a working list is not empty.
-- Errors: RQ_INVALID for a bad force flag or fewer than 6 KEYS.

-- @include lib/payload.lua

if ARGV[2] ~= '0' and ARGV[2] ~= '1' then
  return redis.error_reply('RQ_INVALID forget: force must be 0 or 1')
end
if #KEYS < 6 or ARGV[1] == nil or ARGV[1] == '' then
  return redis.error_reply('RQ_INVALID forget: needs 6 keys and an identity')
end
if ARGV[2] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
for k = 7, #KEYS do
  if redis.call('LLEN', KEYS[k]) > 0 then return 0 end
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6])
return 1
