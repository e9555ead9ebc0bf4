-- array.lua — tf.Array: a host value (an owned mf_tensor) seen from Lua.
local ffi = require("ffi")
local core = require("moonflow.core")
local C = core.C
local fail = core.fail
local describe = require("moonflow.args").describe
local printing = require("moonflow.printing")

local Array = {}
Array.__index = Array

-- Complex numbers from Lua are LuaJIT's complex cdata: tf.complex_number(re, im)
-- (or ffi.new("complex", re, im)); fetched complex elements come back so.
local complex_double = ffi.typeof("complex double")
local complex_float = ffi.typeof("complex float")
function Array.is_complex_number(v)
  return type(v) == "cdata" and (ffi.istype(complex_double, v) or ffi.istype(complex_float, v))
end
function Array.complex_number(re, im)
  if type(re) ~= "number" or (im ~= nil and type(im) ~= "number") then
    fail("tf.complex_number: expected a real and an imaginary part (numbers), got " .. describe(re) ..
         (im ~= nil and " and " .. describe(im) or ""))
  end
  return complex_double(re, im or 0)
end

local function release(ptr) C.mf_tensor_release(ptr) end

-- Dimension i (0-based) of cdims, nil past rank.
local function dim(cdims, rank, i)
  if i < rank then return tonumber(cdims[i]) end
  return nil
end

-- Wraps a new reference to an mf_tensor (takes ownership).
function Array.wrap(ptr)
  local dtype = core.by_enum[tonumber(C.mf_tensor_dtype(ptr))]
  local rank = C.mf_tensor_rank(ptr)
  local cdims = C.mf_tensor_dims(ptr)
  -- Up to rank 4 without a loop: every fetch comes through here, and a loop
  -- running once or twice per call gets blacklisted by LuaJIT, which then
  -- interprets every run from then on (see `each` in session.lua).
  local dims = {dim(cdims, rank, 0), dim(cdims, rank, 1), dim(cdims, rank, 2), dim(cdims, rank, 3)}
  for i = 4, rank - 1 do dims[i + 1] = tonumber(cdims[i]) end
  return setmetatable({
    ptr = ffi.gc(ptr, release), dtype = dtype, _dims = dims,
    _size = tonumber(C.mf_tensor_size(ptr)),
    _data = ffi.cast(dtype.ptr_ctype, C.mf_tensor_data(ptr)),
  }, Array)
end

function Array.is(x) return getmetatable(x) == Array end

-- The caller an error names: `who` is its name, a function giving it (to
-- name it only when an error needs it), or nil for tf.array.
local function named(who)
  if type(who) == "function" then return who() end
  return who or "tf.array"
end

-- The length of plain table t when it is a list (keys exactly 1..n, no
-- holes; {} is the empty list), else an error naming the offending key;
-- `who` opens the message.
function Array.list_length(t, who)
  local count, max = 0, 0
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k % 1 ~= 0 then
      local shown = type(k) == "string" and "'" .. k .. "'" or tostring(k)
      fail(named(who) .. ": a Lua table with key " .. shown ..
           " is not a list; values must be numbers, booleans or nested lists")
    end
    count = count + 1
    if k > max then max = k end
  end
  if count ~= max then
    local hole = 1
    while t[hole] ~= nil do hole = hole + 1 end
    fail(named(who) .. ": a Lua table with a hole at index " .. hole ..
         " (nil) is not a list; values must be numbers, booleans or nested lists")
  end
  return max
end
-- Interpreted: this LuaJIT's traces of the pairs() loop above miscounted now
-- and then (a literal {0, 1, 1} measured twice gave two lengths).
jit.off(Array.list_length)
local list_length = Array.list_length

-- Shape of a nested Lua table (rectangular), or an error naming the ragged level.
local function table_shape(t, dims, depth, who)
  if type(t) ~= "table" or getmetatable(t) ~= nil then return end
  local n = list_length(t, who)
  dims[depth] = n
  if n > 0 then table_shape(t[1], dims, depth + 1, who) end
end

local function fill_from_table(t, data, dims, depth, offset, convert, who)
  local n = dims[depth]
  local got = type(t) == "table" and getmetatable(t) == nil and list_length(t, who) or nil
  if got ~= n then
    fail(string.format("%s: ragged nested table: expected %d elements at depth %d, got %s", named(who), n,
                       depth, got or "a " .. type(t)))
  end
  if depth == #dims then
    for i = 1, n do data[offset + i - 1] = convert(t[i]) end
    return offset + n
  end
  for i = 1, n do offset = fill_from_table(t[i], data, dims, depth + 1, offset, convert, who) end
  return offset
end

