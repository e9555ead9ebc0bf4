-- Graph files (tf.train.write_graph / tf.train.import_graph) and g:to_dot().
local tf = require("moonflow")
local ffi = require("ffi")
local G = require("moonflow.graph")
local H = require("spec.helpers")
local tmpdir, read = H.tmpdir, H.read
local C = require("moonflow.core").C

-- Every attribute of an op as {name = printable value}, through the C API.
local function attrs_of(op)
  local out = {}
  for i = 0, C.mf_op_num_attrs(op.ptr) - 1 do
    local name = ffi.string(C.mf_op_attr_name(op.ptr, i))
    local kind = tonumber(C.mf_op_attr_kind(op.ptr, i))
    if kind == tonumber(C.MF_ATTR_GRAPH) then
      out[name] = "graph of " .. C.mf_graph_num_ops(C.mf_op_attr_graph(op.ptr, name)) .. " ops"
    elseif kind == tonumber(C.MF_ATTR_SHAPE) then
      local s = ffi.new("mf_shape")
      assert.is_true(C.mf_op_attr_shape(op.ptr, name, s))
      out[name] = "shape " .. tostring(G.TensorShape.from_c(s))
    else
      local v = op:get_attr(name)
      out[name] = type(v) == "table" and not tf.Array.is(v) and "{" .. table.concat(v, ",") .. "}" or tostring(v)
    end
  end
  return out
end

