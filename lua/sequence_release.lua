-- sequence_release.lua: an operator lets a held sequence key go
-- (reliableq(1), "Operator commands"): the key goes on to the oldest job
-- waiting for it exactly as when its holder's life ends (finish.lua,
-- lib/sequence.lua sequence_hand_on), or is let go when none waits.
--
-- KEYS[1]  P sequences (HASH: key -> holder's jid), P being ARGV[2]
-- KEYS[2]  P sequences:since (ZSET)
-- KEYS[3]  P sequence:<key> (LIST: the jobs waiting for it, oldest LEFT)
-- ARGV[1]  the sequence key
-- ARGV[2]  the prefix of the sequence keys (Keys::SequencePrefix)
-- ARGV[3]  the prefix of queue keys (Keys::Queue(""): "queue:")
-- ARGV[4]  the prefix of the queue wake-up channels (Keys::WakeQueue(""));
--          "": no PUBLISH
--
-- The job that held the key is not touched: if it runs again later (a
-- retry, a janitor's give-back), fetch.lua finds the key held by another
-- jid and parks it at the end of the key's list; when its life ends,
-- finish.lua finds it no longer holds the key and releases nothing.
--
-- Returns {0} when the key is not held (nothing was written), else
-- {1, holder, next}: the jid that held it and the jid it went to ("" when
-- none waited and the key was let go).
-- Errors: RQ_INVALID when ARGV[1] or ARGV[2] is missing or empty, or KEYS
-- are not the keys of ARGV[1..2]; WRONGTYPE when a key it may write exists
-- with another type; nothing is written then.
-- @include lib/payload.lua
-- @include lib/sequence.lua

local ctx = sequence_context(2)
local key = ARGV[1]
if ctx == nil or key == nil or key == '' or KEYS[1] ~= sequence_holders(ctx) or
    KEYS[2] ~= sequence_since(ctx) or KEYS[3] ~= sequence_waiting(ctx, key) then
  return redis.error_reply('RQ_INVALID sequence_release: ARGV must be the key and the ' ..
                           'prefixes, KEYS the sequence keys of that key')
end
local bad = sequence_key_reachable(ctx, key, 'sequence_release')
if bad then return bad end
local holder = redis.call('HGET', KEYS[1], key)
if not holder then return {0} end
return {1, holder, sequence_hand_on(ctx, key) or ''}
