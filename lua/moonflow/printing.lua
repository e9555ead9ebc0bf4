-- printing.lua — values shown the way NumPy and TensorFlow show them.
--   M.array_string(a)  NumPy's array2string(a, separator=", "): an aligned grid,
--                      one row per line, "..." past 1000 elements (tostring(a))
--   M.array_repr(a)    NumPy 2's repr, with the shape and dtype always given:
--                      tf.Array([[1., 2.],
--                                [3., 4.]], shape=(2, 2), dtype=float32)
--   M.repr(x)          what the REPL shows for any value: a type's __repr
--                      (arrays, tensors, shapes), strings quoted, Lua tables
--                      as constructors, anything else by tostring
-- Floats follow NumPy's default options (precision 8, floatmode "maxprec"):
-- the shortest digits that give the value back in its own dtype, at most 8
-- after the point, aligned on the point; scientific notation when a nonzero
-- magnitude is below 1e-4 or at least 1e8, or the largest is over 1000 times
-- the smallest. Lines wrap at 75 columns.
local ffi = require("ffi")

local M = {}

local LINE_WIDTH = 75
local THRESHOLD = 1000  -- more elements than this are summarized
local EDGE_ITEMS = 3
local PRECISION = 8

-- Floats --------------------------------------------------------------------------
local float32_box = ffi.new("float[1]")
local function same_in_dtype(text, v, is_float32)
  local back = tonumber(text)
  if is_float32 then
    float32_box[0] = back
    back = float32_box[0]
  end
  return back == v
end

-- The shortest decimal digits of finite v that read back as v in its dtype:
-- "d1d2…" (no trailing zeros) and the exponent e of d1.d2… × 10^e; v >= 0.
local function shortest_digits(v, is_float32)
  if v == 0 then return "0", 0 end
  for p = 0, is_float32 and 8 or 16 do
    local text = string.format("%." .. p .. "e", v)
    if p == (is_float32 and 8 or 16) or same_in_dtype(text, v, is_float32) then
      local lead, rest, exp = text:match("^(%d)%.?(%d*)e([-+]%d+)$")
      local digits = (lead .. rest):gsub("0+$", "")
      return digits == "" and "0" or digits, tonumber(exp)
    end
  end
end

-- v (finite, >= 0) in positional notation with at most PRECISION digits
-- after the point, rounded there: the integer and fraction parts.
local function positional_parts(v, is_float32)
  local digits, e = shortest_digits(v, is_float32)
  if #digits - 1 - e > PRECISION then
    local int, frac = string.format("%." .. PRECISION .. "f", v):match("^(%d+)%.(%d*)$")
    return int, (frac:gsub("0+$", ""))
  end
  if e < 0 then return "0", string.rep("0", -e - 1) .. digits end
  if #digits <= e + 1 then return digits .. string.rep("0", e + 1 - #digits), "" end
  return digits:sub(1, e + 1), digits:sub(e + 2)
end

-- v (finite, >= 0) in scientific notation with at most PRECISION digits after
-- the point: the leading digit, the fraction digits and the exponent.
local function scientific_parts(v, is_float32)
  local digits, e = shortest_digits(v, is_float32)
  if #digits - 1 > PRECISION then
    local lead, rest, exp = string.format("%." .. PRECISION .. "e", v):match("^(%d)%.(%d*)e([-+]%d+)$")
    return lead, (rest:gsub("0+$", "")), tonumber(exp)
  end
  return digits:sub(1, 1), digits:sub(2), e
end

local function is_finite(v) return v == v and v ~= math.huge and v ~= -math.huge end
local function is_negative(v) return v < 0 or (v == 0 and 1 / v < 0) end  -- -0 prints as -0.

