-- release_unique.lua: release the unique key of a job that is unique until
-- it starts, as a worker takes it.
--
-- KEYS[1]  the job's unique key (its "unique_key" field, a STRING)
-- ARGV[1]  the job's jid
--
-- Compare-and-delete: the key is deleted only while it still holds ARGV[1],
-- so a later push's key is never deleted; a key of another type is left
-- alone. The worker sends it for each fetched job whose payload has
-- "unique_until":"start" (src/server/unique_starts.cc): the search for that
-- field is the worker's, so fetch.lua, which every job passes through,
-- does not pay for it.
--
-- Returns 1 when the key was deleted, 0 otherwise.
-- Errors: RQ_INVALID when ARGV[1] is missing or empty; nothing is written.
-- @include lib/args.lua
-- @include lib/unique.lua

if #KEYS ~= 1 or ARGV[1] == nil or ARGV[1] == '' then
  return redis.error_reply('RQ_INVALID release_unique: KEYS must be the key, ARGV[1] the jid')
end
return unique_delete(KEYS[1], ARGV[1])
