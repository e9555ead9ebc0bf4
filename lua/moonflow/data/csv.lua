-- data/csv.lua — the CSV reader, a dataset source:
-- tf.data.experimental.CsvDataset(path | {paths}, dtypes, {header=, field_delim=,
-- select_cols=}): one element per record, a list of scalars (one per selected
-- column) of the given dtypes (float32, float64, int32, int64, uint8, bool).
-- Records are parsed as TensorFlow does with use_quote_delim: a field that
-- starts with a double quote ends at the matching quote ("" inside stands for
-- one quote) and may hold the delimiter and newlines. A UTF-8 byte order mark
-- at the start of a file is skipped. Every value is checked against its
-- dtype's range: out of range is an error naming the file, line and column,
-- never a wrapped value. int64 fields are parsed exactly (digits into an
-- int64_t); one beyond 2^53 is handed on as an int64 tf.Array scalar, which
-- a Lua number could not hold.
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local args = require("moonflow.args")
local new_dataset = require("moonflow.data.dataset").new
local fail = core.fail

local CSV_OPTIONS = {"header", "field_delim", "select_cols", positional = 0, empty = true}

local M = {}

local INT_RANGE = {
  int32 = {-2147483648, 2147483647},
  uint8 = {0, 255},
}
local FLOAT32_OVERFLOW = 3.4028235677973366e38  -- 2^128 - 2^103: rounds to inf as a float
local INT64_MAX_U = 9223372036854775807ULL
local EXACT = 2 ^ 53

-- The digit string's value as an int64, exactly, or nil when out of range.
local function parse_int64(digits, negative)
  local limit = negative and INT64_MAX_U + 1 or INT64_MAX_U
  local acc = 0ULL
  for i = 1, #digits do
    local d = digits:byte(i) - 48
    if acc > (limit - d) / 10 then return nil end
    acc = acc * 10 + d
  end
  if acc <= EXACT then return negative and -tonumber(acc) or tonumber(acc) end
  local a = Array.new(core.dtypes.int64, {})
  a._data[0] = ffi.cast("int64_t", negative and 0ULL - acc or acc)
  return a
end

