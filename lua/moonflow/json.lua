-- json.lua — a small, strict JSON reader and writer for checkpoint headers
-- (safetensors) and graph files.
--
-- Encoding: Lua tables with a non-empty array part are arrays, other tables
-- are objects with their keys sorted (so output is deterministic);
-- `json.array(t)` marks a table as an array even when empty; `json.null`
-- stands for null. Numbers that are integers up to 2^53 print exactly as
-- integers, others with 17 significant digits; inf and nan cannot be encoded.
-- Decoding: objects become plain Lua tables, arrays 1-based Lua lists marked
-- as json.array (so an empty one stays an array), null becomes json.null. Errors raise "JSON: <what> at byte <n>".
local fail = require("moonflow.core").fail

local M = {}

M.null = setmetatable({}, {__tostring = function() return "null" end})
local array_mt = {__name = "json.array"}
function M.array(t) return setmetatable(t or {}, array_mt) end
function M.is_array(t) return getmetatable(t) == array_mt end

local escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
                 ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t'}
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function number(v)
  if v ~= v or v == math.huge or v == -math.huge then
    fail("JSON: cannot encode " .. tostring(v))
  end
  if v == math.floor(v) and math.abs(v) <= 2 ^ 53 then return string.format("%.0f", v) end
  return string.format("%.17g", v)
end

