-- math_spec.lua — elementwise ops: arithmetic, comparisons, logic, casts, broadcasting, operators.
local tf = require("moonflow")
local H = require("spec.helpers")

-- Calls fn(...), which must fail, and checks that the message contains each of
-- `needles` (plain text; a string or a list). Returns the message.
local function expect_error(needles, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  err = tostring(err)
  for _, needle in ipairs(type(needles) == "table" and needles or {needles}) do
    assert(err:find(needle, 1, true), string.format("expected %q to contain %q", err, needle))
  end
  return err
end

-- "math_spec.lua:N" for the line below the caller's: errors about an op quote where it was built.
local function line_below() return "math_spec.lua:" .. (debug.getinfo(2, "l").currentline + 1) end

-- Runs t in a fresh session; arrays come back as nested tables.
local function eval(t, feeds)
  local v = tf.Session():run(t, feeds)
  if tf.Array.is(v) then return v:totable() end
  return v
end

local assert_values = H.assert_values

-- Tolerance for a dtype: floats are compared with a relative one.
local function tol_of(dtype)
  if dtype == tf.float32 then return 1e-6 end
  if dtype == tf.float64 then return 1e-12 end
  return 0
end

local all_dtypes = {tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.bool}
local numeric = {tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8}
local floats = {tf.float32, tf.float64}
local signed = {tf.float32, tf.float64, tf.int32, tf.int64}

local e = math.exp(1)

describe("unary ops", function()
  before_each(function() tf.reset_default_graph() end)

  -- {function name, dtypes, input, expected}
  local cases = {
    {"negative", signed, {1, -2, 0}, {-1, 2, 0}},
    {"negative", {tf.uint8}, {1, 0, 255}, {255, 0, 1}},  -- wraps like TensorFlow
    {"abs", signed, {-3, 2, 0}, {3, 2, 0}},
    {"abs", floats, {-1.5, 0.25}, {1.5, 0.25}},
    {"abs", {tf.uint8}, {0, 200}, {0, 200}},
    {"sign", signed, {-5, 0, 7}, {-1, 0, 1}},
    {"sign", floats, {-0.5, 0.5}, {-1, 1}},
    {"sign", {tf.uint8}, {0, 9}, {0, 1}},
    {"square", signed, {-3, 0, 4}, {9, 0, 16}},
    {"square", floats, {0.5, -1.5}, {0.25, 2.25}},
    {"square", {tf.uint8}, {3, 15, 16}, {9, 225, 0}},
    {"sqrt", floats, {4, 9, 0.25, 0}, {2, 3, 0.5, 0}},
    {"rsqrt", floats, {4, 0.25, 1}, {0.5, 2, 1}},
    {"exp", floats, {0, 1, -1}, {1, e, 1 / e}},
    {"log", floats, {1, e, 0}, {0, 1, -math.huge}},
    {"log1p", floats, {0, e - 1}, {0, 1}},
    {"log1p", {tf.float64}, {1e-20}, {1e-20}},  -- where log(1 + x) would give 0
    {"sin", floats, {0, math.pi / 2, -math.pi / 6}, {0, 1, -0.5}},
    {"cos", floats, {0, math.pi, math.pi / 3}, {1, -1, 0.5}},
    {"tanh", floats, {0, 100, -100, 0.5}, {0, 1, -1, 0.46211715726000974}},
    {"sigmoid", floats, {0, 1000, -1000, 2, -2}, {0.5, 1, 0, 0.8807970779778823, 0.11920292202211755}},
    {"floor", floats, {-1.5, 1.5, 2, -0.25}, {-2, 1, 2, -1}},
    {"ceil", floats, {-1.5, 1.5, 2, 0.25}, {-1, 2, 2, 1}},
    -- half to even, as TensorFlow (not away from zero as Lua's or C's round)
    {"round", floats, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.4, 0.6, -3.7}, {0, 2, 2, 0, -2, -2, 0, 1, -4}},
    {"round", {tf.int32, tf.int64, tf.uint8}, {3, 0, 7}, {3, 0, 7}},
    {"logical_not", {tf.bool}, {true, false}, {false, true}},
  }
  for _, c in ipairs(cases) do
    local fname, dtypes, input, want = c[1], c[2], c[3], c[4]
    for _, dtype in ipairs(dtypes) do
      it(string.format("%s on %s", fname, dtype.name), function()
        local y = tf[fname](tf.constant(input, dtype))
        assert.equal(dtype, y.dtype)
        assert.same({#input}, y:get_shape():as_list())
        assert_values(want, eval(y), tol_of(dtype))
      end)
    end
  end

  it("keep the shape of any rank, scalars and empty tensors included", function()
    assert_values({{1, 2}, {3, 4}}, eval(tf.abs(tf.constant({{-1, 2}, {-3, 4}}))))
    assert.equal(3, eval(tf.negative(tf.constant(-3))))
    local x = tf.placeholder(tf.float32, {-1, 3})
    local y = tf.exp(x)
    assert.same({-1, 3}, y:get_shape():as_list())
    local v = tf.Session():run(y, {[x] = tf.Array.new(tf.float32, {0, 3})})
    assert.same({0, 3}, v:shape())
  end)

  it("run over long tensors (blocks and tail of the element loops)", function()
    local input, want = {}, {}
    for i = 1, 37 do input[i], want[i] = i - 19, math.abs(i - 19) end
    assert_values(want, eval(tf.abs(tf.constant(input, tf.int32))))
  end)

  it("reject integer inputs for float-only ops, naming the op and tf.cast", function()
    local i = tf.constant({1, 2}, tf.int32)
    for _, fname in ipairs({"rsqrt", "log1p", "tanh", "sigmoid", "floor", "ceil"}) do
      local err = expect_error("use tf.cast", tf[fname], i)
      assert.matches("x has dtype int32, but %w+ takes only float32, float64; use tf.cast", err)
    end
    for _, fname in ipairs({"sqrt", "exp", "log", "sin", "cos"}) do
      local err = expect_error("use tf.cast", tf[fname], i)
      assert.matches("x has dtype int32, but %w+ takes only float32, float64, complex64, complex128; use tf.cast", err)
    end
    expect_error("Sqrt: x has dtype int32, but Sqrt", tf.sqrt, i)
    expect_error("takes only float32, float64, int32, int64, uint8", tf.negative, tf.constant(true))
    expect_error("takes only bool", tf.logical_not, tf.constant(1))
  end)

  it("are registered under TensorFlow's other names too", function()
    local x = tf.constant({-0.5, 2})
    assert.equal(tf.sigmoid, tf.nn.sigmoid)
    assert.equal(tf.tanh, tf.nn.tanh)
    assert.equal(tf.exp, tf.math.exp)
    assert.equal(tf.negative, tf.math.neg)
    assert_values({0.5, 2}, eval(x:abs()))
    assert.equal("Sigmoid", tf.nn.sigmoid(x).op.type)
    assert.equal("r:0", tf.sqrt(x, "r").name)
    assert.equal("s:0", tf.square(x, {name = "s"}).name)
  end)
end)

describe("binary ops", function()
  before_each(function() tf.reset_default_graph() end)

  -- {function name, dtypes, x, y, expected}
  local cases = {
    {"add", numeric, {1, 2, 3}, {4, 5, 6}, {5, 7, 9}},
    {"add", floats, {0.5, -1}, {0.25, 1}, {0.75, 0}},
    {"add", {tf.uint8}, {200}, {100}, {44}},                         -- wraps
    {"add", {tf.int32}, {2147483647}, {1}, {-2147483648}},           -- wraps
    {"subtract", numeric, {5, 7, 9}, {1, 2, 3}, {4, 5, 6}},
    {"subtract", signed, {1}, {3}, {-2}},
    {"subtract", {tf.uint8}, {1}, {3}, {254}},
    {"multiply", numeric, {2, 3, 0}, {4, 5, 6}, {8, 15, 0}},
    {"multiply", signed, {-2, 3}, {3, -2}, {-6, -6}},
    {"multiply", floats, {1.5}, {-0.5}, {-0.75}},
    {"multiply", {tf.int64}, {4294967296}, {3}, {12884901888}},
    {"floordiv", signed, {7, -7, 7, -7, 6}, {2, 2, -2, -2, 3}, {3, -4, -4, 3, 2}},
    {"floordiv", floats, {7.5, -7.5, 1}, {2, 2, -0.5}, {3, -4, -2}},
    {"floordiv", {tf.uint8}, {7, 200}, {2, 3}, {3, 66}},
    {"mod", signed, {7, -7, 7, -7, 6}, {2, 2, -2, -2, 3}, {1, 1, -1, -1, 0}},
    {"mod", floats, {7.5, -7.5, 7.5, -7.5}, {2, 2, -2, -2}, {1.5, 0.5, -0.5, -1.5}},
    {"mod", {tf.uint8}, {7, 200}, {2, 7}, {1, 4}},
    -- From spec/fixtures/op_coverage_values.py: rounding toward zero (C's / and %), unlike floordiv and mod.
    {"truncatediv", {tf.int32, tf.int64}, {7, -7, 7, -7, 6, 0, -1}, {2, 2, -2, -2, 3, -5, 4}, {3, -3, -3, 3, 2, 0, 0}},
    {"truncatemod", {tf.int32, tf.int64}, {7, -7, 7, -7, 6, 0, -1}, {2, 2, -2, -2, 3, -5, 4}, {1, -1, 1, -1, 0, 0, -1}},
    {"truncatediv", {tf.uint8}, {7, 200, 255}, {2, 3, 255}, {3, 66, 1}},
    {"truncatemod", {tf.float32, tf.float64}, {7.5, -7.5, 7.5, -7.5, 1.0, math.huge, 0 / 0, 3.0, -0.0},
     {2.0, 2.0, -2.0, -2.0, 0.0, 2.0, 1.0, math.huge, 5.0}, {1.5, -1.5, 1.5, -1.5, 0 / 0, 0 / 0, 0 / 0, 3.0, -0.0}},
    {"pow", numeric, {2, 3, 5, 1}, {7, 3, 0, 7}, {128, 27, 1, 1}},
    {"pow", signed, {-2, -3}, {3, 2}, {-8, 9}},
    {"pow", floats, {9, 2, 4}, {0.5, -1, -0.5}, {3, 0.5, 0.5}},
    {"pow", {tf.int64}, {2}, {40}, {1099511627776}},
    {"maximum", numeric, {1, 5, 3}, {4, 2, 3}, {4, 5, 3}},
    {"maximum", signed, {-1, -5}, {-4, 2}, {-1, 2}},
    {"minimum", numeric, {1, 5, 3}, {4, 2, 3}, {1, 2, 3}},
    {"minimum", signed, {-1, -5}, {-4, 2}, {-4, -5}},
  }
  for _, c in ipairs(cases) do
    local fname, dtypes, x, y, want = c[1], c[2], c[3], c[4], c[5]
    for _, dtype in ipairs(dtypes) do
      it(string.format("%s on %s", fname, dtype.name), function()
        local z = tf[fname](tf.constant(x, dtype), tf.constant(y, dtype))
        assert.equal(dtype, z.dtype)
        assert_values(want, eval(z), tol_of(dtype))
      end)
    end
  end

  it("divide is true division: floats stay, int32/int64 give float64, uint8 gives float32", function()
    local want = {{tf.float32, tf.float32}, {tf.float64, tf.float64}, {tf.int32, tf.float64},
                  {tf.int64, tf.float64}, {tf.uint8, tf.float32}}
    for _, w in ipairs(want) do
      local z = tf.divide(tf.constant({7, 1, 9}, w[1]), tf.constant({2, 4, 3}, w[1]))
      assert.equal(w[2], z.dtype)
      assert_values({3.5, 0.25, 3}, eval(z), tol_of(w[2]))
    end
    local i = tf.constant({-7, 7}, tf.int32)
    assert_values({-3.5, 3.5}, eval(i / 2))
    assert.equal(tf.float64, (i / 2).dtype)
  end)

  it("divide by zero gives inf and nan for floats and ints alike", function()
    local z = tf.divide(tf.constant({1, -1, 0}, tf.int32), tf.constant({0, 0, 0}, tf.int32))
    assert_values({math.huge, -math.huge, 0 / 0}, eval(z))
    assert_values({math.huge}, eval(tf.divide(tf.constant({1}), tf.constant({0}))))
  end)

  it("integer floordiv and mod by zero fail with a clear error and the session keeps working", function()
    local sess = tf.Session()
    local x = tf.constant({7, 8}, tf.int32)
    local zero = tf.constant({2, 0}, tf.int32)
    local where = line_below()
    local q = tf.floordiv(x, zero)
    expect_error({"Integer division by zero", where}, sess.run, sess, q)
    expect_error("Integer division by zero", sess.run, sess, x % tf.constant(0, tf.int32))
    expect_error("Integer division by zero", sess.run, sess,
                 tf.floordiv(tf.constant(1, tf.uint8), tf.constant(0, tf.uint8)))
    assert_values({3, 4}, sess:run(tf.floordiv(x, 2)):totable())
    -- floats follow IEEE: x // 0 is inf, x % 0 is nan
    assert_values({math.huge, 0 / 0},
                  eval({tf.floordiv(tf.constant(1), tf.constant(0)), tf.mod(tf.constant(1), tf.constant(0))}))
  end)

  it("truncatediv, truncatemod: division by zero fails, INT_MIN / -1 wraps, dtypes of TF's CPU kernels", function()
    local sess = tf.Session()
    local x = tf.constant({7, -8}, tf.int32)
    local where = line_below()
    local q = tf.truncatediv(x, tf.constant({2, 0}, tf.int32))
    expect_error({"TruncateDiv: Integer division by zero", where}, sess.run, sess, q)
    expect_error("TruncateMod: Integer division by zero", sess.run, sess, tf.truncatemod(x, tf.constant(0, tf.int32)))
    local min = tf.constant(-2147483648, tf.int32)
    assert_values({-2147483648, 0}, sess:run({tf.truncatediv(min, -1), tf.truncatemod(min, -1)}))
    -- rank 0, broadcasting and empty tensors
    assert.equal(-3, sess:run(tf.truncatediv(tf.constant(-7, tf.int64), tf.constant(2, tf.int64))))
    local column, row = tf.constant({{-2}, {-7}}, tf.int32), tf.constant({2, -2}, tf.int32)
    assert_values({{-1, 1}, {-3, 3}}, eval(tf.truncatediv(column, row)))
    assert.same({0, 2}, sess:run(tf.truncatemod(tf.zeros({0, 2}), tf.ones({2}))):shape())
    expect_error({"x and y have dtype float32, but TruncateDiv takes only int32, int64, uint8", line_below()},
                 function() return (tf.truncatediv(tf.constant({7.5}), tf.constant({2}))) end)
    expect_error("x and y have dtype uint8, but TruncateMod takes only float32, float64, int32, int64",
                 tf.truncatemod, tf.constant({7}, tf.uint8), tf.constant({2}, tf.uint8))
    expect_error("x has dtype int32 but y has dtype float32; use tf.cast",
                 tf.truncatemod, tf.constant({7}, tf.int32), tf.constant({2}, tf.float32))
    assert.equal("TruncateDiv", tf.math.truncatediv(x, x).op.type)
    assert.equal("TruncateMod", x:truncatemod(x).op.type)
  end)

  it("integers to negative integer powers fail", function()
    local sess = tf.Session()
    local z = tf.pow(tf.constant({2, 2}, tf.int32), tf.constant({1, -1}, tf.int32))
    expect_error("Integers to negative integer powers are not allowed", sess.run, sess, z)
    assert.equal(8, sess:run(tf.pow(tf.constant(2, tf.int32), 3)))
  end)

  -- {function name, x, y, expected}: each runs on every numeric dtype.
  local comparisons = {
    {"equal", {1, 2, 3}, {1, 5, 3}, {true, false, true}},
    {"not_equal", {1, 2, 3}, {1, 5, 3}, {false, true, false}},
    {"less", {1, 2, 3}, {2, 2, 2}, {true, false, false}},
    {"less_equal", {1, 2, 3}, {2, 2, 2}, {true, true, false}},
    {"greater", {1, 2, 3}, {2, 2, 2}, {false, false, true}},
    {"greater_equal", {1, 2, 3}, {2, 2, 2}, {false, true, true}},
  }
  for _, c in ipairs(comparisons) do
    it(c[1] .. " on every numeric dtype gives bool", function()
      for _, dtype in ipairs(numeric) do
        local z = tf[c[1]](tf.constant(c[2], dtype), tf.constant(c[3], dtype))
        assert.equal(tf.bool, z.dtype)
        assert_values(c[4], eval(z))
      end
    end)
  end

  it("add_n sums in order when its output takes over the buffer of a later input", function()
    -- Of the three inputs only x * 3 dies at the sum (the constants live on),
    -- so the output takes its buffer: the first partial sum must not
    -- overwrite it before its turn.
    local x = tf.placeholder(tf.float32, {3000})
    local xs, ones, twos = {}, {}, {}
    for i = 1, 3000 do xs[i], ones[i], twos[i] = i, 1, 2 end
    local y = tf.add_n({tf.constant(ones), tf.constant(twos), x * 3})
    local r = tf.Session():run(y, {[x] = xs})
    for i = 1, 3000, 499 do assert.equal(3 + 3 * i, r:get(i - 1)) end
  end)

  it("equal and not_equal take bool; ordering comparisons do not", function()
    local a, b = tf.constant({true, true, false}), tf.constant({true, false, false})
    assert_values({true, false, true}, eval(tf.equal(a, b)))
    assert_values({false, true, false}, eval(tf.not_equal(a, b)))
    expect_error("Less: x and y have dtype bool, but Less takes only", tf.less, a, b)
  end)

  it("compare NaN as unequal to everything", function()
    local nan = tf.constant({0 / 0, 1})
    assert_values({false, true}, eval(tf.equal(nan, tf.constant({0 / 0, 1}))))
    assert_values({true, false}, eval(tf.not_equal(nan, nan)))
    assert_values({false, false}, eval(tf.less(nan, tf.constant({1, 1}))))
  end)

  it("logical_and, logical_or, logical_xor: truth tables", function()
    local a, b = tf.constant({true, true, false, false}), tf.constant({true, false, true, false})
    assert_values({true, false, false, false}, eval(tf.logical_and(a, b)))
    assert_values({true, true, true, false}, eval(tf.logical_or(a, b)))
    assert_values({false, true, true, false}, eval(tf.logical_xor(a, b)))
    assert_values({false, false, true, true}, eval(tf.logical_and(tf.logical_not(a), true)))
    expect_error("takes only bool; use tf.cast", tf.logical_or, tf.constant(1), tf.constant(0))
  end)

  it("registered op types, aliases, methods and names", function()
    local x, y = tf.constant({6}), tf.constant({4})
    assert.equal("Add:0", tf.add(x, y).name)
    local types = {add = "Add", subtract = "Sub", sub = "Sub", multiply = "Mul", mul = "Mul", divide = "Div",
                   truediv = "Div", div = "Div", floordiv = "FloorDiv", mod = "Mod", floormod = "Mod",
                   pow = "Pow", maximum = "Maximum", minimum = "Minimum", equal = "Equal",
                   less_equal = "LessEqual", greater = "Greater"}
    for fname, op_type in pairs(types) do
      assert.equal(op_type, tf[fname](x, y).op.type)
      assert.equal(op_type, tf.math[fname](x, y).op.type)
      assert.equal(op_type, x[fname](x, y).op.type)
    end
    assert_values({2}, eval(x:sub(y)))
    assert_values({24}, eval(tf.mul(x, y)))
    assert_values({1.5}, eval(tf.div(x, y)))
    assert.equal("s:0", tf.add(x, y, "s").name)
    assert.equal("t:0", tf.add(x, y, {name = "t"}).name)
  end)

  it("lift Lua numbers to the other operand's dtype; two numbers become float32", function()
    local i = tf.constant({5, 6}, tf.int64)
    local z = tf.maximum(i, 5.0)
    assert.equal(tf.int64, z.dtype)
    assert.equal(tf.int64, z.op.inputs[2].dtype)
    assert_values({5, 6}, eval(z))
    assert.equal(tf.bool, tf.less(3, tf.constant(4, tf.uint8)).dtype)
    assert.equal(tf.float32, tf.add(1, 2).dtype)
    assert.equal(3, eval(tf.add(1, 2)))
    assert.equal(false, eval(tf.logical_and(true, false)))
    assert_values({{11, 22}}, eval(tf.add({{10, 20}}, tf.constant({1, 2}, tf.int32))))
    local g = tf.Graph()
    local t = g:as_default(function() return tf.constant({1.5}) end)
    local sum = tf.add(t, 1)  -- the constant joins t's graph, not the default one
    assert.equal(g, sum.graph)
    assert_values({2.5}, tf.Session(g):run(sum):totable())
  end)

  it("mixing dtypes is a build-time error that says to use tf.cast", function()
    local where = line_below()
    local mixed = function() return tf.constant({1}) + tf.constant({1}, tf.int32) end
    expect_error({"x has dtype float32 but y has dtype int32; use tf.cast to convert one of them", where}, mixed)
    expect_error("x has dtype int64 but y has dtype int32", tf.equal, tf.constant(1, tf.int64), tf.constant(1, tf.int32))
    expect_error("x and y have dtype bool, but Add takes only float32, float64, int32, int64, uint8",
                 tf.add, tf.constant(true), tf.constant(false))
    assert.equal(3, eval(tf.constant(1) + tf.constant(2)))  -- the graph still works
  end)
end)

describe("broadcasting", function()
  before_each(function() tf.reset_default_graph() end)

  -- Fills a shape with 1, 2, 3, ... (times scale) as nested tables.
  local function iota(shape, scale)
    local n = 0
    local function build(depth)
      local t = {}
      for i = 1, shape[depth] do
        if depth == #shape then n = n + 1; t[i] = n * scale else t[i] = build(depth + 1) end
      end
      return t
    end
    if #shape == 0 then return scale end
    return build(1)
  end

  -- NumPy broadcasting of a + b over nested tables, as the reference.
  local function broadcast_add(a, sa, b, sb)
    local rank = math.max(#sa, #sb)
    local out = {}
    for d = 1, rank do
      local da, db = sa[d - rank + #sa] or 1, sb[d - rank + #sb] or 1
      out[d] = math.max(da, db)
    end
    local function at(t, shape, idx)
      for d = 1, #shape do
        local i = idx[d + rank - #shape]
        t = t[shape[d] == 1 and 1 or i]
      end
      return t
    end
    local idx = {}
    local function build(depth)
      if depth > rank then return at(a, sa, idx) + at(b, sb, idx) end
      local t = {}
      for i = 1, out[depth] do idx[depth] = i; t[i] = build(depth + 1) end
      return t
    end
    return build(1), out
  end

  local shape_pairs = {
    {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{3}, {2, 3}}, {{}, {2, 3}}, {{2, 3}, {}},
    {{2, 1, 3}, {4, 1}}, {{2, 3, 4}, {1, 3, 4}}, {{2, 3, 4}, {2, 1, 4}}, {{2, 3, 1}, {1, 1, 4}},
    {{1, 3, 1}, {2, 1, 5}}, {{3, 37}, {37}}, {{37, 1}, {1, 3}}, {{37}, {37}}, {{37}, {1}}, {{1}, {37}},
    {{1, 1}, {2, 1, 1}}, {{2, 1, 2, 1, 2}, {2, 1, 2, 1}},
  }
  for _, p in ipairs(shape_pairs) do
    local sa, sb = p[1], p[2]
    it(string.format("adds shapes {%s} and {%s} like NumPy", table.concat(sa, ","), table.concat(sb, ",")), function()
      local a, b = iota(sa, 1), iota(sb, 100)
      local want, out = broadcast_add(a, sa, b, sb)
      local z = tf.constant(a, tf.int32) + tf.constant(b, tf.int32)
      assert.same(out, z:get_shape():as_list())
      assert_values(want, eval(z))
    end)
  end

  it("[2,1] * [1,3] is an outer product", function()
    local z = tf.constant({{1}, {2}}) * tf.constant({{1, 2, 3}})
    assert_values({{1, 2, 3}, {2, 4, 6}}, eval(z))
  end)

  it("broadcasts comparisons and non-commutative ops with the scalar on either side", function()
    local x = tf.constant({{1, 2, 3}, {4, 5, 6}})
    assert_values({{true, true, false}, {false, false, false}}, eval(tf.less(x, 3)))
    assert_values({{false, false, false}, {true, true, true}}, eval(tf.less(3, x)))
    assert_values({{9, 8, 7}, {6, 5, 4}}, eval(10 - x))
    assert_values({{-9, -8, -7}, {-6, -5, -4}}, eval(x - 10))
    assert_values({{0, 1, 0}, {1, 0, 1}}, eval(tf.floordiv(x, {2, 2, 2}) - tf.floordiv(x - 1, 2)))
  end)

  it("incompatible shapes are a build-time error quoting the Lua line", function()
    local x, y = tf.constant({{1, 2, 3}, {4, 5, 6}}), tf.constant({1, 2, 3, 4})
    local where = line_below()
    local add = function() return x + y end
    expect_error({"Incompatible shapes: [2,3] vs. [4]", where}, add)
    expect_error("Incompatible shapes", tf.equal, tf.constant({1, 2}), tf.constant({1, 2, 3}))
    assert_values({{2, 4, 6}, {5, 7, 9}}, eval(x + tf.constant({1, 2, 3})))
  end)

  it("with empty tensors gives empty results", function()
    local x = tf.placeholder(tf.float32, {-1, 3})
    local v = tf.Session():run(x + tf.constant({1, 2, 3}), {[x] = tf.Array.new(tf.float32, {0, 3})})
    assert.same({0, 3}, v:shape())
    local w = tf.Session():run(x * 2, {[x] = tf.Array.new(tf.float32, {0, 3})})
    assert.same({0, 3}, w:shape())
  end)
end)

describe("unknown dimensions", function()
  before_each(function() tf.reset_default_graph() end)

  it("infer static shapes from what is known", function()
    local p = tf.placeholder(tf.float32, {-1, 3})
    assert.same({-1, 3}, (p + tf.constant({1, 2, 3})):get_shape():as_list())
    assert.same({-1, 3}, (p * 2):get_shape():as_list())
    assert.same({-1, 3}, tf.less(p, 0):get_shape():as_list())
    local col, row = tf.placeholder(tf.float32, {-1, 1}), tf.placeholder(tf.float32, {1, -1})
    assert.same({-1, -1}, (col * row):get_shape():as_list())
    assert.same({4, 3}, (p + tf.placeholder(tf.float32, {4, 1})):get_shape():as_list())
    assert.is_nil((p + tf.placeholder(tf.float32)):get_shape().dims)
    assert.is_nil(tf.sqrt(tf.placeholder(tf.float32)):get_shape().dims)
  end)

  it("get their shapes at run time", function()
    local col, row = tf.placeholder(tf.float32, {-1, 1}), tf.placeholder(tf.float32, {1, -1})
    local sess = tf.Session()
    local z = col * row
    assert_values({{1, 2, 3}, {2, 4, 6}}, sess:run(z, {[col] = {{1}, {2}}, [row] = {{1, 2, 3}}}):totable())
    assert_values({{5}}, sess:run(z, {[col] = {{1}}, [row] = {{5}}}):totable())
    local any = tf.placeholder(tf.int32)
    assert_values({{2, 3}}, sess:run(any + 1, {[any] = {{1, 2}}}):totable())
    assert.equal(-4, sess:run(tf.negative(any), {[any] = 4}))
  end)

  it("a run-time broadcast mismatch is an error and the session keeps working", function()
    local a, b = tf.placeholder(tf.float32, {-1}), tf.placeholder(tf.float32, {-1})
    local where = line_below()
    local z = a + b
    local sess = tf.Session()
    expect_error({"Incompatible shapes: [2] vs. [3]", where}, sess.run, sess, z, {[a] = {1, 2}, [b] = {1, 2, 3}})
    assert_values({11, 22, 33}, sess:run(z, {[a] = {1, 2, 3}, [b] = {10, 20, 30}}):totable())
    assert_values({11, 21}, sess:run(z, {[a] = {1}, [b] = {10, 20}}):totable())
  end)

  it("a run-time value that contradicts an assumed static dim is an error, not a bad read", function()
    -- a + b is statically {3}: a's unknown dim must be 3 or 1 at run time.
    local a, b = tf.placeholder(tf.float32, {-1}), tf.constant({10, 20, 30})
    local z = a + b
    assert.same({3}, z:get_shape():as_list())
    local sess = tf.Session()
    expect_error("Incompatible shapes: [2] vs. [3]", sess.run, sess, z, {[a] = {1, 2}})
    assert_values({11, 21, 31}, sess:run(z, {[a] = {1}}):totable())
    assert_values({11, 22, 33}, sess:run(z, {[a] = {1, 2, 3}}):totable())
  end)
end)

describe("operators", function()
  before_each(function() tf.reset_default_graph() end)

  it("+ - * / % ^ and unary - build the math ops, with numbers on either side", function()
    local x = tf.constant({1, 2, 4})
    local cases = {
      {x + 1, "Add", {2, 3, 5}}, {1 + x, "Add", {2, 3, 5}},
      {x - 1, "Sub", {0, 1, 3}}, {1 - x, "Sub", {0, -1, -3}},
      {x * 2, "Mul", {2, 4, 8}}, {2 * x, "Mul", {2, 4, 8}},
      {x / 2, "Div", {0.5, 1, 2}}, {2 / x, "Div", {2, 1, 0.5}},
      {x % 3, "Mod", {1, 2, 1}}, {7 % x, "Mod", {0, 1, 3}},
      {x ^ 2, "Pow", {1, 4, 16}}, {2 ^ x, "Pow", {2, 4, 16}},
      {-x, "Neg", {-1, -2, -4}}, {x * 2 + 1, "Add", {3, 5, 9}},
    }
    for _, c in ipairs(cases) do
      assert.equal(c[2], c[1].op.type)
      assert_values(c[3], eval(c[1]), 1e-6)
    end
  end)

  it("keep the tensor's dtype for numbers; int true division gives float64", function()
    local i = tf.constant({-7, 7}, tf.int32)
    assert.equal(tf.int32, (i * 2).dtype)
    assert.equal(tf.int32, (2 * i).dtype)
    assert_values({-14, 14}, eval(2 * i))
    assert_values({2, 1}, eval(i % 3))       -- Python's %: the divisor's sign
    assert_values({-1, -2}, eval(i % -3))
    assert_values({-3.5, 3.5}, eval(i / 2))
    assert.equal(tf.float64, (i / 2).dtype)
    assert_values({-7, 7}, eval(-(-i)))
    local u = tf.constant({3}, tf.uint8)
    assert.equal(tf.float32, (u / 2).dtype)
    assert_values({1.5}, eval(u / 2))
  end)

  it("refuse numbers an integer dtype cannot hold, as TensorFlow does", function()
    local i = tf.constant({1, 2}, tf.int32)
    local where = line_below()
    local ok, err = pcall(function() local y = i + 1.5; return y end)
    assert.is_false(ok)
    assert.equal("tf.add: argument y: Cannot convert 1.5 to a Tensor of dtype int32: it is not an integer " ..
                 "(use tf.cast to truncate) (at spec/" .. where .. ")", err)
    expect_error("Cannot convert 300 to a Tensor of dtype uint8: out of its range [0, 255]", function()
      return tf.constant({1}, tf.uint8) + 300 end)
    expect_error("Cannot convert -1 to a Tensor of dtype uint8: out of its range [0, 255]", function()
      return tf.constant({1}, tf.uint8) * -1 end)
    expect_error("Cannot convert 3000000000 to a Tensor of dtype int32: out of its range " ..
                 "[-2147483648, 2147483647]", function() return i * 3e9 end)
    expect_error("Cannot convert 0.5 to a Tensor of dtype int64", function()
      return tf.constant({1}, tf.int64) - 0.5 end)
    expect_error("Cannot convert nan to a Tensor of dtype int32", tf.constant, 0 / 0, tf.int32)
    expect_error("Cannot convert inf to a Tensor of dtype int32", tf.constant, {1, math.huge}, tf.int32)
    expect_error("Cannot convert 9223372036854775808 to a Tensor of dtype int64", tf.constant, 2 ^ 63, tf.int64)
    -- Shapes too: no wrapped, negative dimensions (sizes past int32 take int64, then the count overflows).
    expect_error("Fill: shape [1000000000000,1000000000000] would have more than 2^63 - 1 elements",
                 tf.fill, {1e12, 1e12}, 1)
    -- assign_add lifts its number to the variable's dtype.
    local v = tf.Variable(tf.constant(1, tf.int32))
    expect_error("Cannot convert 1.5 to a Tensor of dtype int32", tf.assign_add, v, 1.5)
    -- Whatever fits is exact, to the ends of each range.
    assert_values({3, 4}, eval(i + 2))
    assert_values({255}, eval(tf.constant({1}, tf.uint8) + 254))
    assert_values({-2147483648, 2147483647}, eval(tf.constant({-2147483648, 2147483647}, tf.int32)))
    assert_values({2 ^ 40 + 1}, eval(tf.constant({1}, tf.int64) + 2 ^ 40))
    local sess = tf.Session()
    sess:run(v.initializer)
    assert_values({3, 4}, sess:run(tf.assign_add(v, 1.0 + 1) + {0, 1}):totable())
    -- A float Array cast to an int dtype, tf.array and feeds truncate as NumPy does.
    assert_values({1, -2}, eval(tf.constant(tf.array({1.7, -2.5}), tf.int32)))
    assert_values({1, 44}, tf.array({1.5, 300}, tf.uint8):totable())
    local x = tf.placeholder(tf.int32, {2})
    assert_values({1, -2}, eval(x, {[x] = {1.7, -2.5}}))
  end)
end)

describe("cast", function()
  before_each(function() tf.reset_default_graph() end)

  -- Source values every dtype can hold, and what each destination dtype makes of them.
  local source = {float32 = {0, 1.5, 2.75}, float64 = {0, 1.5, 2.75}, int32 = {0, 1, 2}, int64 = {0, 1, 2},
                  uint8 = {0, 1, 2}, bool = {false, true, true}}
  local from_float = {float32 = {0, 1.5, 2.75}, float64 = {0, 1.5, 2.75}, int32 = {0, 1, 2}, int64 = {0, 1, 2},
                      uint8 = {0, 1, 2}, bool = {false, true, true}}
  local from_int = {float32 = {0, 1, 2}, float64 = {0, 1, 2}, int32 = {0, 1, 2}, int64 = {0, 1, 2},
                    uint8 = {0, 1, 2}, bool = {false, true, true}}
  local from_bool = {float32 = {0, 1, 1}, float64 = {0, 1, 1}, int32 = {0, 1, 1}, int64 = {0, 1, 1},
                     uint8 = {0, 1, 1}, bool = {false, true, true}}
  local table_for = {float32 = from_float, float64 = from_float, int32 = from_int, int64 = from_int,
                     uint8 = from_int, bool = from_bool}

  for _, src in ipairs(all_dtypes) do
    it("converts " .. src.name .. " to every dtype", function()
      for _, dst in ipairs(all_dtypes) do
        local y = tf.cast(tf.constant(source[src.name], src), dst)
        assert.equal(dst, y.dtype)
        assert_values(table_for[src.name][dst.name], eval(y))
      end
    end)
  end

  it("truncates floats toward zero; to bool is x ~= 0", function()
    local x = tf.constant({-2.9, -0.5, 0.5, 2.9, -0})
    assert_values({-2, 0, 0, 2, 0}, eval(tf.cast(x, tf.int32)))
    assert_values({-2, 0, 0, 2, 0}, eval(tf.cast(x, tf.int64)))
    assert_values({true, true, true, true, false}, eval(tf.cast(x, tf.bool)))
    assert_values({true, false, true}, eval(tf.cast(tf.constant({-3, 0, 7}, tf.int32), tf.bool)))
    assert_values({4294967296}, eval(tf.cast(tf.constant({4294967296}, tf.int64), tf.float64)))
  end)

  it("is an op with DstT, returns x itself for the same dtype, and has to_* shortcuts", function()
    local x = tf.constant({1.5})
    local y = tf.cast(x, tf.int32, {name = "c"})
    assert.equal("Cast", y.op.type)
    assert.equal("c:0", y.name)
    assert.equal(tf.int32, y.op:get_attr("DstT"))
    assert.equal("d:0", tf.cast(x, "float64", "d").name)
    assert.equal(x, tf.cast(x, tf.float32))
    local i = tf.constant({3}, tf.int32)
    assert.equal(tf.float32, tf.to_float(i).dtype)
    assert.equal(tf.float64, tf.to_double(i).dtype)
    assert.equal(tf.int64, tf.to_int64(i).dtype)
    assert.equal(tf.int32, tf.to_int32(x).dtype)
    assert_values({1}, eval(tf.to_int32(x)))
    assert_values({1.5}, eval(tf.to_float(x) + tf.cast(tf.to_int64(x), tf.float32) * 0))
    expect_error("expected a dtype", tf.cast, x, "complex")
  end)

  it("makes mixed-dtype arithmetic work", function()
    local f, i = tf.constant({0.5, 1.5}), tf.constant({2, 3}, tf.int32)
    assert_values({2.5, 4.5}, eval(f + tf.cast(i, tf.float32)))
    assert_values({2, 4}, eval(tf.cast(f, tf.int32) + i))
  end)
end)
