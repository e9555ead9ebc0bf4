-- tf.io.read_npy / tf.io.write_npy: NumPy .npy files (NPY 1.0, C order).
local tf = require("moonflow")
local H = require("spec.helpers")

local function tmpfile()
  local p = os.tmpname()
  return p
end

local read_bytes, write_bytes = H.read, H.write

-- Little-endian encodings, written out by hand.
local function le32(v) v = v % 2 ^ 32; return string.char(v % 256, math.floor(v / 256) % 256, math.floor(v / 65536) % 256, math.floor(v / 16777216) % 256) end
local function header_v1(dict, total)
  -- The dict padded with spaces and "\n" so that magic+version+len+header = total.
  local hlen = total - 10
  return "\147NUMPY\1\0" .. string.char(hlen % 256, math.floor(hlen / 256)) ..
         dict .. string.rep(" ", hlen - #dict - 1) .. "\n"
end

describe("tf.io.write_npy", function()
  before_each(function() tf.reset_default_graph() end)
  it("writes int32 [1, 2, 3] byte for byte as np.save does", function()
    local path = tmpfile()
    tf.io.write_npy(path, tf.array({1, 2, 3}, tf.int32))
    local got = read_bytes(path)
    -- np.save(path, np.array([1, 2, 3], dtype=np.int32)): a 128-byte header
    -- (header length 118 = 0x76), then 12 bytes of data.
    local want = "\147NUMPY\1\0\118\0" ..
                 "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }" ..
                 string.rep(" ", 60) .. "\n" ..   -- 10 + 57 + 60 + 1 = 128
                 "\1\0\0\0\2\0\0\0\3\0\0\0"
    assert.equal(140, #got)
    assert.equal(want, got)
    os.remove(path)
  end)

  it("writes the descr, shape and alignment of each dtype", function()
    local cases = {
      {tf.float32, {2, 3}, "'<f4'", "(2, 3)"},
      {tf.float64, {}, "'<f8'", "()"},
      {tf.int64, {4}, "'<i8'", "(4,)"},
      {tf.uint8, {1, 2, 1}, "'|u1'", "(1, 2, 1)"},
      {tf.bool, {2}, "'|b1'", "(2,)"},
    }
    for _, c in ipairs(cases) do
      local path = tmpfile()
      local a = tf.Array.new(c[1], c[2])
      tf.io.write_npy(path, a)
      local s = read_bytes(path)
      local hlen = s:byte(9) + 256 * s:byte(10)
      assert.equal(0, (10 + hlen) % 64)                   -- data starts 64-aligned
      assert.equal("\n", s:sub(10 + hlen, 10 + hlen))
      assert.truthy(s:find("{'descr': " .. c[3] .. ", 'fortran_order': False, 'shape': " .. c[4] .. ", }", 11, true))
      assert.equal(10 + hlen + a:size() * c[1].size, #s)
      os.remove(path)
    end
  end)

  it("writes float64 1.5 and -2 as IEEE doubles", function()
    local path = tmpfile()
    tf.io.write_npy(path, tf.array({1.5, -2}, tf.float64))
    local s = read_bytes(path)
    assert.equal("\0\0\0\0\0\0\248\63" .. "\0\0\0\0\0\0\0\192", s:sub(-16))
    os.remove(path)
  end)

  it("accepts nested Lua tables (float32, bool for booleans)", function()
    local path = tmpfile()
    tf.io.write_npy(path, {{1, 2}, {3, 4}})
    local a = tf.io.read_npy(path)
    assert.equal("float32", a.dtype.name)
    assert.same({{1, 2}, {3, 4}}, a:totable())
    tf.io.write_npy(path, {true, false})
    assert.same({true, false}, tf.io.read_npy(path):totable())
    os.remove(path)
  end)

  it("names the function and the problem in its errors", function()
    assert.matches("tf.io.write_npy%(path, array%): path must be a string", H.error_of(tf.io.write_npy, 3, {1}))
    assert.matches("cannot write '/nonexistent/dir/x.npy'", H.error_of(tf.io.write_npy, "/nonexistent/dir/x.npy", {1}))
  end)
end)

describe("tf.io.read_npy", function()
  before_each(function() tf.reset_default_graph() end)
  it("round-trips every supported dtype and shape", function()
    local cases = {
      {tf.float32, {{1.5, -2.25, 3}, {4, 5, 6.5}}},
      {tf.float64, {{1e-300, -1e300}}},
      {tf.int32, {-2147483648, 0, 2147483647}},
      {tf.int64, {{{2 ^ 40 + 3}, {-(2 ^ 50)}}}},
      {tf.uint8, {0, 7, 255}},
      {tf.bool, {{true, false}, {false, true}}},
    }
    for _, c in ipairs(cases) do
      local path = tmpfile()
      local a = tf.array(c[2], c[1])
      tf.io.write_npy(path, a)
      local b = tf.io.read_npy(path)
      assert.equal(c[1].name, b.dtype.name)
      assert.same(a:shape(), b:shape())
      assert.same(c[2], b:totable())
      os.remove(path)
    end
  end)

  it("round-trips a scalar and an empty array", function()
    local path = tmpfile()
    tf.io.write_npy(path, tf.array(2.5, tf.float64))
    local s = tf.io.read_npy(path)
    assert.same({}, s:shape())
    assert.equal(2.5, s:get())
    tf.io.write_npy(path, tf.Array.new(tf.int32, {0, 3}))
    local e = tf.io.read_npy(path)
    assert.same({0, 3}, e:shape())
    assert.equal(0, e:size())
    os.remove(path)
  end)

  it("reads a file with NumPy's older 16-byte alignment", function()
    -- np.save from NumPy < 1.9 padded the header to 16 bytes: total 80 here.
    local path = tmpfile()
    local dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }"
    write_bytes(path, header_v1(dict, 80) ..
                      "\0\0\0\0\0\0\240\63" .. "\0\0\0\0\0\0\0\64" ..   -- 1, 2
                      "\0\0\0\0\0\0\8\64" .. "\0\0\0\0\0\0\16\64")      -- 3, 4
    local a = tf.io.read_npy(path)
    assert.equal("float64", a.dtype.name)
    assert.same({{1, 2}, {3, 4}}, a:totable())
    os.remove(path)
  end)

  it("reads NPY 2.0 (4-byte header length) and '<u1' / '<b1' spellings", function()
    local path = tmpfile()
    local dict = "{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }"
    local hlen = 128 - 12
    write_bytes(path, "\147NUMPY\2\0" .. le32(hlen) .. dict .. string.rep(" ", hlen - #dict - 1) .. "\n" ..
                      "\9\0\200")
    assert.same({9, 0, 200}, tf.io.read_npy(path):totable())
    dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"
    write_bytes(path, header_v1(dict, 128) .. "\1\0\2")
    assert.same({true, false, true}, tf.io.read_npy(path):totable())
    os.remove(path)
  end)

  it("rejects what it cannot read, saying what to do", function()
    local path = tmpfile()
    write_bytes(path, "hello world")
    assert.matches("is not a .npy file", H.error_of(tf.io.read_npy, path))
    write_bytes(path, header_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 128) ..
                      string.rep("\0", 16))
    assert.matches("Fortran order; save it with np.save%(path, np.ascontiguousarray%(arr%)%)", H.error_of(tf.io.read_npy, path))
    write_bytes(path, header_v1("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }", 128) .. "\0\0\0\1")
    assert.matches("big%-endian", H.error_of(tf.io.read_npy, path))
    write_bytes(path, header_v1("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", 128))
    assert.matches("holds dtype '<f2'; supported: float32", H.error_of(tf.io.read_npy, path))
    write_bytes(path, header_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", 128) .. "\1\0\0\0")
    assert.matches("is truncated: shape %(4,%) needs 16 bytes of data, the file has 4", H.error_of(tf.io.read_npy, path))
    os.remove(path)
    assert.matches("tf.io.read_npy: cannot open '" .. path .. "'", H.error_of(tf.io.read_npy, path))
  end)

  it("checks the preamble's length and parses the shape tuple strictly", function()
    local path = tmpfile()
    -- The message, less the line it names (the helper's pcall here).
    local function err() return H.without_line(H.error_of(tf.io.read_npy, path)) end
    local function with_shape(shape, data)
      write_bytes(path, header_v1("{'descr': '|u1', 'fortran_order': False, 'shape': " .. shape .. ", }", 256) ..
                        (data or ""))
    end
    write_bytes(path, "\147NUMPY\1")  -- 7 bytes: magic and the major version
    assert.equal("tf.io.read_npy: '" .. path .. "' is truncated: 7 bytes, fewer than the 10 of the NPY 1.0 " ..
                 "preamble (magic, version, header length)", err())
    local line = H.this_line() + 1
    local e = H.error_of(function() local a = tf.io.read_npy(path); return a end)
    assert.matches("(at spec/npy_spec.lua:" .. line .. ")", e, 1, true)
    write_bytes(path, "\147NUMPY\2\0\116\0")
    assert.matches("is truncated: 10 bytes, fewer than the 12 of the NPY 2.0 preamble", err())
    write_bytes(path, "\147NUMPY")
    assert.matches("is truncated: 6 bytes, fewer than the 10 of the NPY format preamble", err())
    write_bytes(path, "\147NUMPY\1\0\200\0{'descr'")
    assert.matches("is truncated inside its header", err())
    with_shape("(-3,)", "abc")
    assert.equal("tf.io.read_npy: '" .. path .. "' has an invalid shape (-3,): dimension 1 is '-3', " ..
                 "not a non-negative integer", err())
    with_shape("(2.5,)", "abcde")
    assert.matches("has an invalid shape %(2%.5,%): dimension 1 is '2%.5', not a non%-negative integer", err())
    with_shape("(2,,3)", "abcdef")
    assert.matches("has an invalid shape %(2,,3%): dimension 2 is ''", err())
    with_shape("(3)", "abc")
    assert.matches("has a shape %(3%) that is not a tuple %(one dimension is written %(n,%)%)", err())
    with_shape("(" .. string.rep("1, ", 35) .. ")", "a")
    assert.matches("^tf%.io%.read_npy: '.-' has rank 35 %(shape %(1, 1, .*%)%); moonflow arrays have at most 8 " ..
                   "dimensions$", err())
    with_shape("(1000000, 1000000)", "a")  -- checked against the file before anything is allocated
    assert.matches("is truncated: shape %(1000000, 1000000%) needs 1000000000000 bytes of data, the file has 1", err())
    -- What is valid: spaces, a trailing comma, Python 2's long suffix, ().
    with_shape("( 2 , 3, )", "abcdef")
    assert.same({2, 3}, tf.io.read_npy(path):shape())
    with_shape("(3L,)", "abc")
    assert.same({97, 98, 99}, tf.io.read_npy(path):totable())
    with_shape("()", "z")
    assert.equal(122, tf.io.read_npy(path):get())
    os.remove(path)
    local dir = H.tmpdir()
    assert.matches("tf.io.read_npy: '" .. dir .. "' cannot be read: Is a directory", H.error_of(tf.io.read_npy, dir))
    os.remove(dir)
  end)

  it("gives an array usable as a feed", function()
    local path = tmpfile()
    tf.io.write_npy(path, tf.array({{1, 2}, {3, 4}}))
    local x = tf.placeholder(tf.float32, {2, 2})
    local sess = tf.Session()
    assert.same({3, 7}, sess:run(tf.reduce_sum(x, 1), {[x] = tf.io.read_npy(path)}):totable())
    os.remove(path)
  end)
end)
