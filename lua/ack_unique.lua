-- ack_unique.lua: acknowledge a succeeded job that holds a unique key until
-- its success, and release the key, in one step.
--
-- KEYS[1]  the working list the job was fetched into
-- ARGV[1]  the payload, byte for byte as it was fetched
--
-- LREM working -1 payload, as the plain ack does (src/server/outcomes.cc);
-- when it removed the job, its unique key is released (lib/unique.lua,
-- compare-and-delete). Only jobs whose payload names a unique key are
-- acknowledged with this script: every other ack stays a plain LREM.
--
-- Returns what the LREM returned (1: removed, 0: not in the list, a
-- janitor gave it back and its key stays with it).
-- Errors: WRONGTYPE when KEYS[1] is not a LIST; nothing is written then.
-- @include lib/args.lua
-- @include lib/unique.lua

local bad = check_types('ack_unique', 'list', 1, 1)
if bad then return bad end
local away = unique_reachable(ARGV[1])
if away then return away end
local moved = redis.call('LREM', KEYS[1], '-1', ARGV[1])
if moved > 0 then unique_release(ARGV[1]) end
return moved
