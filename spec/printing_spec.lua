-- Printing the NumPy and TensorFlow way: arrays (tostring is NumPy's
-- array2string with ", ", the REPL's repr adds shape and dtype) against
-- strings NumPy printed (spec/fixtures/printing.py made printing.lua), and
-- the reprs of tensors, variables, shapes, operations, graphs, sessions and
-- Lua values against TensorFlow 1.x's formats.
local tf = require("moonflow")
local ffi = require("ffi")
local printing = require("moonflow.printing")
local cases = dofile("spec/fixtures/printing.lua")

-- The fixture's values as a tf.Array of its dtype and shape.
local function array_of(case)
  local dtype = tf[case.dtype]
  local a = tf.Array.new(dtype, case.shape)
  local data, values = a:data(), case.values
  for i = 0, a:size() - 1 do
    if values.arange then
      local v = i / values.arange
      if dtype == tf.float32 then v = ffi.new("float[1]", v)[0] end
      data[i] = v
    else
      data[i] = values[i + 1]
    end
  end
  return a
end

describe("printing arrays as NumPy does", function()
  for _, case in ipairs(cases) do
    it(case.name .. ": tostring and repr", function()
      local a = array_of(case)
      assert.equal(case.str, tostring(a))
      assert.equal(case.repr, printing.repr(a))
    end)
  end

  it("prints int64 exactly, past 2^53", function()
    local a = tf.Array.new(tf.int64, {3})
    a:data()[0] = 9223372036854775807LL
    a:data()[1] = -9223372036854775807LL - 1
    a:data()[2] = 2 ^ 53 + 1
    assert.equal("[ 9223372036854775807, -9223372036854775808,     9007199254740992]", tostring(a))
  end)

  it("prints fetched values and tf.array results as grids", function()
    local sess = tf.Session()
    local m = sess:run(tf.constant({{1, 20}, {3, 4}}))
    assert.equal("[[ 1., 20.],\n [ 3.,  4.]]", tostring(m))
    assert.equal("tf.Array([[ 1., 20.],\n          [ 3.,  4.]], shape=(2, 2), dtype=float32)", printing.repr(m))
  end)
end)

describe("printing graph objects as TensorFlow 1.x does", function()
  before_each(function() tf.reset_default_graph() end)

  it("tensors: Tensor(...) by tostring, <tf.Tensor ...> as repr", function()
    local a = tf.random_normal({10, 10})
    local z = tf.matmul(a, a)
    assert.equal('Tensor("MatMul:0", shape=(10, 10), dtype=float32)', tostring(z))
    assert.equal("<tf.Tensor 'MatMul:0' shape=(10, 10) dtype=float32>", printing.repr(z))
    local x = tf.placeholder(tf.int32, {-1, 128}, "x")
    assert.equal("<tf.Tensor 'x:0' shape=(?, 128) dtype=int32>", printing.repr(x))
    assert.equal("<tf.Tensor 'y:0' shape=<unknown> dtype=float32>", printing.repr(tf.placeholder(tf.float32, nil, "y")))
  end)

  it("shapes: (?, 128) by tostring, TensorShape([Dimension(None), Dimension(128)]) as repr", function()
    local s = tf.placeholder(tf.float32, {-1, 128}):get_shape()
    assert.equal("(?, 128)", tostring(s))
    assert.equal("TensorShape([Dimension(None), Dimension(128)])", printing.repr(s))
    assert.equal("TensorShape([])", printing.repr(tf.TensorShape({})))
    assert.equal("TensorShape(None)", printing.repr(tf.TensorShape(nil)))
    assert.equal("(3,)", tostring(tf.TensorShape({3})))
  end)

  it("variables, operations, graphs and sessions", function()
    local w = tf.Variable({{1, 2}, {3, 4}}, {name = "w"})
    assert.equal("<tf.Variable 'w:0' shape=(2, 2) dtype=float32>", tostring(w))
    assert.equal("<tf.Variable 'w:0' shape=(2, 2) dtype=float32>", printing.repr(w))
    local op = tf.add(w, 1, "plus").op
    assert.equal("<tf.Operation 'plus' type=Add>", tostring(op))
    local g = tf.get_default_graph()
    local n = g:num_ops()
    assert.equal("<tf.Graph with " .. n .. " ops>", tostring(g))
    local sess = tf.Session()
    assert.equal("<tf.Session on <tf.Graph with " .. n .. " ops>>", tostring(sess))
    sess:close()
    assert.equal("<tf.Session on <tf.Graph with " .. n .. " ops> (closed)>", tostring(sess))
    assert.equal("<dtype: 'float32'>", printing.repr(tf.float32))
  end)

  it("Lua values: strings quoted, tables as constructors, nesting bounded", function()
    assert.equal('"a\\nb"', printing.repr("a\nb"))
    assert.equal("3.5", printing.repr(3.5))
    assert.equal("nil", printing.repr(nil))
    assert.equal("{1, 2, 3}", printing.repr({1, 2, 3}))
    assert.equal('{1, 2, b = "x", name = 5, ["odd key"] = true}', printing.repr({1, 2, name = 5, b = "x", ["odd key"] = true}))
    assert.equal("{shape = {2, 2}, t = <tf.Tensor 'Const:0' shape=(2,) dtype=float32>}",
                 printing.repr({shape = {2, 2}, t = tf.constant({1, 2})}))
    assert.equal("{{{{...}}}}", printing.repr({{{{{1}}}}}))
    local loop = {}
    loop.self = loop
    assert.equal("{self = {...}}", printing.repr(loop))
    local long = {}
    for i = 1, 150 do long[i] = i end
    assert.matches("^{1, 2, 3, .*, 100, %.%.%.}$", printing.repr(long))
  end)
end)
