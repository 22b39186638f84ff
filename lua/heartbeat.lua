-- heartbeat.lua: one beat of a live process.
--
-- KEYS[1]  its heartbeat key (STRING "1" with a PX ttl; its absence means
--          the process is dead)
-- KEYS[2]  the registry (HASH identity -> registry entry JSON)
-- KEYS[3]  processes (Sidekiq's SET of identities)
-- KEYS[4]  <identity>, Sidekiq's process HASH
-- KEYS[5]  <identity>:work (Sidekiq 6.4.2+ work HASH)
-- KEYS[6]  <identity>:workers (Sidekiq 6.4.1 work HASH)
-- KEYS[7]  <identity>-signals (LIST of remote signals, LPUSHed by the UI)
-- ARGV[1]  identity
-- ARGV[2]  heartbeat ttl in milliseconds (integer >= 1)
-- ARGV[3]  registry entry JSON
-- ARGV[4]  info JSON (Sidekiq's info field)
-- ARGV[5]  busy: jobs running now
-- ARGV[6]  beat: now in float seconds
-- ARGV[7]  quiet: "true" or "false"
-- ARGV[8]  rss in KB
-- ARGV[9]  rtt_us: one round trip in microseconds
-- ARGV[10..]  pairs (thread id, work JSON) for every running job
--
-- Sets the heartbeat with its ttl, (re-)registers the process, writes the
-- process hash (EXPIRE 60), rewrites both work hashes from the pairs
-- (EXPIRE 60; absent when there are no pairs) and pops one signal.
--
-- Returns {existed, signal}: existed is 1 when the heartbeat key was there
-- before this beat and 0 when it was not (first beat, or the process was
-- declared dead meanwhile); signal is the popped signal or nil.
-- Errors: RQ_INVALID for a bad ttl, quiet flag or odd pairs; nothing is
-- written then.

-- @include lib/payload.lua

if parse_int(ARGV[2], 1) == nil then
  return redis.error_reply('RQ_INVALID heartbeat: ttl must be an integer >= 1 ms, got ' ..
                           tostring(ARGV[2]))
end
if ARGV[7] ~= 'true' and ARGV[7] ~= 'false' then
  return redis.error_reply('RQ_INVALID heartbeat: quiet must be true or false')
end
if #ARGV < 9 or (#ARGV - 9) % 2 ~= 0 then
  return redis.error_reply('RQ_INVALID heartbeat: work must be (thread id, JSON) pairs')
end

local identity = ARGV[1]
local existed = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], '1', 'PX', ARGV[2])
redis.call('HSET', KEYS[2], identity, ARGV[3])
redis.call('SADD', KEYS[3], identity)
redis.call('HSET', KEYS[4], 'info', ARGV[4], 'busy', ARGV[5], 'beat', ARGV[6],
           'quiet', ARGV[7], 'rss', ARGV[8], 'rtt_us', ARGV[9])
redis.call('EXPIRE', KEYS[4], '60')
redis.call('DEL', KEYS[5], KEYS[6])
if #ARGV > 9 then
  for j = 10, #ARGV, 2 do
    redis.call('HSET', KEYS[5], ARGV[j], ARGV[j + 1])
    redis.call('HSET', KEYS[6], ARGV[j], ARGV[j + 1])
  end
  redis.call('EXPIRE', KEYS[5], '60')
  redis.call('EXPIRE', KEYS[6], '60')
end
local signal = redis.call('RPOP', KEYS[7])
return {existed, signal}