-- NumPy's FloatingFormat: a formatter for the values of list `values`;
-- with `plus`, positive values get a "+" (sign='+', for imaginary parts).
local function float_formatter(values, is_float32, plus)
  local min_abs, max_abs
  local finite = {}
  for _, v in ipairs(values) do
    if is_finite(v) then
      finite[#finite + 1] = v
      local a = math.abs(v)
      if a ~= 0 then
        min_abs = math.min(min_abs or a, a)
        max_abs = math.max(max_abs or a, a)
      end
    end
  end
  local exp_format = max_abs ~= nil and (max_abs >= 1e8 or min_abs < 1e-4 or max_abs / min_abs > 1000)
  local pad_left, pad_right, precision, exp_size = 0, 0, 0, 0
  local function sign_width(v) return (plus or is_negative(v)) and 1 or 0 end
  if exp_format then
    for _, v in ipairs(finite) do
      local _, frac, e = scientific_parts(math.abs(v), is_float32)
      pad_left = math.max(pad_left, 1 + sign_width(v))
      precision = math.max(precision, #frac)
      exp_size = math.max(exp_size, #tostring(math.abs(e)), 2)
    end
    pad_right = exp_size + 2 + precision
  else
    for _, v in ipairs(finite) do
      local int, frac = positional_parts(math.abs(v), is_float32)
      pad_left = math.max(pad_left, #int + sign_width(v))
      pad_right = math.max(pad_right, #frac)
    end
  end
  if #finite < #values then  -- room for nan, inf, -inf
    local neg_inf = plus and 1 or 0
    for _, v in ipairs(values) do if v == -math.huge then neg_inf = 1 end end
    pad_left = math.max(pad_left, 3 - (pad_right + 1), 3 + neg_inf - (pad_right + 1))
  end
  local width = pad_left + pad_right + 1
  return function(v)
    if not is_finite(v) then
      local text = v ~= v and "nan" or (v < 0 and "-inf" or "inf")
      if plus and v == v and v > 0 or plus and v ~= v then text = "+" .. text end
      return string.rep(" ", width - #text) .. text
    end
    local sign = is_negative(v) and "-" or plus and "+" or ""
    if exp_format then
      local lead, frac, e = scientific_parts(math.abs(v), is_float32)
      if #frac < precision then  -- NumPy's min_digits: more of the value's own digits, rounded
        lead, frac, e = string.format("%." .. precision .. "e", math.abs(v)):match("^(%d)%.(%d*)e([-+]%d+)$")
        e = tonumber(e)
      end
      local int = sign .. lead
      local exp = tostring(math.abs(e))
      return string.rep(" ", pad_left - #int) .. int .. "." .. frac .. "e" .. (e < 0 and "-" or "+") .. string.rep("0", exp_size - #exp) .. exp
    end
    local int, frac = positional_parts(math.abs(v), is_float32)
    int = sign .. int
    return string.rep(" ", pad_left - #int) .. int .. "." .. frac .. string.rep(" ", pad_right - #frac)
  end
end

-- NumPy's ComplexFloatingFormat: the real parts formatted together, the
-- imaginary parts together with their signs, "j" after the imaginary digits
-- (before their padding): 1.+2.j, 3. -4.5j.
local function complex_formatter(values, is_float32)
  local reals, imags = {}, {}
  for i, v in ipairs(values) do reals[i], imags[i] = v.re, v.im end
  local real, imag = float_formatter(reals, is_float32), float_formatter(imags, is_float32, true)
  return function(v)
    local text = imag(v.im)
    local digits = text:match("^(.-)%s*$")
    return real(v.re) .. digits .. "j" .. text:sub(#digits + 1)
  end
end

-- NumPy's IntegerFormat and BoolFormat.
local function int_formatter(values)
  local width = 0
  for _, v in ipairs(values) do width = math.max(width, #string.format("%d", v)) end
  return function(v)
    local text = string.format("%d", v)
    return string.rep(" ", width - #text) .. text
  end
end

local function bool_formatter(rank)
  return function(v) return v and (rank > 0 and " True" or "True") or "False" end
end

-- A string element as a Lua literal: printable ASCII as it is, other bytes
-- escaped; unpadded, as NumPy leaves its bytes elements.
local ESCAPES = {['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r"}
local function quote_string(v)
  return '"' .. v:gsub('[%c"\\\128-\255]', function(c)
    return ESCAPES[c] or string.format("\\%03d", c:byte())
  end) .. '"'
end

-- Arrays -------------------------------------------------------------------------------
-- The element at flat offset i of array a as a Lua value (int64 ones stay
-- 64-bit cdata, which string.format's %d prints exactly).
local function element(a, i)
  if a.dtype.name == "string" then return a:string_at(i) end
  local v = a._data[i]
  if a.dtype.name == "bool" or a.dtype.name == "int64" or a.dtype.is_complex then return v end
  return tonumber(v)
end

-- The flat offsets of the elements shown: all of them, or with `summary`
-- the first and last EDGE_ITEMS along each dimension.
local function shown_values(a, summary)
  local dims, out = a._dims, {}
  local function walk(depth, offset, stride)
    if depth > #dims then out[#out + 1] = element(a, offset); return end
    local n = dims[depth]
    stride = stride / n
    for i = 0, n - 1 do
      if not summary or n <= 2 * EDGE_ITEMS or i < EDGE_ITEMS or i >= n - EDGE_ITEMS then
        walk(depth + 1, offset + i * stride, stride)
      end
    end
  end
  walk(1, 0, a._size)
  return out
end

local function formatter(a, summary)
  if a.dtype.name == "bool" then return bool_formatter(#a._dims) end
  if a.dtype.name == "string" then return quote_string end
  local values = shown_values(a, summary)
  if a.dtype.is_floating then return float_formatter(values, a.dtype.name == "float32") end
  if a.dtype.is_complex then return complex_formatter(values, a.dtype.name == "complex64") end
  return int_formatter(values)
end

-- NumPy's _extendLine: word appended to line, or to a new line when it would pass width.
local function extend_line(s, line, word, width, indent)
  if #line + #word > width and #line > #indent then
    s = s .. line:gsub("%s+$", "") .. "\n"
    line = indent
  end
  return s, line .. word
end

-- NumPy's _formatArray with separator ", ": `indent` is the prefix of the
-- lines after the first, `width` the line width.
local function format_array(a, format, width, indent, summary)
  local dims, data_rank = a._dims, #a._dims
  local strides, stride = {}, 1
  for d = data_rank, 1, -1 do strides[d] = stride; stride = stride * dims[d] end
  local function recurse(depth, offset, hanging, curr_width)
    if depth > data_rank then return format(element(a, offset)) end
    local next_hanging, next_width = hanging .. " ", curr_width - 1
    local n = dims[depth]
    local show_summary = summary and n > 2 * EDGE_ITEMS
    local leading, trailing = 0, n
    if show_summary then leading, trailing = EDGE_ITEMS, EDGE_ITEMS end
    local function item(i) return recurse(depth + 1, offset + i * strides[depth], next_hanging, next_width) end
    local s = ""
    if depth == data_rank then
      local elem_width, line = curr_width - 1, hanging
      for i = 0, leading - 1 do
        s, line = extend_line(s, line, item(i), elem_width, hanging)
        line = line .. ", "
      end
      if show_summary then
        s, line = extend_line(s, line, "...", elem_width, hanging)
        line = line .. ", "
      end
      for i = n - trailing, n - 2 do
        s, line = extend_line(s, line, item(i), elem_width, hanging)
        line = line .. ", "
      end
      s, line = extend_line(s, line, item(n - 1), elem_width, hanging)
      s = s .. line
    else
      local line_sep = "," .. string.rep("\n", data_rank - depth)
      for i = 0, leading - 1 do s = s .. hanging .. item(i) .. line_sep end
      if show_summary then s = s .. hanging .. "..." .. line_sep end
      for i = n - trailing, n - 2 do s = s .. hanging .. item(i) .. line_sep end
      s = s .. hanging .. item(n - 1)
    end
    return "[" .. s:sub(#hanging + 1) .. "]"
  end
  return recurse(1, 0, indent, width)
end

-- NumPy's array2string(a, separator=", ", prefix=prefix) in a line of
-- LINE_WIDTH - suffix_length columns.
local function array2string(a, prefix, suffix_length)
  if a._size == 0 then return "[]" end
  local summary = a._size > THRESHOLD
  return format_array(a, formatter(a, summary), LINE_WIDTH - suffix_length, " " .. string.rep(" ", #prefix), summary)
end

function M.array_string(a) return array2string(a, "", 0) end

local function shape_text(dims)
  if #dims == 1 then return "(" .. dims[1] .. ",)" end
  return "(" .. table.concat(dims, ", ") .. ")"
end

function M.array_repr(a)
  local prefix = "tf.Array("
  local text = prefix .. array2string(a, prefix, 1) .. ","
  local extras = "shape=" .. shape_text(a._dims) .. ", dtype=" .. a.dtype.name .. ")"
  local last_line = #text - (text:find("\n[^\n]*$") or 0)
  if last_line + #extras + 1 > LINE_WIDTH then return text .. "\n" .. string.rep(" ", #prefix) .. extras end
  return text .. " " .. extras
end

-- Any value -------------------------------------------------------------------------------
local MAX_ITEMS, MAX_DEPTH = 100, 3

local function is_identifier(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function repr(x, depth, seen)
  local kind = type(x)
  if kind == "string" then return string.format("%q", x):gsub("\\\n", "\\n") end
  local mt = getmetatable(x)
  if type(mt) == "table" and mt.__repr then return mt.__repr(x) end
  if kind ~= "table" or mt ~= nil then return tostring(x) end
  if seen[x] then return "{...}" end  -- a table holding itself
  if depth >= MAX_DEPTH then return "{...}" end
  seen[x] = true
  local parts, n = {}, #x
  for i = 1, math.min(n, MAX_ITEMS) do parts[i] = repr(x[i], depth + 1, seen) end
  local keys = {}
  for k in pairs(x) do
    if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_order)
  for _, k in ipairs(keys) do
    if #parts >= MAX_ITEMS then break end
    local shown = is_identifier(k) and k or "[" .. repr(k, depth + 1, seen) .. "]"
    parts[#parts + 1] = shown .. " = " .. repr(x[k], depth + 1, seen)
  end
  if n + #keys > MAX_ITEMS then parts[#parts + 1] = "..." end
  seen[x] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- A number as Python's repr writes it: the shortest digits that read back as
-- it, inf and nan by name.
local function python_number(v)
  if v ~= v then return "nan" end
  if v == math.huge or v == -math.huge then return v > 0 and "inf" or "-inf" end
  for p = 1, 17 do
    local text = string.format("%." .. p .. "g", v)
    if tonumber(text) == v then return text end
  end
end

-- A complex number (LuaJIT's complex cdata) as Python's repr writes it: (1+2j), 2j, (1-0.5j).
local complex_double, complex_float = ffi.typeof("complex double"), ffi.typeof("complex float")
function M.complex_repr(z)
  local im = python_number(z.im)
  if im:sub(1, 1) ~= "-" then im = "+" .. im end
  if z.re == 0 and 1 / z.re > 0 then return im:sub(2) .. "j" end
  return "(" .. python_number(z.re) .. im .. "j)"
end

function M.repr(x)
  if type(x) == "cdata" and (ffi.istype(complex_double, x) or ffi.istype(complex_float, x)) then
    return M.complex_repr(x)
  end
  return (repr(x, 0, {}))
end

return M
