-- core_spec.lua — graphs, tensors, sessions, feeds and fetches, tf.Array, the FFI layout.
local tf = require("moonflow")
local ffi = require("ffi")
local C = require("moonflow.core").C
local H = require("spec.helpers")

-- The error raised by fn, which must fail.
local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- The line after the caller's: for errors that must quote the line that built an op.
local function next_line() return debug.getinfo(2, "l").currentline + 1 end

-- Plain (string) search, since messages contain pattern characters.
local function assert_contains(haystack, needle)
  assert(haystack:find(needle, 1, true), string.format("expected %q to contain %q", haystack, needle))
end

describe("graphs", function()
  before_each(function() tf.reset_default_graph() end)

  describe("op names", function()
    it("are unique per graph: Const, Const_1, Const_2", function()
      assert.equal("Const:0", tf.constant(1).name)
      assert.equal("Const_1:0", tf.constant(2).name)
      assert.equal("Const_2", tf.constant(3).op.name)
    end)

    it("take the name option and make it unique", function()
      assert.equal("a:0", tf.constant(1, {name = "a"}).name)
      assert.equal("a_1:0", tf.constant(1, {name = "a"}).name)
      assert.equal("x:0", tf.placeholder(tf.float32, {}, "x").name)
      assert.equal("x_1:0", tf.placeholder(tf.float32, {name = "x"}).name)
      assert.equal("i:0", tf.identity(tf.constant(1), "i").name)
    end)

    it("are prefixed by name scopes, nested ones too", function()
      local a, b, c = tf.name_scope("s", function()
        return tf.constant(1), tf.name_scope("inner", function() return tf.constant(2, {name = "b"}) end),
               tf.constant(3)
      end)
      assert.equal("s/Const:0", a.name)
      assert.equal("s/inner/b:0", b.name)
      assert.equal("s/Const_1:0", c.name)
      assert.equal("Const:0", tf.constant(4).name)  -- back at the root
    end)

    it("give a re-used scope name a suffix: s, s_1", function()
      tf.name_scope("s", function() tf.constant(1) end)
      local t = tf.name_scope("s", function() return tf.constant(1) end)
      assert.equal("s_1/Const:0", t.name)
    end)

    it("leave the scope when its function errors", function()
      assert.has_error(function() tf.name_scope("s", function() error("boom") end) end)
      assert.equal("Const:0", tf.constant(1).name)
    end)

    it("return what the scope function returns", function()
      local a, b = tf.name_scope("s", function() return 1, "two" end)
      assert.equal(1, a)
      assert.equal("two", b)
    end)
  end)

  describe("tostring of tensors", function()
    it("is TensorFlow's", function()
      assert.equal('Tensor("Const:0", shape=(), dtype=float32)', tostring(tf.constant(2)))
      assert.equal('Tensor("Const_1:0", shape=(2, 3), dtype=float32)', tostring(tf.constant({{1, 2, 3}, {4, 5, 6}})))
      assert.equal('Tensor("Const_2:0", shape=(3,), dtype=int32)', tostring(tf.constant({1, 2, 3}, tf.int32)))
      assert.equal('Tensor("x:0", shape=(?, 3), dtype=float32)', tostring(tf.placeholder(tf.float32, {-1, 3}, "x")))
      assert.equal('Tensor("Placeholder:0", shape=<unknown>, dtype=int64)', tostring(tf.placeholder(tf.int64)))
      assert.equal('Tensor("b:0", shape=(), dtype=bool)', tostring(tf.placeholder(tf.bool, {}, "b")))
    end)
  end)

  describe("tensor and op properties", function()
    it("name, dtype, op.name, op.type, op.inputs, op.outputs", function()
      local x = tf.placeholder(tf.float64, {2}, "x")
      local y = tf.identity(x, "y")
      assert.equal("y:0", y.name)
      assert.equal(tf.float64, y.dtype)
      assert.equal("float64", y.dtype.name)
      assert.equal("y", y.op.name)
      assert.equal("Identity", y.op.type)
      assert.equal("Placeholder", x.op.type)
      assert.equal(1, #y.op.inputs)
      assert.equal(x, y.op.inputs[1])
      assert.equal(0, #x.op.inputs)
      assert.equal(1, #y.op.outputs)
      assert.equal(y, y.op.outputs[1])
      assert.equal(0, y.value_index)
      assert.equal(tf.get_default_graph(), y.graph)
      assert.equal("<tf.Operation 'y' type=Identity>", tostring(y.op))
    end)

    it("op:get_attr reads shape attrs as a tf.TensorShape", function()
      local s = tf.placeholder(tf.float32, {2}).op:get_attr("shape")
      assert.equal(require("moonflow.graph").TensorShape, getmetatable(s))
      assert.same({2}, s:as_list())
      assert.equal(1, s.ndims)
      local p = tf.placeholder(tf.float32, {-1, 3}, "p").op:get_attr("shape")
      assert.same({-1, 3}, p:as_list())
      assert.is_false(p:is_fully_defined())
      assert.equal("(?, 3)", tostring(p))
      local scalar = tf.placeholder(tf.int32, {}).op:get_attr("shape")
      assert.same({}, scalar:as_list())
      assert.equal(0, scalar.ndims)
      -- no shape: an unknown rank, as TensorFlow's placeholder(shape=None)
      local u = tf.placeholder(tf.float64).op:get_attr("shape")
      assert.is_nil(u.dims)
      assert.is_nil(u.ndims)
      assert.equal("<unknown>", tostring(u))
      -- the other kinds still read as before, and a missing attr is an error
      local op = tf.placeholder(tf.float32, {2}, "q").op
      assert.equal(tf.float32, op:get_attr("dtype"))
      assert_contains(error_of(op.get_attr, op, "shapes"), "Operation 'q' has no attr named 'shapes'.")
    end)

    it("keep one Lua object per tensor and op", function()
      local x = tf.placeholder(tf.float32, {}, "x")
      local g = tf.get_default_graph()
      assert.equal(x, g:get_tensor_by_name("x:0"))
      assert.equal(x.op, g:get_operations()[1])
    end)

    it("dtypes print like TensorFlow's", function()
      assert.equal("<dtype: 'float32'>", tostring(tf.float32))
      assert.equal(tf.float64, tf.double)
      for _, name in ipairs({"float32", "float64", "int32", "int64", "bool", "uint8"}) do
        assert.equal(name, tf[name].name)
        assert.equal(tf[name], tf.as_dtype(name))
      end
    end)
  end)

  describe("static shapes", function()
    it("get_shape():as_list() uses -1 for unknown dimensions", function()
      assert.same({}, tf.constant(1):get_shape():as_list())
      assert.same({2, 3}, tf.constant({{1, 2, 3}, {4, 5, 6}}):get_shape():as_list())
      assert.same({-1, 3}, tf.placeholder(tf.float32, {-1, 3}):get_shape():as_list())
      assert.same({-1, 3}, tf.identity(tf.placeholder(tf.float32, {-1, 3})):get_shape():as_list())
    end)

    it("an unknown rank has no list", function()
      local s = tf.placeholder(tf.float32):get_shape()
      assert.is_nil(s.ndims)
      assert.equal("<unknown>", tostring(s))
      assert.is_false(s:is_fully_defined())
      assert_contains(error_of(function() return s:as_list() end), "unknown TensorShape")
    end)

    it("TensorShape helpers", function()
      local s = tf.placeholder(tf.float32, {2, 3}):get_shape()
      assert.equal(2, s.ndims)
      assert.is_true(s:is_fully_defined())
      assert.equal(6, s:num_elements())
      assert.is_nil(tf.placeholder(tf.float32, {-1, 3}):get_shape():num_elements())
      assert.equal(tf.TensorShape({2, 3}), s)
      assert.are_not.equal(tf.TensorShape({3, 2}), s)
    end)

    it("set_shape merges what is known", function()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      x:set_shape({2, -1})
      assert.same({2, 3}, x:get_shape():as_list())
      local u = tf.placeholder(tf.float32, nil, "u")
      u:set_shape({-1, 4})
      assert.equal("(?, 4)", tostring(u:get_shape()))
      u:set_shape(tf.TensorShape({5, -1}))
      assert.same({5, 4}, u:get_shape():as_list())
    end)

    it("set_shape rejects incompatible shapes and keeps the old one", function()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local err = error_of(function() x:set_shape({2, 4}) end)
      assert_contains(err, "(?, 3)")
      assert_contains(err, "(2, 4)")
      assert_contains(err, "incompatible")
      assert_contains(error_of(function() x:set_shape({3}) end), "incompatible")
      assert.same({-1, 3}, x:get_shape():as_list())
    end)
  end)

  describe("tf.Graph", function()
    it("as_default makes a graph the default inside fn and returns fn's results", function()
      local g = tf.Graph()
      local outer = tf.get_default_graph()
      assert.are_not.equal(g, outer)
      local c, same = g:as_default(function() return tf.constant(1), tf.get_default_graph() end)
      assert.equal(g, same)
      assert.equal(g, c.graph)
      assert.equal(outer, tf.get_default_graph())
      assert.equal("Const:0", c.name)               -- names are per graph
      assert.equal("Const:0", tf.constant(1).name)
    end)

    it("as_default restores the default graph when fn errors", function()
      local outer = tf.get_default_graph()
      local g = tf.Graph()
      assert.has_error(function() g:as_default(function() error("boom") end) end)
      assert.equal(outer, tf.get_default_graph())
    end)

    it("reset_default_graph starts a new empty graph", function()
      tf.constant(1)
      local old = tf.get_default_graph()
      tf.reset_default_graph()
      assert.are_not.equal(old, tf.get_default_graph())
      assert.equal(0, #tf.get_default_graph():get_operations())
      assert.equal("Const:0", tf.constant(1).name)
    end)

    it("reset_default_graph is refused inside as_default", function()
      local err = error_of(function() tf.Graph():as_default(function() tf.reset_default_graph() end) end)
      assert_contains(err, "reset_default_graph")
    end)

    it("get_operations lists ops in creation order", function()
      local a = tf.constant(1, {name = "a"})
      local x = tf.placeholder(tf.float32, {}, "x")
      tf.identity(a, "i")
      local names = {}
      for i, op in ipairs(tf.get_default_graph():get_operations()) do names[i] = op.name end
      assert.same({"a", "x", "i"}, names)
      assert.equal(x.op, tf.get_default_graph():get_operation_by_name("x"))
    end)

    it("get_tensor_by_name finds tensors and explains misses", function()
      local g = tf.get_default_graph()
      local y = tf.name_scope("s", function() return tf.identity(tf.constant(1), "y") end)
      assert.equal(y, g:get_tensor_by_name("s/y:0"))
      assert_contains(error_of(function() g:get_tensor_by_name("nope:0") end),
                      "The name 'nope:0' refers to a Tensor which does not exist. The operation, 'nope', " ..
                      "does not exist in the graph.")
      assert_contains(error_of(function() g:get_tensor_by_name("s/y:1") end), "only has 1 outputs")
      assert_contains(error_of(function() g:get_tensor_by_name("s/y") end), "<op_name>:<output_index>")
      assert_contains(error_of(function() g:get_operation_by_name("zz") end), "'zz'")
    end)

    it("finalize forbids new ops and names the Lua line", function()
      local g = tf.Graph()
      local c = g:as_default(function() return tf.constant(1) end)
      g:finalize()
      local line = next_line()
      local err = error_of(function() g:as_default(function() return tf.constant(2) end) end)
      assert_contains(err, "finalized")
      assert_contains(err, "core_spec.lua:" .. line)
      assert.equal(1, #g:get_operations())
      -- a finalized graph still runs
      assert.equal(1, tf.Session(g):run(c))
    end)

    it("tensors of another graph cannot be fetched", function()
      local g = tf.Graph()
      local other = g:as_default(function() return tf.constant(1) end)
      tf.constant(2)
      local sess = tf.Session()
      assert_contains(error_of(function() return sess:run(other) end), "not an element of this session's graph")
      -- The error names the fetch's line and the run's.
      local made = next_line()
      local far = g:as_default(function() local t = tf.constant(3); return t end)
      local line = next_line()
      local err = error_of(function() local v = sess:run({far}); return v end)
      assert.equal("Session:run: Fetch argument " .. tostring(far) .. " is not an element of this session's graph " ..
                   "(created at spec/core_spec.lua:" .. made .. ") (at spec/core_spec.lua:" .. line .. ")", err)
      assert_contains(error_of(function() local f = sess:make_callable(far); return f end),
                      "(created at spec/core_spec.lua:" .. made .. ")")
      assert.equal(2, sess:run("Const:0"))
    end)

    it("errors raised inside moonflow's Lua point at the user's line", function()
      local sess = tf.Session()
      local x = tf.placeholder(tf.float32, {2}, "x")
      local line = next_line()
      local err = error_of(function() local v = sess:run("nope:0"); return v end)
      assert.equal("Session:run: The name 'nope:0' refers to a Tensor which does not exist. " ..
                   "The operation, 'nope', does not exist in the graph. (at spec/core_spec.lua:" .. line .. ")", err)
      line = next_line()
      err = error_of(function() local v = sess:run("nope"); return v end)
      assert.equal("Session:run: The name 'nope' refers to an Operation not in the graph. (at spec/core_spec.lua:" ..
                   line .. ")",
                   err)
      line = next_line()
      err = error_of(function() local v = sess:run(x, {["nope:0"] = 1}); return v end)
      assert_contains(err, "The name 'nope:0' refers to a Tensor")
      assert_contains(err, "(at spec/core_spec.lua:" .. line .. ")")
      line = next_line()
      err = error_of(function() local p = tf.placeholder(tf.float32, {1, 1, 1, 1, 1, 1, 1, 1, 1}); return p end)
      assert.equal("Placeholder: attr 'shape': shapes have at most 8 dimensions, got 9 (at spec/core_spec.lua:" ..
                   line .. ")", err)
      local a = tf.array({1, 2})
      line = next_line()
      err = error_of(function() a:set(0, "x") end)
      assert.equal("Array:set: cannot convert 'string' to 'float': the value must be a number " ..
                   "(at spec/core_spec.lua:" .. line .. ")", err)
      assert.same({1, 2}, a:totable())
      line = next_line()
      err = error_of(function() local v = a:get(2); return v end)
      assert.equal("Array:get/set: index 2 is out of range for dimension 0 of size 2 (at spec/core_spec.lua:" ..
                   line .. ")", err)
      -- The graph and session stay usable.
      assert.same({1, 2}, sess:run(x, {["x:0"] = {1, 2}}):totable())
    end)

    it("ops built from code that is not a file name its chunk", function()
      local chunk = assert(loadstring("local tf = ...\nlocal p = tf.placeholder(tf.float32, {}, 'p')\nreturn p", "=stdin"))
      assert.equal("stdin:2", chunk(tf).op.origin)
      chunk = assert(loadstring("local tf = ...; local c = tf.constant(1); return c"))
      assert.equal('[string "local tf = ...; local c = tf.constant(1); ret..."]:1', chunk(tf).op.origin)
    end)

    it("an operator with a Lua number records the user's line on the op and on the constant it makes", function()
      local x = tf.placeholder(tf.float32, {}, "x")
      local line = next_line()
      local y = 2 * (x + 1)
      local add = y.op.inputs[2].op
      assert.equal("Add", add.type)
      assert.equal("Const", add.inputs[2].op.type)
      assert.equal("Const", y.op.inputs[1].op.type)
      for _, op in ipairs({y.op, add, add.inputs[2].op, y.op.inputs[1].op}) do
        assert.equal("spec/core_spec.lua:" .. line, op.origin)
      end
      local via_helper = (function() return tf.subtract(x, 3) end)()
      assert.equal("spec/core_spec.lua:" .. (line + 8), via_helper.op.origin)
      assert.equal("spec/core_spec.lua:" .. (line + 8), via_helper.op.inputs[2].op.origin)
    end)

    it("tensors of two graphs cannot meet in one op", function()
      local a = tf.constant(1)
      local b = tf.Graph():as_default(function() return tf.constant(2) end)
      local err = error_of(function() return tf.add(a, b) end)
      assert_contains(err, "must be from the same graph")
      assert_contains(error_of(function() return a + b end), "must be from the same graph")
      assert_contains(error_of(function() return a + b end), "core_spec.lua:")
    end)
  end)
end)

describe("sessions", function()
  before_each(function() tf.reset_default_graph() end)

  describe("fetches", function()
    it("a scalar comes back as a Lua number, a bool as a boolean", function()
      local sess = tf.Session()
      assert.equal(2.5, sess:run(tf.constant(2.5)))
      assert.equal(7, sess:run(tf.constant(7, tf.int64)))
      assert.equal(true, sess:run(tf.constant(true)))
      assert.equal(false, sess:run(tf.constant(false)))
    end)

    it("anything else comes back as a tf.Array", function()
      local v = tf.Session():run(tf.constant({{1, 2}, {3, 4}}, tf.int32))
      assert.is_true(tf.Array.is(v))
      assert.equal(tf.int32, v.dtype)
      assert.same({{1, 2}, {3, 4}}, v:totable())
    end)

    it("an op comes back as nil", function()
      local c = tf.constant(1)
      local sess = tf.Session()
      assert.is_nil(sess:run(c.op))
      assert.is_nil(sess:run(tf.no_op()))
      local r = sess:run({c, c.op, c})
      assert.equal(1, r[1])
      assert.is_nil(r[2])
      assert.equal(1, r[3])
    end)

    it("nested lists and maps keep their structure", function()
      local a = tf.constant(1, {name = "a"})
      local b = tf.constant({1, 2}, {name = "b"})
      local r = tf.Session():run({a, {a, {x = b, y = {a}}}, z = a})
      assert.equal(1, r[1])
      assert.equal(1, r[2][1])
      assert.same({1, 2}, r[2][2].x:totable())
      assert.equal(1, r[2][2].y[1])
      assert.equal(1, r.z)
    end)

    it("fetches by name: 'a:0' is a tensor, 'a' an op", function()
      tf.name_scope("s", function() tf.constant(3, {name = "a"}) end)
      local sess = tf.Session()
      assert.equal(3, sess:run("s/a:0"))
      assert.is_nil(sess:run("s/a"))
      assert.same({k = 3}, sess:run({k = "s/a:0"}))
      assert_contains(error_of(function() return sess:run("nope:0") end), "does not exist")
    end)

    it("rejects what cannot be fetched", function()
      assert_contains(error_of(function() return tf.Session():run(42) end), "Fetch argument")
    end)
  end)

  describe("feeds", function()
    it("by tensor and by name", function()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local y = tf.identity(x)
      local sess = tf.Session()
      assert.same({{1, 2, 3}, {4, 5, 6}}, sess:run(y, {[x] = {{1, 2, 3}, {4, 5, 6}}}):totable())
      assert.same({{7, 8, 9}}, sess:run(y, {["x:0"] = {{7, 8, 9}}}):totable())
    end)

    it("numbers, booleans, nested tables and Arrays, for every dtype", function()
      local sess = tf.Session()
      local cases = {
        {tf.float32, 1.5, {{0.5, -2}, {3, 4}}},
        {tf.float64, 0.1, {{0.1, 0.2}, {1e300, -1}}},
        {tf.int32, -7, {{1, -2}, {2147483647, -2147483648}}},
        {tf.int64, 2 ^ 40, {{2 ^ 40, -1}, {0, 5}}},
        {tf.uint8, 255, {{0, 1}, {254, 255}}},
        {tf.bool, true, {{true, false}, {false, true}}},
      }
      for _, case in ipairs(cases) do
        local dtype, scalar, matrix = case[1], case[2], case[3]
        local p = tf.placeholder(dtype, nil, "p_" .. dtype.name)
        local y = tf.identity(p)
        assert.equal(scalar, sess:run(y, {[p] = scalar}))
        local got = sess:run(y, {[p] = matrix})
        assert.equal(dtype, got.dtype)
        assert.same(matrix, got:totable())
        assert.same(matrix, sess:run(y, {[p] = tf.array(matrix, dtype)}):totable())
      end
    end)

    it("booleans feed numeric tensors as 1 and 0", function()
      local i = tf.placeholder(tf.int32, {}, "i")
      local sess = tf.Session()
      assert.equal(1, sess:run(i, {[i] = true}))
      assert.equal(0, sess:run(i, {[i] = false}))
    end)

    it("zero-copy from an FFI buffer with tf.Array.from_pointer", function()
      local buf = ffi.new("float[6]", {1, 2, 3, 4, 5, 6})
      local arr = tf.Array.from_pointer(buf, {2, 3}, tf.float32)
      assert.equal(ffi.cast("float *", buf), arr:data())
      assert.same({2, 3}, arr:shape())
      buf[4] = 50  -- the array sees the buffer: no copy was made
      assert.equal(50, arr:get(1, 1))
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local y = tf.identity(x)
      assert.same({{1, 2, 3}, {4, 50, 6}}, tf.Session():run(y, {[x] = arr}):totable())
    end)

    it("feeds any output of a wide op while the op computes its others", function()
      -- Unstack into 12 outputs; output 10 is fed from the caller's buffer.
      -- Plans once set aside only the first 8 fed outputs, so the kernel
      -- wrote output 10 into the caller's zero-copy array.
      local x = tf.placeholder(tf.float32, {12}, "x")
      local parts = tf.unstack(x)
      local buf = ffi.new("float[1]", 99)
      local fed = tf.Array.from_pointer(buf, {}, tf.float32)
      local xs = {}
      for i = 1, 12 do xs[i] = i end
      local got = tf.Session():run({parts[11], parts[3], parts[12]}, {[x] = tf.array(xs), [parts[11]] = fed})
      assert.same({99, 3, 12}, got)
      assert.equal(99, buf[0])
    end)

    it("tf.Array.from_pointer refuses what cannot hold the shape", function()
      local err = error_of(tf.Array.from_pointer, ffi.new("float[3]"), {3, 1000000}, tf.float32)
      assert_contains(err, "tf.Array.from_pointer: float [3] holds 12 bytes, but shape {3, 1000000} of float32 " ..
                      "needs 12000000 (at spec/core_spec.lua:")
      err = error_of(tf.Array.from_pointer, ffi.new("float[?]", 5), {2, 3}, tf.float32)
      assert_contains(err, "holds 20 bytes, but shape {2, 3} of float32 needs 24")
      assert_contains(error_of(tf.Array.from_pointer, ffi.new("int32_t[2]"), {2}, tf.float64), "needs 16")
      assert_contains(error_of(tf.Array.from_pointer, "abc", {3}, tf.float32), "expected FFI cdata")
      assert_contains(error_of(tf.Array.from_pointer, 12, {3}, tf.float32), "got a number")
      assert_contains(error_of(tf.Array.from_pointer, ffi.new("float[3]"), {-1, 3}, tf.float32),
                      "shape[1] is -1")
      -- Exactly enough is fine, and so is more (a prefix of a bigger buffer).
      local buf = ffi.new("double[2][3]", {{1, 2, 3}, {4, 5, 6}})
      assert.same({{1, 2}, {3, 4}, {5, 6}}, tf.Array.from_pointer(buf, {3, 2}, tf.float64):totable())
      assert.same({1, 2}, tf.Array.from_pointer(buf, {2}, tf.float64):totable())
      -- A raw pointer's extent is unknowable: it is trusted.
      local p = ffi.cast("double *", buf) + 3
      assert.same({4, 5, 6}, tf.Array.from_pointer(p, {3}, tf.float64, buf):totable())
      -- The error points at the caller's line.
      local line = next_line()
      err = error_of(function() local a = tf.Array.from_pointer(ffi.new("uint8_t[3]"), {1}, tf.int32); return a end)
      assert_contains(err, "core_spec.lua:" .. line)
    end)

    it("a missing feed says TensorFlow's words and where the placeholder was made", function()
      local line = next_line()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local y = tf.identity(x)
      local sess = tf.Session()
      for _, fetch in ipairs({x, y}) do
        local err = error_of(function() return sess:run(fetch) end)
        local want = "You must feed a value for placeholder tensor 'x' with dtype float32 and shape [-1,3]"
        assert.equal(want, err:sub(1, #want))
        assert_contains(err, "core_spec.lua:" .. line)
      end
      local scalar = tf.placeholder(tf.int32, {}, "s")
      assert_contains(error_of(function() return sess:run(scalar) end),
                      "You must feed a value for placeholder tensor 's' with dtype int32 and shape []")
    end)

    it("a feed of the wrong dtype is refused", function()
      local line = next_line()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local sess = tf.Session()
      local err = error_of(function() return sess:run(x, {[x] = tf.array({{1, 2, 3}}, tf.int32)}) end)
      assert.equal("Cannot feed value of dtype int32 for Tensor 'x:0', which has dtype float32; " ..
                   "cast the value or feed a matching dtype [[node x (defined at spec/core_spec.lua:" .. line .. ")]]",
                   err)
      -- The session stays usable.
      assert.same({{1, 2, 3}}, sess:run(x, {[x] = {{1, 2, 3}}}):totable())
      local b = tf.placeholder(tf.bool, {}, "b")
      assert_contains(error_of(function() return sess:run(b, {[b] = 1}) end), "b:0")
      assert_contains(error_of(function() return sess:run(x, {[x] = "text"}) end), 'expected numbers, got the string "text"')
    end)

    it("a feed of the wrong shape is refused", function()
      local line = next_line()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local sess = tf.Session()
      assert.equal("Cannot feed value of shape (3,) for Tensor 'x:0', which has shape '(?, 3)'" ..
                   " [[node x (defined at spec/core_spec.lua:" .. line .. ")]]",
                   error_of(function() return sess:run(x, {[x] = {1, 2, 3}}) end))
      assert.equal("Cannot feed value of shape (1, 2) for Tensor 'x:0', which has shape '(?, 3)'" ..
                   " [[node x (defined at spec/core_spec.lua:" .. line .. ")]]",
                   error_of(function() return sess:run(x, {[x] = {{1, 2}}}) end))
      -- A callable's feeds are checked the same way.
      local run = sess:make_callable(x, {x})
      assert_contains(error_of(run, {{1, 2}}), "[[node x (defined at spec/core_spec.lua:" .. line .. ")]]")
      assert_contains(error_of(function() return sess:run(x, {[x] = 1}) end), "shape ()")
      assert_contains(error_of(function() return sess:run(x, {[x] = {{1, 2}, {3}}}) end), "ragged")
    end)

    it("any tensor can be fed: the feed replaces its value for that run", function()
      local c = tf.constant(5, {name = "c"})
      local d = tf.identity(c, "d")
      local sess = tf.Session()
      assert.equal(5, sess:run(d))
      assert.equal(9, sess:run(d, {[c] = 9}))
      assert.equal(10, sess:run(d, {[d] = 10}))
      assert.equal(5, sess:run(d))
    end)

    it("a feed key that is not a tensor is refused", function()
      local c = tf.constant(1)
      assert_contains(error_of(function() return tf.Session():run(c, {[c.op] = 1}) end),
                      "Cannot interpret feed_dict key")
    end)

    it("FFI cdata feeds a tensor of fully defined shape, without copying", function()
      local x = tf.placeholder(tf.float32, {2}, "x")
      local sess = tf.Session()
      assert.same({2, 4}, sess:run(x * 2, {[x] = ffi.new("float[2]", {1, 2})}):totable())
      -- zero-copy: the fetched placeholder is the fed memory itself
      local buf = ffi.new("float[2]", {3, 4})
      local r = sess:run(x, {[x] = buf})
      buf[1] = 40
      assert.same({3, 40}, r:totable())
      -- a raw pointer (size unknown: trusted), a const pointer, a void*; other dtypes
      assert.same({3, 40}, sess:run(x, {[x] = ffi.cast("const float *", buf)}):totable())
      assert.same({3, 40}, sess:run(x, {[x] = ffi.cast("void *", buf)}):totable())
      local m = tf.placeholder(tf.int64, {2, 2}, "m")
      assert.same({{1, 2}, {3, 4}}, sess:run(m, {[m] = ffi.new("int64_t[4]", {1, 2, 3, 4})}):totable())
      local b = tf.placeholder(tf.bool, {}, "b")
      assert.is_true(sess:run(b, {[b] = ffi.new("bool[1]", true)}))
      -- a view of the fed memory keeps it alive after the feed is gone
      local v = sess:run(tf.reshape(x, {2, 1}), {[x] = ffi.new("float[2]", {5, 6})})
      collectgarbage(); collectgarbage()
      local junk = {}
      for i = 1, 100 do junk[i] = ffi.new("float[2]", {-1, -1}) end
      assert.same({{5}, {6}}, v:totable())
      -- make_callable takes cdata too
      local f = sess:make_callable(x + 1, {x})
      assert.same({8, 9}, f(ffi.new("float[2]", {7, 8})):totable())
      assert.same({4, 41}, f(ffi.cast("float *", buf)):totable())
    end)

    it("a cdata feed is refused when too small, of another type, or the shape is not fully defined", function()
      local x = tf.placeholder(tf.float32, {2}, "x")
      local u = tf.placeholder(tf.float32, {-1, 2}, "u")
      local sess = tf.Session()
      assert_contains(error_of(function() return sess:run(x, {[x] = ffi.new("float[1]")}) end),
                      "feed for x:0: tf.Array.from_pointer: float [1] holds 4 bytes, but shape {2} of float32 needs 8")
      assert_contains(error_of(function() return sess:run(x, {[x] = ffi.new("double[2]")}) end),
                      "cannot feed a cdata of type double [2] to a float32 tensor: it must hold float values")
      local ok, err = pcall(sess.run, sess, u, {[u] = ffi.new("float[4]")}); local line = debug.getinfo(1, "l").currentline
      assert.is_false(ok)
      assert_contains(err, "feed for u:0: cannot feed a cdata pointer to a tensor of shape (?, 2), which is not " ..
                      "fully defined; use tf.Array.from_pointer(ptr, shape, dtype)")
      assert_contains(err, "core_spec.lua:" .. line)
      local f = sess:make_callable(u, {u})
      assert_contains(error_of(f, ffi.new("float[4]")), "use tf.Array.from_pointer(ptr, shape, dtype)")
      -- with from_pointer the shape is given
      assert.same({{1, 2}, {3, 4}},
                  f(tf.Array.from_pointer(ffi.new("float[4]", {1, 2, 3, 4}), {2, 2}, tf.float32)):totable())
    end)
  end)

  describe("execution", function()
    it("prunes to the fetches: an unfed placeholder off the path is no error", function()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local unused = tf.identity(x)
      local c = tf.constant(3)
      local sess = tf.Session()
      assert.equal(3, sess:run(tf.identity(c)))
      assert.is_truthy(unused)
      -- fed placeholders that the fetches do not need are fine too
      assert.equal(3, sess:run(c, {[x] = {{1, 2, 3}}}))
    end)

    it("caches one plan per (feeds, fetches, targets) signature", function()
      local x = tf.placeholder(tf.float32, {}, "x")
      local y = tf.identity(x)
      local sess = tf.Session()
      for i = 1, 100 do assert.equal(i, sess:run(y, {[x] = i})) end
      assert.equal(1, sess:num_plans())
      sess:run({y, y}, {[x] = 1})
      assert.equal(2, sess:num_plans())
      sess:run(y, {[x] = 1})
      assert.equal(2, sess:num_plans())
    end)

    it("reuses buffers: the same plan allocates nothing new after its first run", function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      local y = (x + 1) * 2
      local z = tf.reduce_sum(y)
      local sess = tf.Session()
      local feed = {[x] = {1, 2, 3, 4}}
      assert.equal(28, sess:run(z, feed))
      local after_first = sess:num_allocations()
      assert.is_true(after_first > 0)
      for _ = 1, 100 do sess:run(z, feed) end
      assert.equal(after_first, sess:num_allocations())
      -- array results are reused too once the caller has dropped them (the
      -- result lives in a callee's frame, so the collector can take it)
      local function run_and_drop() assert.same({4, 6, 8, 10}, sess:run(y, feed):totable()) end
      run_and_drop()
      collectgarbage()
      collectgarbage()
      local after_array = sess:num_allocations()
      for _ = 1, 10 do
        run_and_drop()
        collectgarbage()
        collectgarbage()
      end
      assert.equal(after_array, sess:num_allocations())
    end)

    it("writes elementwise results in place only over inputs that die there", function()
      local x = tf.placeholder(tf.float32, {3}, "x")
      local a = x * 2
      local doubled = a + a          -- a dies here, read twice while written in place
      local b = a + 1                -- a still live: must not be overwritten
      local c = a * 3
      local sess = tf.Session()
      local feed = {[x] = {1, 2, 3}}
      local r = sess:run({doubled, b, c}, feed)
      assert.same({4, 8, 12}, r[1]:totable())
      assert.same({3, 5, 7}, r[2]:totable())
      assert.same({6, 12, 18}, r[3]:totable())
      -- a fetched intermediate is never overwritten by a later op
      r = sess:run({a, a + 1}, feed)
      assert.same({2, 4, 6}, r[1]:totable())
      assert.same({3, 5, 7}, r[2]:totable())
      -- nor is a fed value or a constant
      local k = tf.constant({1, 1, 1})
      r = sess:run({x + 1, k + 1, x}, feed)
      assert.same({2, 3, 4}, r[1]:totable())
      assert.same({2, 2, 2}, r[2]:totable())
      assert.same({1, 2, 3}, r[3]:totable())
      assert.same({1, 1, 1}, sess:run(k):totable())
      -- x*2+1 in place allocates one buffer per run at most
      local y = x * 2 + 1
      sess:run(y, feed)
      local before = sess:num_allocations()
      sess:run(y, feed)
      assert.is_true(sess:num_allocations() - before <= 1)
    end)

    it("make_callable returns what run returns", function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      local k = tf.placeholder(tf.float32, {}, "k")
      local y = tf.identity(x)
      local sess = tf.Session()
      local f = sess:make_callable(y, {x})
      assert.same(sess:run(y, {[x] = {1, 2}}):totable(), f({1, 2}):totable())
      local g = sess:make_callable({y, {kk = k}}, {"x:0", k})
      local from_callable = g({3, 4}, 5)
      local from_run = sess:run({y, {kk = k}}, {[x] = {3, 4}, [k] = 5})
      assert.same(from_run[1]:totable(), from_callable[1]:totable())
      assert.equal(from_run[2].kk, from_callable[2].kk)
      local scalar = sess:make_callable(k, {k})
      for i = 1, 10 do assert.equal(i, scalar(i)) end
      local no_feeds = sess:make_callable(tf.constant(7))
      assert.equal(7, no_feeds())
      assert_contains(error_of(function() return scalar(nil) end), "k:0")
      assert.equal(3, scalar(3))
    end)

    it("close is idempotent; a closed session refuses to run", function()
      local c = tf.constant(1)
      local sess = tf.Session()
      local f = sess:make_callable(c)
      assert.equal(1, sess:run(c))
      sess:close()
      sess:close()
      assert_contains(error_of(function() return sess:run(c) end), "closed Session")
      assert_contains(error_of(function() return f() end), "closed Session")
      assert.equal(1, tf.Session():run(c))  -- the graph is fine
    end)

    it("sessions are independent, and a session can be made for another graph", function()
      local g = tf.Graph()
      local c = g:as_default(function() return tf.constant(4) end)
      assert.equal(4, tf.Session(g):run(c))
      assert.equal(4, tf.Session({graph = g}):run(c))
    end)

    it("errors leave the session usable", function()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local y = tf.identity(x)
      local sess = tf.Session()
      assert.has_error(function() sess:run(y) end)
      assert.has_error(function() sess:run(y, {[x] = {1}}) end)
      assert.has_error(function() sess:run(y, {[x] = tf.array({{1, 2, 3}}, tf.int64)}) end)
      assert.has_error(function() sess:run("missing:0") end)
      assert.same({{1, 2, 3}}, sess:run(y, {[x] = {{1, 2, 3}}}):totable())
      -- and the graph too
      assert.equal(2, sess:run(tf.constant(2)))
    end)
  end)
end)

describe("tf.Array", function()
  it("builds from nested tables with a dtype", function()
    local a = tf.array({{1, 2, 3}, {4, 5, 6}}, tf.int32)
    assert.equal(tf.int32, a.dtype)
    assert.same({2, 3}, a:shape())
    assert.equal(2, a:rank())
    assert.equal(6, a:size())
    assert.same({{1, 2, 3}, {4, 5, 6}}, a:totable())
    assert.equal(tf.int64, tf.array({1}, "int64").dtype)
  end)

  it("numbers default to float32, booleans to bool", function()
    assert.equal(tf.float32, tf.array({1, 2}).dtype)
    assert.equal(tf.bool, tf.array({true}).dtype)
    assert.equal(tf.float32, tf.array(3).dtype)
    assert.same({}, tf.array(3):shape())
    assert.equal(3, tf.array(3):totable())
  end)

  it("get and set use 0-based indices and check bounds", function()
    local a = tf.array({{1, 2}, {3, 4}}, tf.int32)
    assert.equal(1, a:get(0, 0))
    assert.equal(3, a:get(1, 0))
    a:set(1, 0, 30)
    assert.equal(30, a:get(1, 0))
    assert.same({{1, 2}, {30, 4}}, a:totable())
    assert_contains(error_of(function() return a:get(2, 0) end), "out of range")
    assert_contains(error_of(function() return a:get(0, -1) end), "out of range")
    assert_contains(error_of(function() return a:get(0) end), "expected 2 indices")
    local b = tf.array({true, false})
    b:set(1, true)
    assert.same({true, true}, b:totable())
  end)

  it("data() is a typed pointer to the elements", function()
    local a = tf.array({1.5, 2.5}, tf.float64)
    local p = a:data()
    assert.is_true(ffi.istype("double *", p))
    p[1] = 7
    assert.equal(7, a:get(1))
    assert.is_true(ffi.istype("int32_t *", tf.array({1}, tf.int32):data()))
  end)

  it("converts between dtypes", function()
    assert.same({1, 2}, tf.array(tf.array({1.7, 2}), tf.int32):totable())
    assert.same({true, false}, tf.array(tf.array({3, 0}, tf.int32), tf.bool):totable())
  end)

  it("prints like NumPy", function()
    -- NumPy's array2string(a, separator=", "); spec/printing_spec.lua has the rest
    assert.equal("[[1, 2],\n [3, 4]]", tostring(tf.array({{1, 2}, {3, 4}}, tf.int32)))
    assert.equal("[1. , 2.5]", tostring(tf.array({1, 2.5})))
    assert.equal("[ True, False]", tostring(tf.array({true, false})))
    assert.equal("[[[1, 2],\n  [3, 4]],\n\n [[5, 6],\n  [7, 8]]]",
                 tostring(tf.array({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, tf.uint8)))
    assert.equal("3.", tostring(tf.array(3)))
    assert.equal("-4", tostring(tf.array(-4, tf.int64)))
    assert.equal("[]", tostring(tf.array({}, tf.float32)))
    local big = tf.Array.new(tf.int32, {2, 1000})
    for j = 0, 999 do big:set(1, j, j) end
    assert.equal("[[  0,   0,   0, ...,   0,   0,   0],\n [  0,   1,   2, ..., 997, 998, 999]]", tostring(big))
  end)

  it("rejects ragged tables and values of the wrong kind", function()
    assert_contains(error_of(function() return tf.array({{1, 2}, {3}}) end), "ragged")
    -- an empty first list does not make the others empty: {5, 7} is not dropped
    local line = next_line()
    local _, err = pcall(tf.constant, {{}, {5, 7}})
    assert.equal("tf.constant: ragged nested table: expected 0 elements at depth 2, got 2 (at " ..
                 "spec/core_spec.lua:" .. line .. ")", err)
    assert_contains(error_of(function() return tf.constant({{{}}, {{1}}}) end),
                    "ragged nested table: expected 0 elements at depth 3, got 1")
    assert.same({2, 0}, tf.constant({{}, {}}):get_shape():as_list())
    assert.has_error(function() return tf.array({1, "x"}) end)
    assert.has_error(function() return tf.array({1, 2}, tf.bool) end)
  end)

  it("converts only Lua lists, naming the key of a table that is not one", function()
    tf.reset_default_graph()
    local tail = " is not a list; values must be numbers, booleans or nested lists"
    -- the error names the function given the table and its argument
    local function refused(fn, key, who)
      assert_contains(error_of(fn), (who or "tf.constant") .. ": a Lua table with " .. key .. tail)
    end
    refused(function() return tf.convert_to_tensor({a = 1}) end, "key 'a'", "tf.convert_to_tensor: argument x")
    refused(function() return tf.constant({a = 1}) end, "key 'a'")
    refused(function() return tf.constant(1) + {a = tf.constant(2)} end, "key 'a'", "tf.add: argument y")
    refused(function() return tf.constant({1, 2, x = 3}) end, "key 'x'")
    refused(function() return tf.convert_to_tensor({tf.constant(1), x = 3}) end, "key 'x'",
            "tf.convert_to_tensor: argument x")
    refused(function() return tf.constant({{1, 2}, {3, [2.5] = 4}}) end, "key 2.5")
    refused(function() return tf.constant({1, nil, 3}) end, "a hole at index 2 (nil)")
    assert_contains(error_of(function() return tf.array({b = 2}) end), "tf.array: a Lua table with key 'b'" .. tail)
    local x = tf.placeholder(tf.float32)
    local sess = tf.Session()
    assert_contains(error_of(function() return sess:run(x, {[x] = {a = 1}}) end),
                    "feed for Placeholder:0: tf.array: a Lua table with key 'a'" .. tail)
    -- the empty table stays the empty list, and lists still convert
    local empty = tf.constant({})
    assert.same({0}, empty.shape:as_list())
    assert.same({}, sess:run(empty):totable())
    assert.same({{1, 2}, {3, 4}}, sess:run(tf.constant({{1, 2}, {3, 4}})):totable())
    assert.same({3, 5}, sess:run(tf.constant(1) + {tf.constant(2), 4}):totable())
  end)

  it("copies a fetched array before a set, so graph values never change", function()
    local c = tf.constant({5, 6})
    local v = tf.Variable({1, 2}, {name = "v"})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local a, b = unpack(sess:run({c, v}))
    a:set(1, 9)
    b:set(0, 100)
    assert.same({5, 9}, a:totable())
    assert.same({100, 2}, b:totable())
    assert.same({5, 6}, sess:run(c):totable())
    assert.same({1, 2}, sess:run(v):totable())
    local own = a:copy()
    own:set(0, 7)
    assert.same({5, 9}, a:totable())
    assert.same({7, 9}, own:totable())
  end)

  it("round-trips through tf.constant", function()
    local a = tf.array({{1, 2}, {3, 4}}, tf.int64)
    local c = tf.constant(a)
    assert.equal(tf.int64, c.dtype)
    assert.same({2, 2}, c:get_shape():as_list())
    assert.same(a:totable(), tf.Session():run(c):totable())
  end)
end)

describe("the FFI binding", function()
  it("has the C library's struct layouts (cdefs are generated from the header)", function()
    for _, name in ipairs({"mf_shape", "mf_output", "mf_session_config", "mf_device_stats", "mf_tstring"}) do
      assert.equal(tonumber(C.mf_abi_sizeof(name)), ffi.sizeof(name), name)
    end
    assert.equal(0, tonumber(C.mf_abi_sizeof("no_such_type")))
  end)

  it("gives the library's version as tf.VERSION, the header's MF_VERSION", function()
    local header = H.read("src/include/moonflow.h"):match('#define MF_VERSION "([^"]+)"')
    assert.equal(header, tf.VERSION)
    assert.truthy(tf.VERSION:match("^%d+%.%d+%.%d+$"), tf.VERSION)
  end)

  it("finds the library without LD_LIBRARY_PATH", function()
    assert.is_string(require("moonflow.core").library_path)
    assert_contains(require("moonflow.core").library_path, "libmoonflow.so")
  end)
end)

describe("run-time shape inference", function()
  before_each(function() tf.reset_default_graph() end)

  it("follows a fed constant that shaped an op at build time", function()
    local shape = tf.constant({2, 3}, tf.int32)
    local r = tf.reshape(tf.range(6), shape)
    assert.same({2, 3}, r:get_shape():as_list())
    local sess = tf.Session()
    assert.same({{0, 1}, {2, 3}, {4, 5}}, sess:run(r, {[shape] = {3, 2}}):totable())
    assert.same({{0, 1, 2}, {3, 4, 5}}, sess:run(r):totable())
  end)

  it("describes a variable of unknown shape by its current value", function()
    local v = tf.Variable(tf.zeros({3}), {name = "v", validate_shape = false})
    assert.is_nil(v:get_shape().dims)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.same({1, 1, 1}, sess:run(v:read_value() + 1):totable())
  end)
end)

describe("argument errors name the caller's line", function()
  it("for a ragged table given to tf.array and a bad tf.Session argument", function()
    local line = H.this_line() + 1
    local _, err = pcall(tf.array, {{1, 2}, {3}})
    assert.equal("tf.array: ragged nested table: expected 2 elements at depth 2, got 1 (at spec/core_spec.lua:" ..
                 line .. ")", err)
    line = H.this_line() + 1
    _, err = pcall(tf.Session, 5)
    assert.equal("tf.Session(graph_or_options): expected a tf.Graph or an options table, got 5 " ..
                 "(at spec/core_spec.lua:" .. line .. ")", err)
    assert.matches("tf.Session: graph must be a tf.Graph, got 3", H.error_of(tf.Session, {graph = 3}), 1, true)
    assert.is_truthy(tf.Session({}).graph == tf.get_default_graph())
  end)

  it("and the function and its argument that a value fit for no tensor was given to", function()
    tf.reset_default_graph()
    local x = tf.placeholder(tf.float32, {2, 2}, "x")
    local sess = tf.Session()
    local expect = "expected a Tensor or a Lua number, boolean, string, nested list or tf.Array, got "
    local function refused(message, fn)  -- fn: a one-line function whose call is no tail call
      local _, err = pcall(fn)
      assert.equal(message .. " (at spec/core_spec.lua:" .. debug.getinfo(fn, "S").linedefined .. ")", err)
    end
    refused('tf.matmul: argument a: expected numbers, got the string "abc"', function() tf.matmul("abc", x) end)
    refused("tf.add: argument x: " .. expect .. "nil", function() tf.add(nil, 1) end)
    refused('tf.add: argument y: expected numbers, got the string "s"', function() local _ = x + "s" end)
    refused("tf.matmul: argument b: " .. expect .. "a function", function() x:matmul(print) end)
    refused("tf.nn.relu: argument features: " .. expect .. tostring(sess), function() tf.nn.relu(sess) end)
    refused("tf.reshape: argument x: " .. expect .. "nil", function() tf.reshape(nil, {4}) end)
    refused('Session:run: feeds must be a table {[tensor or "name:0"] = value}, got 5',
            function() sess:run(x, 5) end)
    refused('Session:run: feeds must be a table {[tensor or "name:0"] = value}, got the string "x:0"',
            function() sess:run(x, "x:0") end)
    refused("Session:make_callable: feed_list must be a list of tensors, got " .. tostring(x),
            function() sess:make_callable(x, x) end)
    -- the graph and the session still work
    assert.same({{2, 0}, {0, 2}}, sess:run(tf.matmul(x, {{2, 0}, {0, 2}}), {[x] = {{1, 0}, {0, 1}}}):totable())
  end)
end)

-- LuaJIT blacklists a trace start that keeps aborting, and every trace
-- through it aborts from then on: a run path whose small loops got
-- blacklisted after a long loop of runs ran interpreted for good, 10x slower
-- (session.lua's `each`). Counted from the JIT's own abort events, not timed.
describe("the run path under LuaJIT", function()
  it("is never blacklisted, however many runs (sess:run, callables, fetched arrays)", function()
    -- In a process of its own: the JIT's state is global, and what other specs
    -- ran (host ops, whose runs go through host.lua) would count here.
    local out, status = H.run_script("spec/scripts/jit_blacklist.lua", "")
    assert.equal(0, status, out)
    assert.equal("blacklisted: none\n", out)
  end)
end)
