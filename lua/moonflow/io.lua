-- io.lua — tf.io.read_npy / tf.io.write_npy: NumPy .npy files.
--
-- Format (NPY 1.0; 2.0 and 3.0 are read too): the magic "\x93NUMPY", a
-- version (major, minor bytes), the header length (2 bytes little-endian in
-- 1.0, 4 bytes in 2.0/3.0), then an ASCII Python dict literal
--   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
-- padded with spaces and ended by "\n" so that the data starts at a multiple
-- of 64 bytes, then the raw elements in C order. write_npy writes the header
-- byte for byte as NumPy does (including the spare spaces NumPy leaves for the
-- first dimension to grow), so files compare equal to np.save's.
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local fail = core.fail

return function(tf, ops)
  tf.io = tf.io or {}

  local descr_of = {float32 = "<f4", float64 = "<f8", int32 = "<i4", int64 = "<i8", uint8 = "|u1", bool = "|b1",
                    complex64 = "<c8", complex128 = "<c16"}
  -- descr kind+size -> dtype name ('<', '=' and '|' are native on a little-endian host).
  local dtype_of = {f4 = "float32", f8 = "float64", i4 = "int32", i8 = "int64", u1 = "uint8", b1 = "bool",
                    c8 = "complex64", c16 = "complex128"}

  if not ffi.abi("le") then
    local function unsupported() fail("tf.io: .npy files are supported on little-endian hosts only") end
    tf.io.read_npy, tf.io.write_npy = unsupported, unsupported
    return
  end

  local function shape_repr(dims)
    if #dims == 0 then return "()" end
    if #dims == 1 then return "(" .. dims[1] .. ",)" end
    return "(" .. table.concat(dims, ", ") .. ")"
  end

  -- The full header (magic through "\n") for an array of dtype and dims.
  local function header(dtype, dims)
    local dict = "{'descr': '" .. descr_of[dtype.name] .. "', 'fortran_order': False, 'shape': " ..
                 shape_repr(dims) .. ", }"
    if #dims > 0 then dict = dict .. string.rep(" ", 21 - #tostring(dims[1])) end
    local hlen = #dict + 1
    local pad = 64 - (10 + hlen) % 64  -- 64, not 0, when already aligned (as NumPy)
    dict = dict .. string.rep(" ", pad) .. "\n"
    local n = #dict
    if n > 65535 then fail("tf.io.write_npy: the header is too long for NPY 1.0") end
    return "\147NUMPY\1\0" .. string.char(n % 256, math.floor(n / 256)) .. dict
  end

  -- tf.io.write_npy(path, array): array is a tf.Array or a value tf.array
  -- accepts (nested tables: float32, or bool for booleans).
  function tf.io.write_npy(path, array)
    if type(path) ~= "string" then fail("tf.io.write_npy(path, array): path must be a string") end
    if array == nil then fail("tf.io.write_npy(path, array): array is missing") end
    if not Array.is(array) then
      array = Array.from(array, nil, false, "tf.io.write_npy")
    end
    local head = header(array.dtype, array._dims)
    local f, err = io.open(path, "wb")
    if not f then fail("tf.io.write_npy: cannot write '" .. path .. "': " .. tostring(err)) end
    f:write(head)
    local nbytes = array._size * array.dtype.size
    if nbytes > 0 then f:write(ffi.string(array._data, nbytes)) end
    local ok, werr = f:close()
    if not ok then fail("tf.io.write_npy: writing '" .. path .. "' failed: " .. tostring(werr)) end
    return path
  end

  -- tf.io.read_npy(path): a tf.Array with the file's dtype and shape.
  function tf.io.read_npy(path)
    if type(path) ~= "string" then fail("tf.io.read_npy(path): path must be a string") end
    local f, err = io.open(path, "rb")
    if not f then fail("tf.io.read_npy: cannot open '" .. path .. "': " .. tostring(err)) end
    local bytes, rerr = f:read("*a")
    f:close()
    local function bad(why) fail("tf.io.read_npy: '" .. path .. "' " .. why) end
    if bytes == nil then bad("cannot be read: " .. tostring(rerr)) end
    if bytes:sub(1, 6) ~= "\147NUMPY" then bad("is not a .npy file (no \\x93NUMPY magic)") end
    local major = bytes:byte(7)
    local hlen, start
    local function preamble(n)  -- magic, version and header length: n bytes
      if #bytes < n then
        bad(string.format("is truncated: %d bytes, fewer than the %d of the NPY %s preamble (magic, version, " ..
                          "header length)", #bytes, n, major and major .. ".0" or "format"))
      end
    end
    if major == nil then preamble(10) end
    if major == 1 then
      preamble(10)
      hlen, start = bytes:byte(9) + 256 * bytes:byte(10), 11
    elseif major == 2 or major == 3 then
      preamble(12)
      local b1, b2, b3, b4 = bytes:byte(9, 12)
      hlen, start = b1 + 256 * (b2 + 256 * (b3 + 256 * b4)), 13
    else
      bad("has NPY format version " .. tostring(major) .. ", which is not supported (1.0, 2.0, 3.0 are)")
    end
    local head = bytes:sub(start, start + hlen - 1)
    if #head ~= hlen then bad("is truncated inside its header") end
    local descr = head:match("'descr'%s*:%s*'([^']*)'")
    local fortran = head:match("'fortran_order'%s*:%s*(%a+)")
    local shape_s = head:match("'shape'%s*:%s*(%b())")
    if not descr or not fortran or not shape_s then bad("has a malformed header: " .. head) end
    local order, kind = descr:match("^([<>|=]?)(%a%d+)$")
    local name = kind and dtype_of[kind]
    if not name then
      bad("holds dtype '" .. descr .. "'; supported: float32 (<f4), float64 (<f8), int32 (<i4), " ..
          "int64 (<i8), uint8 (|u1), bool (|b1), complex64 (<c8), complex128 (<c16)")
    end
    if order == ">" and kind:sub(2) ~= "1" then
      bad("is big-endian ('" .. descr .. "'); save it little-endian (arr.astype('<" .. kind .. "'))")
    end
    if fortran ~= "False" then
      bad("is in Fortran order; save it with np.save(path, np.ascontiguousarray(arr))")
    end
    -- The shape: a Python tuple of non-negative ints, "()", "(3,)", "(2, 3)" (a
    -- trailing comma allowed; Python 2's "3L" too).
    local dims = {}
    local inner = shape_s:sub(2, -2)
    if inner:find("%S") then
      if not inner:find(",", 1, true) then
        bad("has a shape " .. shape_s .. " that is not a tuple (one dimension is written (n,))")
      end
      local items = {}
      for item in (inner .. ","):gmatch("([^,]*),") do items[#items + 1] = item end
      if not items[#items]:find("%S") then items[#items] = nil end  -- after a trailing comma
      for i, item in ipairs(items) do
        local digits = item:match("^%s*(%d+)[lL]?%s*$")
        if not digits then
          bad("has an invalid shape " .. shape_s .. ": dimension " .. i .. " is '" .. item:match("^%s*(.-)%s*$") ..
              "', not a non-negative integer")
        end
        dims[i] = tonumber(digits)
        if dims[i] >= 2 ^ 53 then bad("has an invalid shape " .. shape_s .. ": dimension " .. i .. " is too large") end
      end
    end
    if #dims > core.C.MF_MAX_RANK then
      bad(string.format("has rank %d (shape %s); moonflow arrays have at most %d dimensions", #dims, shape_s,
                        core.C.MF_MAX_RANK))
    end
    local dtype = core.dtypes[name]
    local numel = 1
    for _, d in ipairs(dims) do numel = numel * d end
    local nbytes = numel * dtype.size
    local data_start = start + hlen
    if #bytes - data_start + 1 < nbytes then
      bad(string.format("is truncated: shape %s needs %.0f bytes of data, the file has %d",
                        shape_repr(dims), nbytes, #bytes - data_start + 1))
    end
    local a = Array.new(dtype, dims)
    if nbytes > 0 then
      ffi.copy(a._data, ffi.cast("const char*", bytes) + data_start - 1, nbytes)
      if name == "bool" then
        -- NumPy stores bools as bytes 0/1; normalize anything else to 1.
        local p = ffi.cast("uint8_t*", a._data)
        for i = 0, a._size - 1 do if p[i] > 1 then p[i] = 1 end end
      end
    end
    return a
  end
end
