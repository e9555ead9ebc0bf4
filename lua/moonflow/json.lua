-- json.lua — JSON for the Lua API (HParams.to_json / parse_json).
--
-- Reading goes through the engine (src/io/json.c, Jansson: issue 15, no
-- hand-written parser), which reports errors as "line L column C (char P):
-- what"; decode walks the document it returns. Objects become plain Lua
-- tables, arrays 1-based lists marked as json.array (so an empty one stays an
-- array), null becomes json.null.
--
-- Writing: tables with a non-empty array part (or marked json.array) are
-- arrays, other tables objects with their keys sorted (deterministic output).
-- A number is written with the fewest significant digits that read back as
-- the same double (0.1, not 0.10000000000000001); inf and nan cannot be written.
local ffi = require("ffi")
local core = require("moonflow.core")

local C, fail = core.C, core.fail

local M = {}

M.null = setmetatable({}, {__tostring = function() return "null" end})
local array_mt = {__name = "json.array"}
function M.array(t) return setmetatable(t or {}, array_mt) end
function M.is_array(t) return getmetatable(t) == array_mt end

-- Reading ------------------------------------------------------------------------

local size_out = ffi.new("size_t[1]")

local function value_of(v)
  local t = tonumber(C.mf_json_type_of(v))
  if t == C.MF_JSON_OBJECT then
    local out = {}
    for i = 0, tonumber(C.mf_json_length(v)) - 1 do
      local key = C.mf_json_key(v, i, size_out)
      out[ffi.string(key, size_out[0])] = value_of(C.mf_json_item(v, i))
    end
    return out
  elseif t == C.MF_JSON_ARRAY then
    local out = M.array()
    for i = 0, tonumber(C.mf_json_length(v)) - 1 do out[i + 1] = value_of(C.mf_json_item(v, i)) end
    return out
  elseif t == C.MF_JSON_STRING then
    local s = C.mf_json_string(v, size_out)
    return ffi.string(s, size_out[0])
  elseif t == C.MF_JSON_INTEGER or t == C.MF_JSON_REAL then
    return tonumber(C.mf_json_number(v))
  elseif t == C.MF_JSON_TRUE then return true
  elseif t == C.MF_JSON_FALSE then return false
  end
  return M.null
end

-- json.decode(text): the value, or nil and the engine's message ("line 1
-- column 9 (char 8): ...") when text is not JSON.
function M.decode(text)
  local doc = C.mf_json_parse(text, #text, core.status)
  if doc == nil then return nil, ffi.string(C.mf_status_message(core.status)) end
  doc = ffi.gc(doc, C.mf_json_free)
  local value = value_of(C.mf_json_root(doc))
  C.mf_json_free(ffi.gc(doc, nil))
  return value
end

-- Writing ------------------------------------------------------------------------

local escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
                 ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t'}
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

-- Whole numbers up to 2^53 as integers, others in the fewest significant
-- digits that read back as the same double (17 always do).
local function number(v, fname)
  if v ~= v or v == math.huge or v == -math.huge then fail(fname .. ": JSON cannot hold the number " .. tostring(v)) end
  if v == math.floor(v) and math.abs(v) <= 2 ^ 53 then return string.format("%.0f", v) end
  for digits = 1, 16 do
    local s = string.format("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
  return string.format("%.17g", v)
end

local encode_into
local function encode_table(t, out, fname)
  if getmetatable(t) == array_mt or t[1] ~= nil then
    out[#out + 1] = "["
    for i = 1, #t do
      if i > 1 then out[#out + 1] = "," end
      encode_into(t[i], out, fname)
    end
    out[#out + 1] = "]"
    return
  end
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= "string" then fail(fname .. ": JSON object keys must be strings, got a " .. type(k)) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  out[#out + 1] = "{"
  for i, k in ipairs(keys) do
    if i > 1 then out[#out + 1] = "," end
    out[#out + 1] = quote(k) .. ":"
    encode_into(t[k], out, fname)
  end
  out[#out + 1] = "}"
end

function encode_into(v, out, fname)
  local tv = type(v)
  if v == M.null then out[#out + 1] = "null"
  elseif tv == "boolean" then out[#out + 1] = v and "true" or "false"
  elseif tv == "number" then out[#out + 1] = number(v, fname)
  elseif tv == "string" then out[#out + 1] = quote(v)
  elseif tv == "table" then encode_table(v, out, fname)
  else fail(fname .. ": JSON cannot hold a " .. tv) end
end

-- json.encode(value, fname): compact JSON text; fname names the caller in errors.
function M.encode(v, fname)
  local out = {}
  encode_into(v, out, fname or "json.encode")
  return table.concat(out)
end

return M