-- The Lua numbers each integer dtype holds: [low, high), and how to say it.
local int_range = {
  int32 = {-2 ^ 31, 2 ^ 31, "[-2147483648, 2147483647]"},
  int64 = {-2 ^ 63, 2 ^ 63, "[-9223372036854775808, 9223372036854775807]"},
  uint8 = {0, 256, "[0, 255]"},
}

local function format_number(v)
  if v == math.floor(v) and math.abs(v) < 1e20 then return string.format("%.0f", v) end
  return tostring(v)
end

-- Checks that a Lua number converts to an integer dtype without loss, as
-- TensorFlow refuses tf.constant(1.5, tf.int32): not integral or out of the
-- dtype's range is an error naming the value and the dtype; `who` opens it.
function Array.check_exact(v, dtype, who)
  local range = int_range[dtype.name]
  if not range or type(v) ~= "number" then return end
  if v ~= v or v % 1 ~= 0 then
    fail(named(who) .. ": Cannot convert " .. format_number(v) .. " to a Tensor of dtype " .. dtype.name ..
         ": it is not an integer (use tf.cast to truncate)")
  end
  if v < range[1] or v >= range[2] then
    fail(string.format("%s: Cannot convert %s to a Tensor of dtype %s: out of its range %s",
                       named(who), format_number(v), dtype.name, range[3]))
  end
end

-- The function storing a Lua value as an element of dtype. Exact: Lua numbers
-- bound for an integer dtype must be integers in its range (graph constants);
-- else they truncate and wrap like a C cast, as NumPy's astype does. `who`
-- opens the messages.
local function converter(dtype, exact, who)
  if dtype.name == "bool" then
    return function(v)
      if type(v) ~= "boolean" then fail(named(who) .. ": expected booleans for dtype bool, got " .. describe(v)) end
      return v
    end
  end
  if dtype.is_complex then
    return function(v)
      if type(v) == "boolean" then return v and 1 or 0 end
      if type(v) ~= "number" and not Array.is_complex_number(v) then
        fail(named(who) .. ": expected numbers or complex numbers (tf.complex_number(re, im)) for dtype " ..
             dtype.name .. ", got " .. describe(v))
      end
      return v
    end
  end
  local check = exact and int_range[dtype.name] and Array.check_exact
  return function(v)
    if Array.is_complex_number(v) then
      fail(named(who) .. ": cannot convert complex number " .. tostring(v) .. " to dtype " .. dtype.name ..
           " (tf.math.real and tf.math.imag take its parts)")
    end
    if type(v) == "boolean" then return v and 1 or 0 end
    if type(v) ~= "number" and type(v) ~= "cdata" then
      fail(named(who) .. ": expected numbers, got " .. describe(v))
    end
    if check then check(v, dtype, who) end
    return v
  end
end