function M.CsvDataset(paths, dtypes, ...)
  local what = "CsvDataset"
  if type(paths) == "string" then paths = {paths} end
  if type(paths) ~= "table" or #paths == 0 then fail(what .. ": expected a file name or a list of them") end
  if type(dtypes) ~= "table" or #dtypes == 0 then
    fail(what .. ": dtypes must be a list with one dtype per column, e.g. {tf.float32, tf.int32}")
  end
  local opts = args.options("CsvDataset", CSV_OPTIONS, ...)
  local delim = opts.field_delim or ","
  if type(delim) ~= "string" or #delim ~= 1 then fail(what .. ": field_delim must be one character") end
  if delim == '"' or delim == "\n" or delim == "\r" then
    fail(what .. ": field_delim cannot be a double quote or a line break")
  end
  local cols = opts.select_cols
  local spec, template = {}, {}
  for i, d in ipairs(dtypes) do
    d = core.as_dtype(d, what)
    spec[i] = {dtype = d, shape = {}}
    template[i] = i
  end
  if cols and #cols ~= #dtypes then
    fail(what .. ": select_cols names " .. #cols .. " columns but dtypes has " .. #dtypes)
  end
  for _, p in ipairs(paths) do
    local f = io.open(p, "rb")
    if not f then fail(what .. ": cannot open '" .. tostring(p) .. "': no such file or not readable") end
    f:close()
  end
  -- Leading blanks before an opening quote are skipped unless they are the delimiter.
  local quote_at = (delim == " " or delim == "\t") and '^"' or '^[ \t]*"'

  -- Field `s` (quoted: whether it was in quotes) of record `rec`, at the given
  -- line and 0-based column, as a value of dtype d.
  local function parse(field, d, path, line, col, rec)
    local s = field.quoted and field.text or field.text:match("^%s*(.-)%s*$")
    local function bad(why)
      fail(string.format("%s: %s line %d, column %d: %s", what, path, line, col, why))
    end
    local function invalid(extra)
      bad(string.format("Field %d in record %d is not a valid %s: %s%s", col, rec, d.name, s, extra or ""))
    end
    if s == "" then bad("the field is empty") end
    if d.name == "bool" then
      local l = s:lower()
      if l == "true" or l == "1" then return true end
      if l == "false" or l == "0" then return false end
      bad("'" .. s .. "' is not a bool (true, false, 1 or 0)")
    end
    if d.is_integer then
      local sign, digits = s:match("^([+-]?)(%d+)$")
      if not digits then
        if tonumber(s) == nil then bad("'" .. s .. "' is not a number") end
        bad("'" .. s .. "' is not an integer (dtype " .. d.name .. ")")
      end
      local negative = sign == "-"
      if d.name == "int64" then
        local v = parse_int64(digits, negative)
        if v == nil then invalid(" (out of range)") end
        return v
      end
      digits = digits:match("^0*(%d-%d)$")  -- no leading zeros, so the length bounds the value
      local range = INT_RANGE[d.name]
      local v = #digits <= 15 and tonumber(digits) * (negative and -1 or 1) or nil
      if v == nil or v < range[1] or v > range[2] then
        invalid(string.format(" (out of range [%d, %d])", range[1], range[2]))
      end
      return v
    end
    local sign, word = s:lower():match("^%s*([+-]?)(%a+)%s*$")
    if word == "inf" or word == "infinity" then return sign == "-" and -math.huge or math.huge end
    if word == "nan" then return 0 / 0 end
    local v = tonumber(s)
    if v == nil then bad("'" .. s .. "' is not a number") end
    if s:find("^%s*[+-]?0[xX]") then bad("'" .. s .. "' is not a decimal number") end
    if math.abs(v) == math.huge or (d.name == "float32" and math.abs(v) >= FLOAT32_OVERFLOW) then
      invalid(" (out of range)")
    end
    return v
  end

  -- Splits the record starting with `line` into fields ({text=, quoted=});
  -- more() gives the next line when a quoted field runs past the line's end.
  local function split(line, more, where)
    local fields, pos, n = {}, 1, #line
    while true do
      local _, q = line:find(quote_at, pos)
      if q then
        local parts, i = {}, q + 1
        while true do
          local close = line:find('"', i, true)
          if close == nil then
            parts[#parts + 1] = line:sub(i)
            local nxt = more()
            if nxt == nil then
              fail(what .. ": " .. where() .. ": a quoted field is not closed before the end of the file")
            end
            parts[#parts + 1] = "\n"
            line, i, n = nxt, 1, #nxt
          elseif line:byte(close + 1) == 34 then  -- "" is one quote
            parts[#parts + 1] = line:sub(i, close)
            i = close + 2
          else
            parts[#parts + 1] = line:sub(i, close - 1)
            pos = close + 1
            break
          end
        end
        fields[#fields + 1] = {text = table.concat(parts), quoted = true}
        local after = line:find("[^ \t]", pos) or n + 1
        if delim ~= " " and delim ~= "\t" then pos = after end
        if pos > n then return fields end
        if line:sub(pos, pos) ~= delim then
          fail(what .. ": " .. where() .. ": a quoted field must be followed by the delimiter or the end of " ..
               "the record, found '" .. line:sub(pos, pos) .. "'")
        end
        pos = pos + 1
      else
        local e = line:find(delim, pos, true)
        fields[#fields + 1] = {text = line:sub(pos, (e or n + 1) - 1)}
        if e == nil then return fields end
        pos = e + 1
      end
    end
  end

  local ncol = #dtypes
  return new_dataset("CsvDataset", template, spec, function(ctx)
    local fi, f, path, lineno, record = 0, nil, nil, 0, 0
    local function close()
      if f then f:close(); f = nil end
    end
    -- The end of a file, or a re-initialization mid-epoch, closes it (ctx.readers
    -- holds close weakly; the iterator below keeps it alive).
    if ctx and ctx.readers then ctx.readers[close] = true end
    local function next_line()
      local line = f:read("*l")
      if line == nil then return nil end
      lineno = lineno + 1
      if lineno == 1 and line:sub(1, 3) == "\239\187\191" then line = line:sub(4) end
      return (line:gsub("\r$", ""))
    end
    local function where() return path .. " line " .. lineno end
    return function()
      while true do
        if f == nil then
          fi = fi + 1
          path = paths[fi]
          if path == nil then return nil end
          local err
          f, err = io.open(path, "rb")
          if not f then fail(what .. ": cannot open '" .. path .. "': " .. tostring(err)) end
          lineno, record = 0, 0
          if opts.header then
            local h = next_line()
            if h then split(h, next_line, where) end
          end
        end
        local line = next_line()
        if line == nil then
          close()
        elseif line:match("%S") then
          local first = lineno
          local fields = split(line, next_line, where)
          record = record + 1
          local elem = {}
          if cols then
            for i, c in ipairs(cols) do
              local s = fields[c + 1]
              if s == nil then
                fail(string.format("%s: %s line %d has %d fields; select_cols asks for column %d",
                                   what, path, first, #fields, c))
              end
              elem[i] = parse(s, spec[i].dtype, path, first, c, record)
            end
          else
            if #fields ~= ncol then
              fail(string.format("%s: %s line %d has %d fields, expected %d (one per dtype)",
                                 what, path, first, #fields, ncol))
            end
            for i = 1, ncol do elem[i] = parse(fields[i], spec[i].dtype, path, first, i - 1, record) end
          end
          return elem
        end
      end
    end
  end)
end

return M
