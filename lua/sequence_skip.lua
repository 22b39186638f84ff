-- sequence_skip.lua: an operator moves the oldest job waiting for a
-- sequence key to the dead set (reliableq(1), "Operator commands"): a job
-- that must not run, and would stop the whole sequence when it did.
--
-- KEYS[1]  P sequences (HASH: key -> holder's jid), P being ARGV[5]
-- KEYS[2]  P sequences:since (ZSET)
-- KEYS[3]  P sequence:<key> (LIST: the jobs waiting for it, oldest LEFT)
-- KEYS[4]  dead (ZSET)
-- ARGV[1]  the sequence key
-- ARGV[2]  now, float seconds with a fractional part: the dead-set score
-- ARGV[3]  dead max jobs (integer >= 1)
-- ARGV[4]  dead timeout in seconds (integer >= 0)
-- ARGV[5]  the prefix of the sequence keys (Keys::SequencePrefix)
-- ARGV[6]  the prefix of queue keys (Keys::Queue(""): "queue:")
-- ARGV[7]  the prefix of the queue wake-up channels (Keys::WakeQueue(""));
--          "": no PUBLISH
--
-- The head of KEYS[3] leaves it and goes into dead unchanged, as kill.lua
-- moves a job, with Sidekiq's dead-set insert; a unique key it holds is
-- released. The holder keeps the key. An entry that is not a job (edited
-- by hand) is moved as well. When the key was held by nobody (such an
-- entry at the head had stopped the hand-on, lib/sequence.lua) and jobs
-- still wait, the key goes on to the next of them, as a finish would
-- hand it on.
--
-- Returns {0} when no job waits for the key (nothing was written), else
-- {1, skipped, next}: the jid of the job moved to dead ("" when it is not
-- a job) and the jid the key went to ("" when it did not move).
-- Errors: RQ_INVALID for a missing key or prefix, KEYS that are not the
-- keys of ARGV[1] and ARGV[5], a bad now or dead limits; WRONGTYPE when a
-- key it may write exists with another type; nothing is written then.
-- @include lib/payload.lua
-- @include lib/unique.lua
-- @include lib/sequence.lua

local ctx = sequence_context(5)
local key = ARGV[1]
if ctx == nil or key == nil or key == '' or KEYS[1] ~= sequence_holders(ctx) or
    KEYS[2] ~= sequence_since(ctx) or KEYS[3] ~= sequence_waiting(ctx, key) then
  return redis.error_reply('RQ_INVALID sequence_skip: ARGV must be the key, the dead ' ..
                           'terms and the prefixes, KEYS the sequence keys of that key')
end
local now = ARGV[2]
if not is_float_seconds(now) then
  return redis.error_reply('RQ_INVALID sequence_skip: now must be float seconds, got ' ..
                           tostring(now))
end
local dead_max = parse_int(ARGV[3], 1)
local dead_timeout = parse_int(ARGV[4], 0)
if dead_max == nil or dead_timeout == nil then
  return redis.error_reply('RQ_INVALID sequence_skip: bad dead limits')
end
local bad = check_types('sequence_skip', 'zset', 4, 4) or sequence_check(ctx, {key = key},
                                                                         'sequence_skip')
if bad then return bad end

local waiting = KEYS[3]
local head = redis.call('LINDEX', waiting, '0')
if not head then return {0} end
local away = unique_reachable(head)
if away then return away end
-- A key held for a head entry that names no job (lib/sequence.lua) goes
-- on once that entry is skipped.
local holder = redis.call('HGET', KEYS[1], key)
local held = holder and holder ~= kSequenceStuck
local count = redis.call('LLEN', waiting)
if not held then
  -- The key goes on after the LPOP: the job that would take it must reach
  -- its queue. It is read now, with the time, so that the hand-on reads
  -- nothing after the LPOP, which may empty the list.
  local second = redis.call('LINDEX', waiting, '1')
  sequence_planned[key] = {next = second, now = sequence_now()}
  local second_seq = second and sequence_of(second)
  if second_seq then
    bad = sequence_check_key(ctx.queue_prefix .. second_seq.queue, 'list', 'sequence_skip')
    if bad then return bad end
  end
end
local skipped = sequence_of(head)
dead_add(KEYS[4], now, {head}, dead_max, dead_timeout)
unique_release(head)
-- The LPOP is the list's last command when it may empty it (a script does
-- not name a key again once it may have emptied it: lib/dead.lua).
redis.call('LPOP', waiting)
local next_jid = ''
if not held and (count > 1 or holder) then next_jid = sequence_hand_on(ctx, key) or '' end
return {1, skipped and skipped.jid or '', next_jid}
