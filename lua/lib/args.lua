-- lib/args.lua: begin
--
-- Argument helpers, apart from lib/payload.lua (which includes this file)
-- so that the script on every job's path, fetch.lua, includes only these:
-- defining the whole payload library costs Redis several microseconds on
-- every call, as much as fetching a few jobs.
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

-- lib/args.lua: end