-- The dtype a Lua value suggests: booleans become bool, strings string,
-- numbers float32, complex numbers complex128 (as Python's complex in TensorFlow).
function Array.default_dtype(value)
  local v = value
  while type(v) == "table" and getmetatable(v) == nil do v = v[1] end
  if Array.is(v) then return v.dtype end
  if type(v) == "boolean" then return core.dtypes.bool end
  if type(v) == "string" then return core.dtypes.string end
  if Array.is_complex_number(v) then return core.dtypes.complex128 end
  return core.dtypes.float32
end

-- Element i (0-based) of a string array as a Lua string.
local string_length = ffi.new("int64_t[1]")
local function string_at(ptr, i)
  local bytes = C.mf_tensor_string(ptr, i, string_length)
  return ffi.string(bytes, string_length[0])
end

-- A string array of shape dims (a Lua list) from the Lua strings of a nested
-- list (or one string), checked like numbers are; built in C, which copies them.
local function strings_from(value, dims, who)
  local strings = {}
  local function check(v)
    if type(v) ~= "string" then fail(named(who) .. ": expected strings for dtype string, got " .. describe(v)) end
    strings[#strings + 1] = v
    return v
  end
  if #dims == 0 then check(value) else fill_from_table(value, {}, dims, 1, 0, check, who) end
  return Array.from_strings(strings, dims)
end

-- The elements of string array a as a flat Lua list, in row-major order.
function Array.flat_strings(a)
  local out = {}
  for i = 0, a._size - 1 do out[i + 1] = string_at(a.ptr, i) end
  return out
end

-- A string array of shape dims (a Lua list) holding the Lua strings of the
-- flat list `strings` (as many as dims holds), in row-major order.
function Array.from_strings(strings, dims)
  local n = #strings
  local bytes, lengths = ffi.new("const char*[?]", n + 1), ffi.new("int64_t[?]", n + 1)
  for i = 1, n do bytes[i - 1], lengths[i - 1] = strings[i], #strings[i] end
  local cdims = core.dims_buffer(#dims > 0 and #dims or 1)
  for i = 1, #dims do cdims[i - 1] = dims[i] end
  local ptr = C.mf_tensor_new_strings(#dims, cdims, bytes, lengths, core.status)
  if ptr == nil then core.check_here() end
  return Array.wrap(ptr)
end

-- Allocates a zeroed array of dtype and shape (a Lua list).
function Array.new(dtype, shape)
  dtype = core.as_dtype(dtype)
  local rank = #shape
  local dims = core.dims_buffer(rank > 0 and rank or 1)
  for i = 1, rank do dims[i - 1] = shape[i] end
  local ptr = C.mf_tensor_new(dtype.enum, rank, dims, core.status)
  if ptr == nil then core.check_here() end
  return Array.wrap(ptr)
end

-- tf.array(value, dtype): from a number, boolean, nested table or Array.
-- With `exact`, Lua numbers must convert to an integer dtype without loss
-- (see converter); an Array's elements are cast as they are. Tables must be
-- lists (see Array.list_length); `who` names the caller in the errors (see named).
function Array.from(value, dtype, exact, who)
  if dtype and getmetatable(dtype) ~= core.DType then dtype = core.as_dtype(dtype, named(who)) end
  if Array.is(value) then
    if not dtype or dtype == value.dtype then return value end
    if dtype.name == "string" or value.dtype.name == "string" then
      fail(named(who) .. ": cannot convert a " .. value.dtype.name .. " array to " .. dtype.name ..
           " (tf.strings.as_string and tf.strings.to_number convert in the graph)")
    end
    local out = Array.new(dtype, value:shape())
    local convert = converter(dtype, false, who)
    for i = 0, value._size - 1 do
      local v = value._data[i]
      if value.dtype.is_complex then  -- as TensorFlow's Cast: bool is x ~= 0, real dtypes take the real part
        if dtype.name == "bool" then out._data[i] = v.re ~= 0 or v.im ~= 0
        elseif dtype.is_complex then out._data[i] = v
        else out._data[i] = v.re end
      elseif dtype.name == "bool" then out._data[i] = (v ~= 0 and v ~= false) else out._data[i] = convert(v) end
    end
    return out
  end
  local from_lua_numbers = dtype == nil and type(value) ~= "boolean"
  dtype = dtype or Array.default_dtype(value)
  local dims = {}
  if type(value) == "table" and getmetatable(value) == nil then table_shape(value, dims, 1, who)
  elseif type(value) ~= "number" and type(value) ~= "boolean" and type(value) ~= "string" and
         not Array.is_complex_number(value) then
    fail(named(who) .. ": expected a number, boolean, string, nested list or tf.Array, got " .. describe(value))
  end
  if dtype.name == "string" then return strings_from(value, dims, who) end
  local out = Array.new(dtype, dims)
  local convert = converter(dtype, exact, who)
  -- An empty result is filled too: the walk finds ragged lists such as {{}, {5, 7}}.
  if #dims == 0 then out._data[0] = convert(value)
  else fill_from_table(value, out._data, dims, 1, 0, convert, who) end
  -- float32 only because Lua numbers have no integer kind (graph.lua's int_convert)
  if from_lua_numbers and dtype == core.dtypes.float32 then out.from_lua_numbers = true end
  return out
end

-- The bytes an FFI object is known to hold: an array, a VLA, a struct or a
-- reference to one. nil for pointers (and boxed integers used as addresses),
-- whose extent the FFI cannot know.
local function known_bytes(obj)
  local name = tostring(ffi.typeof(obj))
  if name:find("*", 1, true) then return nil end
  if name:find("%]>$") or name:find("^ctype<struct") or name:find("^ctype<union") then
    return ffi.sizeof(obj)
  end
  return nil
end

-- Wraps caller memory without copying; `keep` is kept alive with the array.
-- ptr must be FFI cdata. When its size is known (an FFI array or VLA such as
-- ffi.new("float[?]", n)) it must hold the whole shape; a raw pointer is
-- trusted: the caller answers for it pointing at enough live memory.
function Array.from_pointer(ptr, shape, dtype, keep)
  dtype = core.as_dtype(dtype)
  if type(ptr) ~= "cdata" then
    fail("tf.Array.from_pointer: expected FFI cdata (an array, VLA or pointer), got a " .. type(ptr))
  end
  if type(shape) ~= "table" then
    fail("tf.Array.from_pointer: expected a shape list, got " .. tostring(shape))
  end
  local rank = #shape
  local numel = 1
  for i = 1, rank do
    local d = shape[i]
    if type(d) ~= "number" or d < 0 or d % 1 ~= 0 then
      fail("tf.Array.from_pointer: shape[" .. i .. "] is " .. tostring(d) ..
           "; dimensions must be non-negative integers")
    end
    numel = numel * d
  end
  local need = numel * dtype.size
  local have = known_bytes(ptr)
  if have and have < need then
    fail(string.format("tf.Array.from_pointer: %s holds %d bytes, but shape {%s} of %s needs %.0f",
                       tostring(ffi.typeof(ptr)):match("^ctype<(.*)>$"), have,
                       table.concat(shape, ", "), dtype.name, need))
  end
  local dims = core.dims_buffer(rank > 0 and rank or 1)
  for i = 1, rank do dims[i - 1] = shape[i] end
  local t = C.mf_tensor_wrap(dtype.enum, rank, dims, ffi.cast("void*", ptr), nil, nil, core.status)
  if t == nil then core.check_here() end
  local a = Array.wrap(t)
  a._keep = keep or ptr
  return a
end

function Array:shape()
  local s = {}
  for i, d in ipairs(self._dims) do s[i] = d end
  return s
end
function Array:rank() return #self._dims end
function Array:size() return self._size end
function Array:data() return self._data end

local function scalar_of(dtype, v)
  if dtype.name == "bool" or dtype.name == "string" then return v end
  if dtype.is_complex then return complex_double(v.re, v.im) end
  return tonumber(v)
end

-- Flat offset of 0-based indices, with bounds checks.
local function offset_of(self, ...)
  local n = select("#", ...)
  local dims = self._dims
  if n ~= #dims then
    fail("Array:get/set: expected " .. #dims .. " indices, got " .. n)
  end
  local off = 0
  for k = 1, n do
    local i = select(k, ...)
    if i < 0 or i >= dims[k] or i % 1 ~= 0 then
      fail("Array:get/set: index " .. tostring(i) .. " is out of range for dimension " .. (k - 1) ..
           " of size " .. dims[k])
    end
    off = off * dims[k] + i
  end
  return off
end

function Array:get(...)
  local off = offset_of(self, ...)
  if self.dtype.name == "string" then return string_at(self.ptr, off) end
  return scalar_of(self.dtype, self._data[off])
end

-- A copy that owns its memory (a string array's elements and bytes: one block).
function Array:copy()
  if self.dtype.name == "string" then return Array.from(self:totable(), self.dtype) end
  local out = Array.new(self.dtype, self._dims)
  ffi.copy(out._data, self._data, self._size * self.dtype.size)
  return out
end

-- a:set(i, j, ..., value) with 0-based indices. A fetched array may share its
-- memory with the session (a variable's value, a constant): then set copies
-- it first, so the write never reaches the graph's values.
function Array:set(...)
  local n = select("#", ...)
  local idx = {...}
  local v = idx[n]
  local off = offset_of(self, unpack(idx, 1, n - 1))
  local tv = type(v)
  if self.dtype.name == "string" then
    fail("Array:set: string arrays are immutable; build a new one with tf.array(list, tf.string)")
  end
  if self.dtype.is_complex then v = converter(self.dtype, false, "Array:set")(v)
  elseif Array.is_complex_number(v) then
    fail("Array:set: cannot convert complex number " .. tostring(v) .. " to '" .. self.dtype.ctype ..
         "' (take tf.math.real or tf.math.imag first)")
  end
  if self.dtype.name ~= "bool" and tv ~= "number" and tv ~= "boolean" and tv ~= "cdata" then
    fail("Array:set: cannot convert '" .. tv .. "' to '" .. self.dtype.ctype .. "': the value must be a number")
  end
  if C.mf_tensor_refcount(self.ptr) > 1 then
    local own = self:copy()
    self.ptr, self._data = own.ptr, own._data
  end
  if self.dtype.name == "bool" then self._data[off] = v and true or false else self._data[off] = v end
end

-- Element i (0-based, row-major) of a string array as a Lua string (printing.lua reads them so).
function Array:string_at(i) return string_at(self.ptr, i) end

-- The elements as nested Lua lists in row-major order.
function Array:totable()
  local dims, data, dtype = self._dims, self._data, self.dtype
  if dtype.name == "string" then  -- elements are read as Lua strings
    local ptr = self.ptr
    data = setmetatable({}, {__index = function(_, i) return string_at(ptr, i) end})
  end
  if #dims == 0 then return scalar_of(dtype, data[0]) end
  local strides = {}
  local stride = 1
  for d = #dims, 1, -1 do strides[d] = stride; stride = stride * dims[d] end
  local function build(depth, offset)
    local t = {}
    for i = 0, dims[depth] - 1 do
      local at = offset + i * strides[depth]
      if depth == #dims then t[i + 1] = scalar_of(dtype, data[at]) else t[i + 1] = build(depth + 1, at) end
    end
    return t
  end
  return build(1, 0)
end

-- Printing as NumPy does (printing.lua): print(a) shows the aligned grid of
-- array2string(a, separator=", "); the REPL shows the repr, with shape and dtype.
Array.__tostring = printing.array_string
Array.__repr = printing.array_repr

return Array
