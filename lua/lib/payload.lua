-- lib/payload.lua: begin
--
-- Helpers shared by the scripts, each of which inlines this file with an
-- include line after its header (see tools/embed_lua.py).
-- Every name here is a local of the including script.
--
-- Job payloads are edited as text, never decoded and re-encoded: Redis's
-- cjson prints numbers with 14 significant digits and loses the order of
-- keys, and acks match payloads byte for byte (I5). Only
-- the value of the one top-level field being set changes; every other byte
-- of the payload stays as it was.
--
-- Valid under Lua 5.1 (Redis) and Lua 5.4 (the unit test): integers are
-- printed with string.format('%d', n), never with tostring.

-- Index of the first byte at or after i that is not JSON whitespace.
local function json_skip_ws(s, i)
  if i > #s then return i end
  local _, e = string.find(s, '^[ \t\r\n]*', i)
  return e + 1
end

-- Index just past the JSON string literal that opens at i, or nil when it
-- never closes.
local function json_skip_string(s, i)
  local j = i + 1
  while true do
    local k = string.find(s, '["\\]', j)
    if k == nil then return nil end
    if string.byte(s, k) == 34 then return k + 1 end
    -- A backslash: the next byte is escaped, whatever it is.
    j = k + 2
  end
end

-- Index just past the JSON value that starts at i, or nil when there is no
-- value there. Nested objects and arrays are skipped by counting brackets
-- outside of strings; numbers and literals by their characters.
local function json_skip_value(s, i)
  local c = string.sub(s, i, i)
  if c == '"' then return json_skip_string(s, i) end
  if c == '{' or c == '[' then
    local depth = 0
    local j = i
    while true do
      local k = string.find(s, '[][{}"]', j)
      if k == nil then return nil end
      local d = string.sub(s, k, k)
      if d == '"' then
        j = json_skip_string(s, k)
        if j == nil then return nil end
      else
        if d == '{' or d == '[' then depth = depth + 1 else depth = depth - 1 end
        j = k + 1
        if depth == 0 then return j end
      end
    end
  end
  local _, e = string.find(s, '^[%w%.%+%-]+', i)
  if e == nil then return nil end
  return e + 1
end

-- Walks the members of the top-level object in s. Returns the index of its
-- closing brace, its number of members, and the first and last index of the
-- raw value of the LAST member named `key` (JSON parsers keep the last of
-- duplicate keys), or nil for those two when there is none. Returns nil
-- when s is not one JSON object (with optional surrounding whitespace).
-- Keys are compared as raw text between the quotes.
local function json_scan(s, key)
  local i = json_skip_ws(s, 1)
  if string.sub(s, i, i) ~= '{' then return nil end
  i = json_skip_ws(s, i + 1)
  local members = 0
  local start, stop
  if string.sub(s, i, i) ~= '}' then
    while true do
      if string.sub(s, i, i) ~= '"' then return nil end
      local key_end = json_skip_string(s, i)
      if key_end == nil then return nil end
      local name = string.sub(s, i + 1, key_end - 2)
      i = json_skip_ws(s, key_end)
      if string.sub(s, i, i) ~= ':' then return nil end
      i = json_skip_ws(s, i + 1)
      local value_end = json_skip_value(s, i)
      if value_end == nil then return nil end
      members = members + 1
      if name == key then
        start, stop = i, value_end - 1
      end
      i = json_skip_ws(s, value_end)
      local c = string.sub(s, i, i)
      if c == '}' then break end
      if c ~= ',' then return nil end
      i = json_skip_ws(s, i + 1)
    end
  end
  if json_skip_ws(s, i + 1) <= #s then return nil end
  return i, members, start, stop
end

-- First and last index of the raw value text of top-level `key`, or nil.
local function json_field_span(json, key)
  local close, _, start, stop = json_scan(json, key)
  if close == nil or start == nil then return nil end
  return start, stop
end

