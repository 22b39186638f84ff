-- lib/dead.lua: begin
--
-- The dead set's insert, and the check of the timestamps scripts take, for
-- the scripts that send jobs to dead (through lib/payload.lua, or alone:
-- finish.lua, whose common call, a unique job's ack, must not pay for the
-- payload helpers). Needs lib/args.lua (int_string) included before it.

-- True when `text` is a timestamp in float seconds with a fractional part,
-- the only form written into payloads ("1700000000.123456").
local function is_float_seconds(text)
  return type(text) == 'string' and string.find(text, '^%d+%.%d+$') ~= nil
end

-- A Redis Cluster checks every command a script sends while the script's
-- slot migrates: a key that is not on this node counts as moved to the
-- other one, and the command fails, after the script's earlier writes were
-- made. A key the script emptied (Redis deletes an empty list, set or hash)
-- is such a key. So no script names a key again once one of its commands
-- may have emptied it: the last command on a key is the one that may empty
-- it, or the script counted what stays first (reliableq-schema(7),
-- "Scripts while a slot migrates").

-- Sidekiq's dead-set insert of each payload in the list `payloads`, all
-- scored `now`: add, then trim by age and by count (the rank trim leaves at
-- most max_jobs - 1 members, as Sidekiq's does). One call for all of them,
-- its last command the one that may empty the set (see above).
local function dead_add(dead_key, now, payloads, max_jobs, timeout_seconds)
  if #payloads == 0 then return end
  local size = redis.call('ZCARD', dead_key)
  for first = 1, #payloads, 500 do
    local members = {}
    for i = first, math.min(first + 499, #payloads) do
      members[#members + 1] = now
      members[#members + 1] = payloads[i]
    end
    size = size + redis.call('ZADD', dead_key, unpack(members))
  end
  local cutoff = tonumber(now) - tonumber(timeout_seconds)
  size = size - redis.call('ZREMRANGEBYSCORE', dead_key, '-inf', string.format('%.6f', cutoff))
  if size >= tonumber(max_jobs) then
    redis.call('ZREMRANGEBYRANK', dead_key, '0', '-' .. int_string(tonumber(max_jobs)))
  end
end

-- lib/dead.lua: end
