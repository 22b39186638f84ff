-- lib/args.lua: begin
--
-- Argument and key-type checks, apart from lib/payload.lua (which includes
-- this file) so that the script on every job's path, fetch.lua, includes
-- only these: defining the whole payload library costs Redis several
-- microseconds on every call, as much as fetching a few jobs.
--
-- Valid under Lua 5.1 (Redis) and Lua 5.4 (the unit test).

-- n as a decimal integer string (Lua 5.4 would print 3.0 for a float 3).
local function int_string(n)
  return string.format('%d', n)
end

-- The integer in `text` (an optional minus sign and digits only), or nil
-- when it is not one or is below `min`.
local function parse_int(text, min)
  if type(text) ~= 'string' or not string.find(text, '^%-?%d+$') then return nil end
  local n = tonumber(text)
  if min ~= nil and n < min then return nil end
  return n
end

-- Redis keeps the writes a script made before one of its calls failed, so
-- a move whose second step hits a key of the wrong type (a WRONGTYPE after
-- the first step removed the job) would lose the job. Each script therefore
-- calls this before its first write, for every key it may write. Returns
-- nil when each of KEYS[first..last] is a `want` ('list', 'zset', 'set',
-- 'string') or does not exist, else the error reply to return.
local function check_types(script, want, first, last)
  for i = first, last do
    local t = redis.call('TYPE', KEYS[i])
    -- A status reply reaches Lua as {ok = 'list'}.
    if type(t) == 'table' then t = t.ok end
    if t ~= want and t ~= 'none' then
      return redis.error_reply('WRONGTYPE ' .. script .. ': key ' .. KEYS[i] .. ' holds a ' ..
                               tostring(t) .. ', not a ' .. want .. '; nothing was written')
    end
  end
  return nil
end

-- lib/args.lua: end