local encode_into
local indent_depth = math.huge
local function encode_table(t, out, indent, depth)
  if indent and depth >= indent_depth then indent = nil end
  local nl = indent and "\n" .. string.rep(indent, depth + 1) or ""
  local close = indent and "\n" .. string.rep(indent, depth) or ""
  if getmetatable(t) == array_mt or t[1] ~= nil then
    if #t == 0 then out[#out + 1] = "[]"; return end
    out[#out + 1] = "["
    for i = 1, #t do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = nl
      encode_into(t[i], out, indent, depth + 1)
    end
    out[#out + 1] = close .. "]"
    return
  end
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= "string" then fail("JSON: object keys must be strings, got " .. type(k)) end
    keys[#keys + 1] = k
  end
  if #keys == 0 then out[#out + 1] = "{}"; return end
  table.sort(keys)
  out[#out + 1] = "{"
  for i, k in ipairs(keys) do
    if i > 1 then out[#out + 1] = "," end
    out[#out + 1] = nl .. quote(k) .. (indent and ": " or ":")
    encode_into(t[k], out, indent, depth + 1)
  end
  out[#out + 1] = close .. "}"
end

function encode_into(v, out, indent, depth)
  local tv = type(v)
  if v == M.null or v == nil then out[#out + 1] = "null"
  elseif tv == "boolean" then out[#out + 1] = v and "true" or "false"
  elseif tv == "number" then out[#out + 1] = number(v)
  elseif tv == "string" then out[#out + 1] = quote(v)
  elseif tv == "table" then encode_table(v, out, indent, depth)
  else fail("JSON: cannot encode a " .. tv) end
end

-- json.encode(value, indent, depth): indent (e.g. " ") pretty-prints, one
-- item a line, down to nesting `depth` (default all); deeper values are compact.
function M.encode(v, indent, depth)
  local out = {}
  indent_depth = depth or math.huge
  local ok, err = pcall(encode_into, v, out, indent, 0)
  indent_depth = math.huge
  if not ok then error(err, 0) end
  return table.concat(out)
end

-- Decoding -------------------------------------------------------------------------
local function bad(what, pos) fail(string.format("JSON: %s at byte %d", what, pos)) end

-- Bytes compared as numbers: a graph file of 100k ops is 15 MB of JSON, and
-- one-character strings (s:sub(pos, pos)) cost a string each.
local byte = string.byte
local SPACE, TAB, CR, LF = 32, 9, 13, 10
local QUOTE, COLON, COMMA = 34, 58, 44
local LBRACE, RBRACE, LBRACKET, RBRACKET = 123, 125, 91, 93

local function skip(s, pos)
  local b = byte(s, pos)
  if b ~= SPACE and b ~= TAB and b ~= CR and b ~= LF then return b and pos or #s + 1 end
  return s:find("[^ \t\r\n]", pos) or #s + 1
end

local decode_value
local unescapes = {['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t'}

local function utf8(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
                     0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

local function decode_string(s, pos)
  local j = s:find('["\\%c]', pos + 1)
  if j and byte(s, j) == QUOTE then return s:sub(pos + 1, j - 1), j + 1 end  -- no escapes
  local parts, i = {}, pos + 1
  while true do
    local j = s:find('["\\%c]', i)
    if not j then bad("unterminated string", pos) end
    parts[#parts + 1] = s:sub(i, j - 1)
    local c = s:sub(j, j)
    if c == '"' then return table.concat(parts), j + 1 end
    if c ~= "\\" then bad("control character in string", j) end
    local e = s:sub(j + 1, j + 1)
    if e == "u" then
      local hex = s:sub(j + 2, j + 5)
      if not hex:match("^%x%x%x%x$") then bad("bad \\u escape", j) end
      local cp = tonumber(hex, 16)
      i = j + 6
      if cp >= 0xD800 and cp <= 0xDBFF and s:sub(i, i + 1) == "\\u" then
        local lo = tonumber(s:sub(i + 2, i + 5), 16)
        if lo and lo >= 0xDC00 and lo <= 0xDFFF then
          cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00)
          i = i + 6
        end
      end
      parts[#parts + 1] = utf8(cp)
    elseif unescapes[e] then
      parts[#parts + 1] = unescapes[e]
      i = j + 2
    else
      bad("bad escape", j)
    end
  end
end

function decode_value(s, pos, depth)
  if depth > 200 then bad("nesting too deep", pos) end
  pos = skip(s, pos)
  local c = byte(s, pos)
  if c == LBRACE then
    local obj = {}
    pos = skip(s, pos + 1)
    if byte(s, pos) == RBRACE then return obj, pos + 1 end
    while true do
      if byte(s, pos) ~= QUOTE then bad("expected a string key", pos) end
      local k
      k, pos = decode_string(s, pos)
      pos = skip(s, pos)
      if byte(s, pos) ~= COLON then bad("expected ':'", pos) end
      obj[k], pos = decode_value(s, pos + 1, depth + 1)
      pos = skip(s, pos)
      local d = byte(s, pos)
      if d == RBRACE then return obj, pos + 1 end
      if d ~= COMMA then bad("expected ',' or '}'", pos) end
      pos = skip(s, pos + 1)
    end
  elseif c == LBRACKET then
    local arr = M.array({})
    pos = skip(s, pos + 1)
    if byte(s, pos) == RBRACKET then return arr, pos + 1 end
    local n = 0
    while true do
      n = n + 1
      arr[n], pos = decode_value(s, pos, depth + 1)
      pos = skip(s, pos)
      local d = byte(s, pos)
      if d == RBRACKET then return arr, pos + 1 end
      if d ~= COMMA then bad("expected ',' or ']'", pos) end
      pos = pos + 1
    end
  elseif c == QUOTE then
    return decode_string(s, pos)
  elseif s:find("^true", pos) then return true, pos + 4
  elseif s:find("^false", pos) then return false, pos + 5
  elseif s:find("^null", pos) then return M.null, pos + 4
  end
  local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
  local v = num and tonumber(num)
  if not v then bad(pos > #s and "unexpected end" or "unexpected character", pos) end
  return v, pos + #num
end

-- json.decode(s): the value of a whole JSON text (trailing garbage is an error).
function M.decode(s)
  if type(s) ~= "string" then fail("JSON: expected a string, got " .. type(s)) end
  local v, pos = decode_value(s, 1, 0)
  pos = skip(s, pos)
  if pos <= #s then bad("trailing characters", pos) end
  return v
end

return M