-- Asserts that g2 has the ops of g, one for one: names, types, inputs,
-- control inputs, devices, attributes and static shapes.
local function assert_same_graph(g, g2)
  local a, b = g:get_operations(), g2:get_operations()
  assert.equal(#a, #b)
  for i, op in ipairs(a) do
    local op2 = b[i]
    assert.equal(op.name, op2.name)
    assert.equal(op.type, op2.type)
    assert.equal(op.device, op2.device)
    assert.equal(op.origin, op2.origin)
    local ins, ins2 = {}, {}
    for k, t in ipairs(op.inputs) do ins[k] = t.name end
    for k, t in ipairs(op2.inputs) do ins2[k] = t.name end
    assert.same(ins, ins2)
    local cs, cs2 = {}, {}
    for k, c in ipairs(op.control_inputs) do cs[k] = c.name end
    for k, c in ipairs(op2.control_inputs) do cs2[k] = c.name end
    assert.same(cs, cs2)
    assert.same(attrs_of(op), attrs_of(op2))
    for k, t in ipairs(op.outputs) do
      assert.equal(tostring(t:get_shape()), tostring(op2.outputs[k]:get_shape()))
      assert.equal(t.dtype, op2.outputs[k].dtype)
    end
  end
end

describe("graph files", function()
  local dir
  before_each(function()
    tf.reset_default_graph()
    dir = tmpdir()
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("round-trip ops, attributes of every kind, devices and shapes, and run to the same results", function()
    local x = tf.placeholder(tf.float32, {-1, 3}, "x")
    local k = tf.constant({{1, 2}, {3, 4}, {5, 6}}, {name = "k"})                  -- tensor attr (float32)
    local y = tf.matmul(x, k, {transpose_a = false, name = "y"})                   -- bool attrs
    local t = tf.transpose(y, {1, 0})                                              -- ints (a Const)
    local s = tf.strided_slice(x, {0, 1}, {-1, 3}, {1, 1}, {end_mask = 1})          -- ints + int attrs
    local p = tf.pad(s, {{1, 1}, {0, 1}}, {mode = "REFLECT"})                       -- string attr
    local l = tf.nn.leaky_relu(p - 2, 0.25)                                         -- float attr
    local c = tf.cast(tf.reduce_sum(l, 1), tf.float64)                              -- type attr
    local i64 = tf.constant({2 ^ 40 + 1, -3}, tf.int64)
    local b = tf.constant({true, false}, tf.bool)
    local sel = tf.where(b, i64, i64 * 2)
    local dev = G.op{"Identity", inputs = {c}, name = "on_cpu", device = "/device:CPU:0"}
    local ordered = tf.control_dependencies({dev}, function() return tf.identity(t, "after") end)
    ordered:set_shape({2, -1})                                                      -- refined shape
    local g = tf.get_default_graph()
    local path = tf.train.write_graph(g, dir, "g.json")
    assert.equal(dir .. "/g.json", path)

    local g2 = tf.train.import_graph(path)
    assert.are_not.equal(g, g2)
    assert.are.equal(g, tf.get_default_graph())  -- the default graph is untouched
    assert_same_graph(g, g2)
    assert.equal("/device:CPU:0", g2:get_operation_by_name("on_cpu").device)
    assert.equal("(2, ?)", tostring(g2:get_tensor_by_name("after:0"):get_shape()))

    local feed = {{1, -2, 3}, {0.5, 4, -1}}
    local fetch = {ordered, dev, sel, l}
    local want = tf.Session():run(fetch, {[x] = feed})
    local got = tf.Session(g2):run({"after:0", "on_cpu:0", sel.name, l.name}, {["x:0"] = feed})
    for i = 1, 4 do assert.same(want[i]:totable(), got[i]:totable()) end
    assert.same({2 ^ 40 + 1, -6}, got[3]:totable())
  end)

  it("round-trip tf.cond and tf.while_loop (functions, captures, variables inside) to the same results", function()
    local x = tf.placeholder(tf.float32, {}, "x")
    local w = tf.Variable(2.0, {name = "w"})
    local pred = tf.placeholder(tf.bool, {}, "pred")
    local c = tf.cond(pred, function() return x * w end, function() return x - w end)
    local n, acc = tf.while_loop(function(i, a) return tf.less(i, 5) end,
                                 function(i, a) return i + 1, a * x + w end,
                                 {tf.constant(0, tf.int32), tf.constant(1.0)})
    local inc = tf.cond(tf.greater(x, 0), function() return tf.assign_add(w, 1.0) end,
                        function() return w:read_value() end)
    local out = tf.identity(c + acc, "out")
    local steps = tf.identity(n, "steps")
    local updated = tf.identity(inc, "updated")
    local grad = tf.gradients(acc, x)[1]
    local dx = tf.identity(grad, "dx")
    local init = tf.global_variables_initializer()
    local g = tf.get_default_graph()
    local path = tf.train.write_graph(g, dir .. "/control.json")
    local g2 = tf.train.import_graph(path)
    assert_same_graph(g, g2)

    local s1, s2 = tf.Session(), tf.Session(g2)
    s1:run(init)
    s2:run(g2:get_operation_by_name(init.name))
    for _, case in ipairs({{1.5, true}, {-0.5, false}, {0.75, true}}) do
      local feeds1 = {[x] = case[1], [pred] = case[2]}
      local feeds2 = {["x:0"] = case[1], ["pred:0"] = case[2]}
      local a = s1:run({out, steps, dx, updated}, feeds1)
      local b = s2:run({"out:0", "steps:0", "dx:0", "updated:0"}, feeds2)
      assert.same(a, b)
      assert.equal(5, b[2])
    end
    -- gradients can also be built anew in the imported graph, through the loop
    local g2dx = g2:as_default(function()
      return tf.gradients(g2:get_tensor_by_name(acc.name), g2:get_tensor_by_name("x:0"))[1]
    end)
    assert.equal(s1:run(dx, {[x] = 0.5}), s2:run(g2dx, {["x:0"] = 0.5}))
  end)

  it("keep variables and collections, so initializers, savers and training work on the imported graph", function()
    tf.set_random_seed(7)
    local x = tf.placeholder(tf.float32, {-1, 2}, "x")
    local yt = tf.placeholder(tf.float32, {-1, 1}, "y_true")
    local w = tf.get_variable("dense/w", {2, 1}, {initializer = tf.random_normal_initializer(0, 1, 3)})
    local bias = tf.Variable(tf.zeros({1}), {name = "bias"})
    local pred = tf.add(tf.matmul(x, w), bias, "pred")
    local loss = tf.reduce_mean(tf.square(pred - yt), {name = "loss"})
    local step = tf.train.get_or_create_global_step()
    local train = tf.train.AdamOptimizer(0.1):minimize(loss, {global_step = step})
    tf.add_to_collection(tf.GraphKeys.TRAIN_OP, train)
    tf.add_to_collection("numbers", 2.5)
    tf.add_to_collection("numbers", "text")
    tf.add_to_collection("numbers", {not_saved = true})
    local g = tf.get_default_graph()
    local init = tf.global_variables_initializer()
    local path = tf.train.write_graph(g, dir .. "/model.json")
    local feeds = {[x] = {{1, 2}, {3, -1}, {0, 1}}, [yt] = {{1}, {2}, {-1}}}

    local sess = tf.Session()
    sess:run(init)
    for _ = 1, 5 do sess:run(train, feeds) end
    local ckpt = tf.train.Saver():save(sess, dir .. "/model.ckpt", {global_step = step})
    assert.equal(dir .. "/model.ckpt-5", ckpt)
    local want_loss = sess:run(loss, feeds)
    sess:run(train, feeds)
    local want_next = sess:run(loss, feeds)

    local g2 = tf.train.import_graph(path)
    g2:as_default(function()
      local names = {}
      for i, v in ipairs(tf.global_variables()) do names[i] = v.op.name end
      local want = {}
      for i, v in ipairs(g:get_collection("variables")) do want[i] = v.op.name end
      assert.same(want, names)
      assert.is_true(#names >= 6)  -- w, bias, global_step, beta powers, w/Adam, w/Adam_1, ...
      assert.equal(2, #tf.trainable_variables())
      assert.same({2.5, "text"}, tf.get_collection("numbers"))
      assert.equal("global_step", tf.train.get_or_create_global_step().op.name)
      -- tf.get_variable finds the imported variable for reuse
      tf.variable_scope("dense", {reuse = true}, function()
        assert.equal("dense/w:0", tf.get_variable("w").name)
      end)
      local s2 = tf.Session(g2)
      s2:run(tf.global_variables_initializer())
      tf.train.Saver():restore(s2, tf.train.latest_checkpoint(dir))
      local feeds2 = {["x:0"] = feeds[x], ["y_true:0"] = feeds[yt]}
      assert.equal(want_loss, s2:run("loss:0", feeds2))
      s2:run(tf.get_collection(tf.GraphKeys.TRAIN_OP)[1], feeds2)
      assert.equal(want_next, s2:run("loss:0", feeds2))
      assert.equal(6, s2:run(tf.train.get_or_create_global_step()))
    end)
  end)

  it("reproduce seeded random ops", function()
    tf.set_random_seed(123)
    local r = tf.identity(tf.random_normal({3}) + tf.random_uniform({3}, {seed = 9}), "r")
    local g2 = tf.train.import_graph(tf.train.write_graph(tf.get_default_graph(), dir .. "/r.json"))
    assert.same(tf.Session():run(r):totable(), tf.Session(g2):run("r:0"):totable())
    assert.equal(123, C.mf_graph_seed(g2.ptr))
  end)

  it("report files that are not graph files", function()
    local f = assert(io.open(dir .. "/bad.json", "wb"))
    f:write('{"format": "moonflow.graph", "version": 1, "ops": [{"name": "a", "type": "NoSuchOp"}]}')
    f:close()
    assert.is_truthy(H.error_of(tf.train.import_graph, dir .. "/bad.json"):find("NoSuchOp", 1, true))
    f = assert(io.open(dir .. "/bad.json", "wb"))
    f:write('{"format": "moonflow.graph", "version": 1, "ops": [{"name": "a", "type": "Identity", "inputs": ["b:0"]}]}')
    f:close()
    assert.is_truthy(H.error_of(tf.train.import_graph, dir .. "/bad.json"):find("b:0", 1, true))
    f = assert(io.open(dir .. "/bad.json", "wb"))
    f:write('{"format": "moonflow.graph", "ops": [')
    f:close()
    assert.is_truthy(H.error_of(tf.train.import_graph, dir .. "/bad.json"):find("not valid JSON", 1, true))
    f = assert(io.open(dir .. "/bad.json", "wb"))
    f:write('{"format": "something else"}')
    f:close()
    assert.is_truthy(H.error_of(tf.train.import_graph, dir .. "/bad.json"):find("not a moonflow graph", 1, true))
    assert.is_truthy(H.error_of(tf.train.import_graph, dir .. "/none.json"):find("NotFound", 1, true))
  end)

  it("name the file, the op and the attribute in errors", function()
    local path = dir .. "/bad.json"
    local function import(text)
      local f = assert(io.open(path, "wb"))
      f:write(text)
      f:close()
      return H.without_line(H.error_of(tf.train.import_graph, path))
    end
    assert.equal("tf.train.import_graph: graph file " .. path .. ": op 'a': input b:0 is not an earlier op's output",
                 import('{"format": "moonflow.graph", "version": 1, "ops": [{"name": "a", "type": "Identity", ' ..
                        '"inputs": ["b:0"]}]}'))
    assert.equal("tf.train.import_graph: graph file " .. path .. ": op 'p', attribute dtype: unknown dtype float99",
                 import('{"format": "moonflow.graph", "version": 1, "ops": [{"name": "p", "type": "Placeholder", ' ..
                        '"attrs": {"dtype": {"type": "float99"}}}]}'))
  end)

  it("keep tf.Print printing through Lua, and refuse tf.lua_func (a Lua function)", function()
    local x = tf.placeholder(tf.float32, {2}, "x")
    local y = tf.cond(tf.constant(true), function() return tf.Print(x * 2, {x}, "x = ") end, function() return x end)
    tf.identity(y, "y")
    local g2 = tf.train.import_graph(tf.train.write_graph(tf.get_default_graph(), dir .. "/p.json"))
    local lines = {}
    local old = tf.set_print_sink(function(text) lines[#lines + 1] = text end)
    local ok, v = pcall(function() return tf.Session(g2):run("y:0", {["x:0"] = {1, 2}}) end)
    tf.set_print_sink(old)
    assert.is_true(ok, tostring(v))
    assert.same({2, 4}, v:totable())
    assert.same({"x = [1 2]"}, lines)
    tf.lua_func(function(a) return a end, {x}, {tf.float32})
    local err = H.error_of(tf.train.write_graph, tf.get_default_graph(), dir .. "/lf.json")
    assert.is_truthy(err:find("tf.lua_func", 1, true))
    assert.is_nil(io.open(dir .. "/lf.json"))
  end)

  it("are JSON with constants inline as base64", function()
    tf.constant({1, 2}, {name = "c"})
    local text = read(tf.train.write_graph(tf.get_default_graph(), dir .. "/c.json"))
    assert.is_truthy(text:find('\n "format": "moonflow.graph",\n', 1, true), text)
    -- one op a line, keys sorted; 1.0f, 2.0f little-endian
    assert.is_truthy(text:find('\n "ops": [\n  {"attrs":{"value":{"tensor":' ..
                               '{"data":"AACAPwAAAEA=","dtype":"float32","shape":[2]}}},"control_inputs":[],' ..
                               '"inputs":[],"name":"c",', 1, true), text)
  end)

  it("check a constant's data against its declared shape before allocating it", function()
    tf.constant(1, {name = "c"})
    local text = read(tf.train.write_graph(tf.get_default_graph(), dir .. "/big.json"))
    -- 2^32 + 1 float32 elements would be 16 GiB; the file holds 4 bytes.
    local big = text:gsub('"shape":%[%]}', '"shape":[4294967297]}', 1)
    local f = assert(io.open(dir .. "/big2.json", "w")); f:write(big); f:close()
    local t0 = os.clock()
    local err = H.error_of(tf.train.import_graph, dir .. "/big2.json")
    assert.is_true(os.clock() - t0 < 1)
    assert.is_truthy(err:find("the data (8 characters of base64) is not the 17179869188 bytes " ..
                              "that shape [4294967297] of float32 needs", 1, true), err)
    -- A shape whose element count overflows 64 bits is refused the same way.
    local huge = text:gsub('"shape":%[%]}', '"shape":["9223372036854775807",4,4]}', 1)
    f = assert(io.open(dir .. "/big3.json", "w")); f:write(huge); f:close()
    err = H.error_of(tf.train.import_graph, dir .. "/big3.json")
    assert.is_truthy(err:find("is not the", 1, true), err)
    assert.is_truthy(err:find("shape [9223372036854775807, 4, 4] of float32", 1, true), err)
    -- The untampered file still loads: 4 bytes of base64 for one float32.
    local g2 = tf.train.import_graph(dir .. "/big.json")
    assert.equal(1, tf.Session(g2):run("c:0"))
  end)
end)

describe("g:to_dot()", function()
  before_each(function() tf.reset_default_graph() end)

  it("draws ops as nodes and tensors as edges labeled with their shapes", function()
    local x = tf.placeholder(tf.float32, {-1, 3}, "x")
    local w = tf.constant(H.values(6), {shape = {3, 2}, name = "w"})
    local y = tf.matmul(x, w, {name = "y"})
    local init = tf.no_op("first")
    tf.control_dependencies({init}, function() tf.reduce_sum(y, {name = "total"}) end)
    local dot = tf.get_default_graph():to_dot()
    assert.equal("digraph moonflow {", dot:match("^[^\n]+"))
    assert.equal("}", dot:match("([^\n]+)\n$"))
    local id = {}
    for node, label in dot:gmatch('(n%d+) %[label="([^"]+)"') do id[label] = node end
    assert.is_truthy(id["x\\nPlaceholder"])
    assert.is_truthy(id["w\\nConst"])
    assert.is_truthy(id["y\\nMatMul"])
    assert.is_truthy(id["total\\nSum"])
    local function edge(a, b, label)
      return dot:find(string.format('%s -> %s [label="%s"]', id[a], id[b], label), 1, true)
    end
    assert.is_truthy(edge("x\\nPlaceholder", "y\\nMatMul", "(?, 3)"))
    assert.is_truthy(edge("w\\nConst", "y\\nMatMul", "(3, 2)"))
    assert.is_truthy(edge("y\\nMatMul", "total\\nSum", "(?, 2)"))
    assert.is_truthy(dot:find(id["first\\nNoOp"] .. " -> " .. id["total\\nSum"] .. " [style=dashed", 1, true))
  end)

  it("draws the functions of control flow as clusters", function()
    local p = tf.placeholder(tf.bool, {}, "p")
    local r = tf.cond(p, function() return tf.constant(1) end, function() return tf.constant(2) end)
    tf.while_loop(function(i) return tf.less(i, 3) end, function(i) return i + 1 end, {tf.constant(0)})
    assert.is_truthy(r)
    local dot = tf.get_default_graph():to_dot()
    assert.is_truthy(dot:find('label="cond / then"', 1, true))
    assert.is_truthy(dot:find('label="cond / else"', 1, true))
    assert.is_truthy(dot:find('label="while / body"', 1, true))
    assert.is_truthy(dot:find("lhead=cluster_1", 1, true))
    local _, nclusters = dot:gsub("subgraph cluster_", "")
    assert.equal(4, nclusters)
  end)
end)
