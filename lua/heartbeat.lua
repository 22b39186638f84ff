-- heartbeat.lua: one beat of a live process.
--
-- KEYS[1]  its heartbeat key (STRING with a PX ttl: the client id of the
--          connection the beat was sent on, or "1"; its absence means the
--          process is dead)
-- KEYS[2]  the registry (HASH identity -> registry entry JSON)
-- KEYS[3]  processes (Sidekiq's SET of identities)
-- KEYS[4]  <identity>, Sidekiq's process HASH
-- KEYS[5]  <identity>:work (Sidekiq 6.4.2+ work HASH)
-- KEYS[6]  <identity>:workers (Sidekiq 6.4.1 work HASH)
-- KEYS[7]  <identity>-signals (LIST of remote signals, LPUSHed by the UI)
-- ARGV[1]  identity
-- ARGV[2]  heartbeat ttl in milliseconds (integer >= 1)
-- ARGV[3]  registry entry JSON (see "beat_client" below)
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
-- beat_client: when the entry is a JSON object whose top-level beat_client
-- is a positive integer (the CLIENT ID of the connection this beat is sent
-- on), the heartbeat key holds that id, and the entry is stored with its
-- top-level run_id set to this server's run_id (INFO server). Client ids
-- belong to one server run, so a janitor trusts them only on the server
-- the entry names; and a janitor that saw every connection of the entry
-- gone deletes the key only while it still holds that id
-- (drop_heartbeat.lua), so a beat sent from a new connection meanwhile
-- keeps the process alive. Any other entry (or where INFO is refused) is
-- stored as given, and the key holds "1" (readers only test whether it
-- exists).
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
local entry = ARGV[3]
local beat_value = '1'
local start, stop = json_field_span(entry, 'beat_client')
if start ~= nil then
  local id = string.sub(entry, start, stop)
  -- At most 15 digits: every such id is exact in a Lua number and in JSON.
  if string.find(id, '^[1-9]%d*$') and #id <= 15 then
    -- pcall: where INFO is refused (an ACL, a renamed command) the beat
    -- still goes through, without the run_id, as an entry without one.
    local info = redis.pcall('INFO', 'server')
    local run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)')
    if run_id then
      beat_value = id
      entry = json_set_field(entry, 'run_id', '"' .. run_id .. '"')
    end
  end
end
local existed = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], beat_value, 'PX', ARGV[2])
redis.call('HSET', KEYS[2], identity, entry)
redis.call('SADD', KEYS[3], identity)
redis.call('HSET', KEYS[4], 'info', ARGV[4], 'busy', ARGV[5], 'beat', ARGV[6],
           'quiet', ARGV[7], 'rss', ARGV[8], 'rtt_us', ARGV[9])
redis.call('EXPIRE', KEYS[4], '60')
-- Each work hash takes the pairs, then loses the fields that are not among
-- them: one with pairs is never emptied on the way (a script does not name
-- a key again once it may have emptied it: lib/payload.lua).
local running = {}
for j = 10, #ARGV, 2 do running[ARGV[j]] = true end
for k = 5, 6 do
  if #ARGV == 9 then
    redis.call('DEL', KEYS[k])
  else
    redis.call('HSET', KEYS[k], unpack(ARGV, 10, #ARGV))
    local finished = {}
    for _, field in ipairs(redis.call('HKEYS', KEYS[k])) do
      if not running[field] then finished[#finished + 1] = field end
    end
    if #finished > 0 then redis.call('HDEL', KEYS[k], unpack(finished)) end
    redis.call('EXPIRE', KEYS[k], '60')
  end
end
local signal = redis.call('RPOP', KEYS[7])
return {existed, signal}