-- json with top-level `key` set to the raw JSON text raw_value: replaced in
-- place when present, otherwise `"key":raw_value` inserted before the
-- closing brace. Returns nil when json is not a JSON object.
local function json_set_field(json, key, raw_value)
  local close, members, start, stop = json_scan(json, key)
  if close == nil then return nil end
  if start ~= nil then
    return string.sub(json, 1, start - 1) .. raw_value .. string.sub(json, stop + 1)
  end
  local sep = ','
  if members == 0 then sep = '' end
  return string.sub(json, 1, close - 1) .. sep .. '"' .. key .. '":' .. raw_value ..
      string.sub(json, close)
end

-- The value of top-level `key` when it is a JSON number, else nil.
local function json_get_number(json, key)
  local start, stop = json_field_span(json, key)
  if start == nil then return nil end
  local raw = string.sub(json, start, stop)
  if not string.find(raw, '^%-?%d+%.?%d*[eE]?[%+%-]?%d*$') then return nil end
  return tonumber(raw)
end

local json_escapes = {
  ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
}

-- A JSON string literal holding the bytes of s (UTF-8 is kept as raw bytes,
-- as Ruby's JSON.generate writes it).
local function json_string(s)
  local escaped = string.gsub(s, '[%c"\\]', function(c)
    local e = json_escapes[c]
    if e ~= nil then return e end
    local b = string.byte(c)
    if b < 32 then return string.format('\\u%04x', b) end
    return c
  end)
  return '"' .. escaped .. '"'
end

-- int_string, parse_int and check_types.
-- @include lib/args.lua

-- is_float_seconds and dead_add.
-- @include lib/dead.lua

-- Removes members of the ZSET `key` one at a time, as ZREM would, and
-- never names the key again once it is empty (see above): returns a
-- function of a member that returns true when it removed it.
local function zset_remover(key)
  local left = redis.call('ZCARD', key)
  return function(member)
    if left == 0 or redis.call('ZREM', key, member) == 0 then return false end
    left = left - 1
    return true
  end
end

-- Counts one interruption of the job in payload. Returns the new payload
-- and whether the job goes to the dead set (more than max_interruptions
-- interruptions; a negative max_interruptions means no limit). A job going
-- dead also gets error_class, error_message and, when it has none,
-- failed_at = now. A payload that is not a JSON object cannot carry the
-- counter: it is returned unchanged and goes dead unless there is no limit,
-- as Sidekiq sends a payload it cannot parse to the dead set.
local function interrupt(payload, max_interruptions, now)
  local max = tonumber(max_interruptions)
  if json_scan(payload, 'interrupted_count') == nil then
    return payload, max >= 0
  end
  local count = json_get_number(payload, 'interrupted_count') or 0
  -- Keep the counter printable with %d whatever a foreign writer put there.
  if not (count >= 0) then count = 0 elseif count > 1e9 then count = 1e9 end
  local n = math.floor(count) + 1
  local out = json_set_field(payload, 'interrupted_count', int_string(n))
  local goes_dead = max >= 0 and n > max
  if goes_dead then
    out = json_set_field(out, 'error_class', json_string('Reliableq::Interrupted'))
    out = json_set_field(out, 'error_message', json_string(string.format(
        'interrupted %d times: its worker process stopped while running it ' ..
        '(max_interruptions %d)', n, max)))
    if json_get_number(out, 'failed_at') == nil then
      out = json_set_field(out, 'failed_at', now)
    end
  end
  return out, goes_dead
end

-- Writes what a hand-back decided: each payload of `back` to the RIGHT end
-- of queue_key, in order, then `dead` into dead_key. The caller has
-- checked both keys' types.
local function give_back(queue_key, back, dead_key, dead, now, dead_max, dead_timeout)
  for _, payload in ipairs(back) do
    redis.call('RPUSH', queue_key, payload)
  end
  dead_add(dead_key, now, dead, dead_max, dead_timeout)
end

-- lib/payload.lua: end
