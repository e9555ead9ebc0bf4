-- Gradient rules of the elementwise math ops (src/ops/math.c): finite-difference
-- checks, hand-computed values, broadcasting, second derivatives, and the ops
-- through which no gradient flows.
local tf = require("moonflow")
local H = require("spec.helpers")
local flat = H.flat

-- Central differences in float64 with this step err by about delta^2 * f'''/6
-- (truncation) plus 1e-16 * |f| / delta (rounding): near 1e-10 for the values
-- below, so a correct rule stays far under TOL and a wrong one far above it.
local DELTA, TOL = 1e-5, 1e-6

local function grad_error(x, x_shape, y, y_shape, init)
  return tf.test.compute_gradient_error(x, x_shape, y, y_shape, {x_init_value = init, delta = DELTA})
end

-- The first n values of list laid out in shape (a number for shape {}).
local function fill(list, shape)
  local i = 0
  local function build(d)
    if d > #shape then i = i + 1; return list[i] end
    local t = {}
    for k = 1, shape[d] do t[k] = build(d + 1) end
    return t
  end
  return build(1)
end

local function broadcast_shape(sa, sb)
  local out, ra, rb = {}, #sa, #sb
  for k = 1, math.max(ra, rb) do
    local da, db = sa[ra - math.max(ra, rb) + k] or 1, sb[rb - math.max(ra, rb) + k] or 1
    out[k] = da == 1 and db or da
  end
  return out
end

local function assert_near_all(expected, actual, tol)
  local e, a = flat(expected), flat(actual)
  assert.equal(#e, #a)
  for i = 1, #e do
    assert(math.abs(e[i] - a[i]) <= tol * math.max(1, math.abs(e[i])),
           ("element %d: expected %.17g, got %.17g"):format(i, e[i], a[i]))
  end
end

local function map(list, f)
  local out = {}
  for i, v in ipairs(list) do out[i] = f(v) end
  return out
end

local function sigmoid(x) return 1 / (1 + math.exp(-x)) end

-- Inputs inside each op's domain, away from the kinks of abs.
local GENERAL = {-1.3, 0.4, 2.1, -0.7, 0.9, -2.2}
local POSITIVE = {0.3, 1.4, 2.7, 0.8, 4.1, 1.9}
local ABOVE_MINUS_ONE = {-0.6, 0.4, 2.1, -0.2, 0.9, 3.3}
local UNIT = {-0.7, 0.4, 0.2, -0.3, 0.6, -0.5}
local ABOVE_ONE = {1.3, 2.4, 1.7, 3.1, 1.1, 2.2}
local TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)

-- {wrapper, inputs, first derivative, second derivative (nil: no gradient of
-- the gradient, since it does not depend on x)}.
local UNARY = {
  {"negative", GENERAL, function() return -1 end},
  {"abs", GENERAL, function(x) return x > 0 and 1 or -1 end},
  {"square", GENERAL, function(x) return 2 * x end, function() return 2 end},
  {"sqrt", POSITIVE, function(x) return 0.5 / math.sqrt(x) end, function(x) return -0.25 * x ^ -1.5 end},
  {"rsqrt", POSITIVE, function(x) return -0.5 * x ^ -1.5 end, function(x) return 0.75 * x ^ -2.5 end},
  {"exp", GENERAL, math.exp, math.exp},
  {"log", POSITIVE, function(x) return 1 / x end, function(x) return -1 / (x * x) end},
  {"log1p", ABOVE_MINUS_ONE, function(x) return 1 / (1 + x) end, function(x) return -1 / ((1 + x) * (1 + x)) end},
  {"sin", GENERAL, math.cos, function(x) return -math.sin(x) end},
  {"cos", GENERAL, function(x) return -math.sin(x) end, function(x) return -math.cos(x) end},
  {"tanh", GENERAL, function(x) local t = math.tanh(x) return 1 - t * t end,
   function(x) local t = math.tanh(x) return -2 * t * (1 - t * t) end},
  {"sigmoid", GENERAL, function(x) local s = sigmoid(x) return s * (1 - s) end,
   function(x) local s = sigmoid(x) return s * (1 - s) * (1 - 2 * s) end},
  {"tan", GENERAL, function(x) return 1 + math.tan(x) ^ 2 end,
   function(x) return 2 * math.tan(x) * (1 + math.tan(x) ^ 2) end},
  {"asin", UNIT, function(x) return (1 - x * x) ^ -0.5 end, function(x) return x * (1 - x * x) ^ -1.5 end},
  {"acos", UNIT, function(x) return -(1 - x * x) ^ -0.5 end, function(x) return -x * (1 - x * x) ^ -1.5 end},
  {"atan", GENERAL, function(x) return 1 / (1 + x * x) end, function(x) return -2 * x / (1 + x * x) ^ 2 end},
  {"sinh", GENERAL, math.cosh, math.sinh},
  {"cosh", GENERAL, math.sinh, math.cosh},
  {"asinh", GENERAL, function(x) return (x * x + 1) ^ -0.5 end, function(x) return -x * (x * x + 1) ^ -1.5 end},
  {"acosh", ABOVE_ONE, function(x) return (x * x - 1) ^ -0.5 end, function(x) return -x * (x * x - 1) ^ -1.5 end},
  {"atanh", UNIT, function(x) return 1 / (1 - x * x) end, function(x) return 2 * x / (1 - x * x) ^ 2 end},
  {"erf", GENERAL, function(x) return TWO_OVER_SQRT_PI * math.exp(-x * x) end,
   function(x) return -2 * x * TWO_OVER_SQRT_PI * math.exp(-x * x) end},
  {"erfc", GENERAL, function(x) return -TWO_OVER_SQRT_PI * math.exp(-x * x) end,
   function(x) return 2 * x * TWO_OVER_SQRT_PI * math.exp(-x * x) end},
  {"expm1", GENERAL, math.exp, math.exp},
  {"reciprocal", GENERAL, function(x) return -1 / (x * x) end, function(x) return 2 / (x * x * x) end},
}

describe("gradients of unary math ops", function()
  before_each(function() tf.reset_default_graph() end)

  for _, case in ipairs(UNARY) do
    local fname, inputs, d1, d2 = unpack(case)
    local values = fill(inputs, {2, 3})

    it(fname .. ": matches finite differences, first and second order", function()
      local x = tf.placeholder(tf.float64, {2, 3}, "x")
      local y = tf[fname](x)
      assert.is_true(grad_error(x, {2, 3}, y, {2, 3}, values) < TOL)
      -- the gradient is differentiable in turn: check it the same way
      local dx = tf.gradients(y, x)[1]
      assert.is_true(grad_error(x, {2, 3}, dx, {2, 3}, values) < TOL)
    end)

    it(fname .. ": gives the hand-computed first and second derivatives", function()
      local x = tf.placeholder(tf.float64, {2, 3}, "x")
      local dx = tf.gradients(tf[fname](x), x)[1]
      local d2x = tf.gradients(dx, x)[1]
      assert.same({2, 3}, dx:get_shape():as_list())
      local sess = tf.Session()
      assert_near_all(fill(map(inputs, d1), {2, 3}), sess:run(dx, {[x] = values}), 1e-12)
      if d2 then
        assert_near_all(fill(map(inputs, d2), {2, 3}), sess:run(d2x, {[x] = values}), 1e-12)
      else
        assert.is_nil(d2x)
      end
    end)

    it(fname .. ": differentiates float32 in float32", function()
      local x = tf.placeholder(tf.float32, {6}, "x")
      local dx = tf.gradients(tf[fname](x), x)[1]
      assert.equal(tf.float32, dx.dtype)
      assert_near_all(map(inputs, d1), tf.Session():run(dx, {[x] = inputs}), 1e-5)
    end)

    it(fname .. ": takes shapes known only at run time, scalars and empty tensors", function()
      local x = tf.placeholder(tf.float64, {-1, -1}, "x")
      local dx = tf.gradients(tf[fname](x), x)[1]
      local sess = tf.Session()
      assert_near_all(fill(map(inputs, d1), {3, 2}), sess:run(dx, {[x] = fill(inputs, {3, 2})}), 1e-12)
      assert.same({0, 4}, sess:run(dx, {[x] = tf.Array.new(tf.float64, {0, 4})}):shape())
      local s = tf.placeholder(tf.float64, {}, "s")
      local ds = tf.gradients(tf[fname](s), s)[1]
      assert.near(d1(inputs[2]), sess:run(ds, {[s] = inputs[2]}), 1e-12)
    end)
  end
end)

-- Operands for the binary ops: every a/b is at least 0.038 from an integer
-- (Mod's and TruncateMod's kinks) and every |a - b| at least 0.05 (Maximum's and Minimum's).
local A = {0.55, -1.35, 2.45, -3.15, 4.25, 0.95}
local B = {1.7, -2.3, 2.9, -1.3, 3.7, 1.1}
-- Pow: a > 0, where the gradient for b is defined.
local PA = {0.55, 1.35, 2.45, 0.75, 1.25, 0.95}
local PB = {0.85, -1.15, 1.45, -0.65, 1.85, 0.55}

-- {wrapper, a values, b values, d/da, d/db}.
local BINARY = {
  {"add", A, B, function() return 1 end, function() return 1 end},
  {"subtract", A, B, function() return 1 end, function() return -1 end},
  {"multiply", A, B, function(_, b) return b end, function(a) return a end},
  {"divide", A, B, function(_, b) return 1 / b end, function(a, b) return -a / (b * b) end},
  {"mod", A, B, function() return 1 end, function(a, b) return -math.floor(a / b) end},
  {"truncatemod", A, B, function() return 1 end,
   function(a, b) return a / b < 0 and -math.ceil(a / b) or -math.floor(a / b) end},
  {"pow", PA, PB, function(a, b) return b * a ^ (b - 1) end, function(a, b) return a ^ b * math.log(a) end},
  {"maximum", A, B, function(a, b) return a >= b and 1 or 0 end, function(a, b) return a < b and 1 or 0 end},
  {"minimum", A, B, function(a, b) return a <= b and 1 or 0 end, function(a, b) return b < a and 1 or 0 end},
  {"squared_difference", A, B, function(a, b) return 2 * (a - b) end, function(a, b) return -2 * (a - b) end},
  {"atan2", A, B, function(a, b) return b / (a * a + b * b) end, function(a, b) return -a / (a * a + b * b) end},
}

-- Operand shapes: same shape, a row, an outer product, scalars, each on either side.
local SHAPES = {
  {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{2, 1}, {1, 3}}, {{1, 3}, {2, 1}},
  {{}, {2, 3}}, {{2, 3}, {}},
}

describe("gradients of binary math ops", function()
  before_each(function() tf.reset_default_graph() end)

  for _, case in ipairs(BINARY) do
    local fname, avals, bvals, da, db = unpack(case)

    it(fname .. ": matches finite differences on both sides, with broadcasting", function()
      for _, shapes in ipairs(SHAPES) do
        local sa, sb = shapes[1], shapes[2]
        local va, vb, sz = fill(avals, sa), fill(bvals, sb), broadcast_shape(sa, sb)
        tf.reset_default_graph()
        local a = tf.placeholder(tf.float64, sa, "a")
        local z = tf[fname](a, tf.constant(vb, tf.float64))
        local err = grad_error(a, sa, z, sz, va)
        assert(err < TOL, ("%s %s: d/da error %g"):format(fname, table.concat(sa, "x"), err))
        tf.reset_default_graph()
        local b = tf.placeholder(tf.float64, sb, "b")
        z = tf[fname](tf.constant(va, tf.float64), b)
        err = grad_error(b, sb, z, sz, vb)
        assert(err < TOL, ("%s %s: d/db error %g"):format(fname, table.concat(sb, "x"), err))
      end
    end)

    it(fname .. ": has differentiable gradients (second and mixed derivatives)", function()
      for _, shapes in ipairs(SHAPES) do
        local sa, sb = shapes[1], shapes[2]
        local va, vb = fill(avals, sa), fill(bvals, sb)
        -- d/dv of the gradient for u, with the operand not fed held constant
        for _, wrt in ipairs({{"a", "a"}, {"b", "b"}, {"a", "b"}, {"b", "a"}}) do
          tf.reset_default_graph()
          local fed = wrt[2]
          local a = fed == "a" and tf.placeholder(tf.float64, sa, "a") or tf.constant(va, tf.float64)
          local b = fed == "b" and tf.placeholder(tf.float64, sb, "b") or tf.constant(vb, tf.float64)
          local u = wrt[1] == "a" and a or b
          local g = tf.gradients(tf[fname](a, b), u)[1]
          local x, sx, vx = a, sa, va
          if fed == "b" then x, sx, vx = b, sb, vb end
          local err = grad_error(x, sx, g, wrt[1] == "a" and sa or sb, vx)
          assert(err < TOL, ("%s %s,%s: d/d%s of d/d%s error %g"):format(
            fname, table.concat(sa, "x"), table.concat(sb, "x"), wrt[2], wrt[1], err))
        end
      end
    end)

    it(fname .. ": gives the hand-computed gradients", function()
      local a = tf.placeholder(tf.float64, {6}, "a")
      local b = tf.placeholder(tf.float64, {6}, "b")
      local g = tf.gradients(tf[fname](a, b), {a, b})
      local r = tf.Session():run({g[1], g[2]}, {[a] = avals, [b] = bvals})
      local ea, eb = {}, {}
      for i = 1, 6 do ea[i], eb[i] = da(avals[i], bvals[i]), db(avals[i], bvals[i]) end
      assert_near_all(ea, r[1], 1e-12)
      assert_near_all(eb, r[2], 1e-12)
    end)

    it(fname .. ": sums broadcast gradients down to shapes known only at run time", function()
      local a = tf.placeholder(tf.float64, {-1, -1}, "a")
      local b = tf.placeholder(tf.float64, {-1, -1}, "b")
      local g = tf.gradients(tf[fname](a, b), {a, b})
      local r = tf.Session():run({g[1], g[2]}, {[a] = fill(avals, {2, 1}), [b] = fill(bvals, {1, 3})})
      local ea, eb = {0, 0}, {0, 0, 0}
      for i = 1, 2 do
        for j = 1, 3 do
          ea[i] = ea[i] + da(avals[i], bvals[j])
          eb[j] = eb[j] + db(avals[i], bvals[j])
        end
      end
      assert.same({2, 1}, r[1]:shape())
      assert.same({1, 3}, r[2]:shape())
      assert_near_all(ea, r[1], 1e-12)
      assert_near_all(eb, r[2], 1e-12)
    end)

    it(fname .. ": differentiates float32 in float32", function()
      local a = tf.placeholder(tf.float32, {2, 3}, "a")
      local b = tf.placeholder(tf.float32, {3}, "b")
      local g = tf.gradients(tf[fname](a, b), {a, b})
      assert.equal(tf.float32, g[1].dtype)
      assert.equal(tf.float32, g[2].dtype)
      local r = tf.Session():run(g[1], {[a] = fill(avals, {2, 3}), [b] = {bvals[1], bvals[2], bvals[3]}})
      local ea = {}
      for i = 1, 6 do ea[i] = da(avals[i], bvals[(i - 1) % 3 + 1]) end
      assert_near_all(fill(ea, {2, 3}), r, 1e-5)
    end)
  end

  it("pow: the gradient for the exponent is 0 where the base is not positive", function()
    local a = tf.placeholder(tf.float64, {4}, "a")
    local b = tf.placeholder(tf.float64, {4}, "b")
    local g = tf.gradients(tf.pow(a, b), {a, b})
    local r = tf.Session():run({g[1], g[2]}, {[a] = {-2, 0, 2, -3}, [b] = {2, 2, 3, 3}})
    assert.same({-4, 0, 12, 27}, r[1]:totable())
    assert.same({0, 0, 8 * math.log(2), 0}, r[2]:totable())
    -- a NaN base has no log either
    local nan = tf.Session():run(g[2], {[a] = {0 / 0, 1, 1, 1}, [b] = {0, 1, 1, 1}})
    assert.equal(0, nan:totable()[1])
  end)

  it("pow: x^3 via the ^ operator has gradient 3x^2", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    local dx = tf.gradients(x ^ 3, x)[1]
    assert.same({12, 0.75, 27}, tf.Session():run(dx, {[x] = {-2, 0.5, 3}}):totable())
  end)

  it("maximum and minimum: ties send the gradient to the first input, as TensorFlow", function()
    local a = tf.placeholder(tf.float64, {3}, "a")
    local b = tf.placeholder(tf.float64, {3}, "b")
    local sess = tf.Session()
    local feed = {[a] = {1, 2, 3}, [b] = {1, 5, 0}}
    local g = tf.gradients(tf.maximum(a, b), {a, b})
    local gmax = sess:run({g[1], g[2]}, feed)
    assert.same({1, 0, 1}, gmax[1]:totable())
    assert.same({0, 1, 0}, gmax[2]:totable())
    g = tf.gradients(tf.minimum(a, b), {a, b})
    local gmin = sess:run({g[1], g[2]}, feed)
    assert.same({1, 1, 0}, gmin[1]:totable())
    assert.same({0, 0, 1}, gmin[2]:totable())
  end)

  it("mod: d/da = 1, d/db = -floor(a/b), for every sign", function()
    local a = tf.placeholder(tf.float64, {4}, "a")
    local b = tf.placeholder(tf.float64, {4}, "b")
    local g = tf.gradients(tf.mod(a, b), {a, b})
    local r = tf.Session():run({g[1], g[2]}, {[a] = {7, -7, 7, -7}, [b] = {3, 3, -3, -3}})
    assert.same({1, 1, 1, 1}, r[1]:totable())
    assert.same({-2, 3, 3, -2}, r[2]:totable())
  end)

  it("divide: d/da = 1/b and d/db = -a/b^2", function()
    local a = tf.placeholder(tf.float64, {}, "a")
    local b = tf.placeholder(tf.float64, {}, "b")
    local g = tf.gradients(a / b, {a, b})
    local r = tf.Session():run({g[1], g[2]}, {[a] = 3, [b] = 4})
    assert.equal(0.25, r[1])
    assert.equal(-3 / 16, r[2])
  end)

  it("the same tensor on both sides gets both contributions", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local sess = tf.Session()
    assert.equal(6, sess:run(tf.gradients(x * x, x)[1], {[x] = 3}))
    assert.equal(2, sess:run(tf.gradients(x + x, x)[1], {[x] = 3}))
    assert.equal(0, sess:run(tf.gradients(x - x, x)[1], {[x] = 3}))
    assert.equal(1, sess:run(tf.gradients(tf.maximum(x, x), x)[1], {[x] = 3}))
    -- d(x^x)/dx = x^x (1 + log x)
    assert.near(27 * (1 + math.log(3)), sess:run(tf.gradients(tf.pow(x, x), x)[1], {[x] = 3}), 1e-12)
  end)

  it("add_n passes its gradient to every input", function()
    local x = tf.placeholder(tf.float64, {2}, "x")
    local y = tf.placeholder(tf.float64, {2}, "y")
    assert.equal(tf.add_n, tf.math.add_n)
    local g = tf.gradients(tf.add_n({x, x * 3, y}), {x, y})
    local r = tf.Session():run({g[1], g[2]}, {[x] = {1, 2}, [y] = {3, 4}})
    assert.same({4, 4}, r[1]:totable())
    assert.same({1, 1}, r[2]:totable())
  end)
end)

describe("higher-order gradients of math ops", function()
  before_each(function() tf.reset_default_graph() end)

  local function derivatives(y, x, n)
    local out, g = {}, y
    for k = 1, n do
      g = tf.gradients(g, x)[1]
      out[k] = g
    end
    return out
  end

  it("d2(x^3)/dx2 = 6x and d3(x^3)/dx3 = 6, through Pow, Mul and Square", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local sess = tf.Session()
    for _, y in ipairs({tf.pow(x, 3), x * x * x, tf.square(x) * x}) do
      local d = derivatives(y, x, 3)
      for _, v in ipairs({-2, -0.5, 0, 1, 3}) do
        local r = sess:run(d, {[x] = v})
        assert.near(3 * v * v, r[1], 1e-12)
        assert.near(6 * v, r[2], 1e-12)
        assert.near(6, r[3], 1e-12)
      end
    end
  end)

  it("sin'' = -sin and sin'''' = sin", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local d = derivatives(tf.sin(x), x, 4)
    local sess = tf.Session()
    for _, v in ipairs({-2, 0.3, 1.5}) do
      local r = sess:run(d, {[x] = v})
      assert.near(math.cos(v), r[1], 1e-12)
      assert.near(-math.sin(v), r[2], 1e-12)
      assert.near(-math.cos(v), r[3], 1e-12)
      assert.near(math.sin(v), r[4], 1e-12)
    end
  end)

  it("tanh'' = -2 tanh (1 - tanh^2) and sigmoid'' = s (1 - s)(1 - 2s)", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local t2 = derivatives(tf.tanh(x), x, 2)[2]
    local s2 = derivatives(tf.sigmoid(x), x, 2)[2]
    local sess = tf.Session()
    for _, v in ipairs({-1.5, 0, 0.7}) do
      local t, s = math.tanh(v), sigmoid(v)
      assert.near(-2 * t * (1 - t * t), sess:run(t2, {[x] = v}), 1e-12)
      assert.near(s * (1 - s) * (1 - 2 * s), sess:run(s2, {[x] = v}), 1e-12)
    end
  end)

  it("pow: second and mixed derivatives in the exponent", function()
    local a = tf.placeholder(tf.float64, {}, "a")
    local b = tf.placeholder(tf.float64, {}, "b")
    local db = tf.gradients(tf.pow(a, b), b)[1]
    local dbb = tf.gradients(db, b)[1]
    local dba = tf.gradients(db, a)[1]
    local r = tf.Session():run({dbb, dba}, {[a] = 2, [b] = 3})
    assert.near(8 * math.log(2) ^ 2, r[1], 1e-12)   -- a^b log(a)^2
    assert.near(4 * (1 + 3 * math.log(2)), r[2], 1e-12)  -- a^(b-1) (1 + b log a)
  end)

  it("divide: d2(1/b)/db2 = 2/b^3", function()
    local b = tf.placeholder(tf.float64, {}, "b")
    local d2 = derivatives(1 / b, b, 2)[2]
    assert.near(2 / 8, tf.Session():run(d2, {[b] = 2}), 1e-12)
  end)
end)

describe("gradients through Cast", function()
  before_each(function() tf.reset_default_graph() end)

  it("casts the gradient back to the input's float dtype", function()
    local x64 = tf.placeholder(tf.float64, {3}, "x64")
    local x32 = tf.placeholder(tf.float32, {3}, "x32")
    local g64 = tf.gradients(tf.cast(x64, tf.float32) * 3, x64)[1]
    local g32 = tf.gradients(tf.square(tf.cast(x32, tf.float64)), x32)[1]
    assert.equal(tf.float64, g64.dtype)
    assert.equal(tf.float32, g32.dtype)
    local sess = tf.Session()
    assert.same({3, 3, 3}, sess:run(g64, {[x64] = {1, 2, 3}}):totable())
    assert.same({2, -1, 0.5}, sess:run(g32, {[x32] = {1, -0.5, 0.25}}):totable())
  end)

  it("matches finite differences across float64 -> float32 -> float64", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local y = tf.cast(tf.sin(tf.cast(x, tf.float32)) * 2, tf.float64)
    -- y is rounded to float32 (relative error ~6e-8), so the central difference
    -- carries about 6e-8 * 2 / delta: a step of 1e-2 keeps that near 1e-5 while
    -- its truncation error stays under 2e-5 * |sin'''| / 6 * 2 = 7e-6
    local err = tf.test.compute_gradient_error(x, {2, 3}, y, {2, 3}, {x_init_value = fill(GENERAL, {2, 3}), delta = 1e-2})
    assert.is_true(err < 5e-5)
    -- and the second derivative through both casts is float64 and right
    local d2 = tf.gradients(tf.gradients(y, x)[1], x)[1]
    assert.equal(tf.float64, d2.dtype)
    assert_near_all(fill(map(GENERAL, function(v) return -2 * math.sin(v) end), {2, 3}),
                    tf.Session():run(d2, {[x] = fill(GENERAL, {2, 3})}), 1e-6)
  end)

  it("gives no gradient to integer inputs, nor through an integer cast", function()
    local i = tf.placeholder(tf.int32, {2}, "i")
    local x = tf.placeholder(tf.float64, {2}, "x")
    local y = tf.cast(i, tf.float64) * x + tf.cast(i * i, tf.float64)
    local g = tf.gradients(y, {x, i})
    assert.is_nil(g[2])
    assert.same({3, 4}, tf.Session():run(g[1], {[x] = {1, 2}, [i] = {3, 4}}):totable())
    -- truncating to an integer and back cuts the path
    assert.is_nil(tf.gradients(tf.cast(tf.cast(x, tf.int32), tf.float64), x)[1])
    local u8 = tf.placeholder(tf.uint8, {2}, "u8")
    assert.is_nil(tf.gradients(tf.cast(u8, tf.float32), u8)[1])
    local i64 = tf.placeholder(tf.int64, {}, "i64")
    assert.is_nil(tf.gradients(tf.cast(tf.pow(i64, i64), tf.float64), i64)[1])
  end)
end)

describe("math ops declared not differentiable", function()
  before_each(function() tf.reset_default_graph() end)

  it("Floor, Ceil, Round, Sign and FloorDiv pass no gradient", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    for _, y in ipairs({tf.floor(x), tf.ceil(x), tf.round(x), tf.sign(x), tf.floordiv(x, 2),
                        tf.floordiv(3, x)}) do
      assert.is_nil(tf.gradients(y, x)[1])
    end
  end)

  it("comparisons and logic pass no gradient", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    local conds = {tf.equal(x, 1), tf.not_equal(x, 1), tf.less(x, 1), tf.less_equal(x, 1),
                   tf.greater(x, 1), tf.greater_equal(x, 1),
                   tf.logical_and(tf.less(x, 1), tf.greater(x, 0)),
                   tf.logical_or(tf.less(x, 1), tf.greater(x, 0)),
                   tf.logical_xor(tf.less(x, 1), tf.greater(x, 0)),
                   tf.logical_not(tf.less(x, 1))}
    for _, c in ipairs(conds) do
      assert.is_nil(tf.gradients(tf.cast(c, tf.float64), x)[1])
    end
  end)

  it("only the paths through them are cut", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    local sess = tf.Session()
    local feed = {[x] = {-1.5, 0.5, 2.5}}
    assert.same({2, 2, 2}, sess:run(tf.gradients(x * 2 + tf.floor(x), x)[1], feed):totable())
    -- relu written with a comparison: the mask is a constant to the gradient
    local relu = x * tf.cast(tf.greater(x, 0), tf.float64)
    assert.same({0, 1, 1}, sess:run(tf.gradients(relu, x)[1], feed):totable())
    -- |x| = x * sign(x): d/dx = sign(x)
    assert.same({-1, 1, 1}, sess:run(tf.gradients(x * tf.sign(x), x)[1], feed):totable())
    -- round-to-nearest trick: x - stop(x - round(x)) passes the gradient of x
    local ste = x - tf.stop_gradient(x - tf.round(x))
    assert.same({1, 1, 1}, sess:run(tf.gradients(ste, x)[1], feed):totable())
  end)
end)

describe("gradients of the math composites", function()
  before_each(function() tf.reset_default_graph() end)

  it("divide_no_nan, multiply_no_nan, xdivy, xlogy: finite differences, and 0 where guarded", function()
    local a = tf.placeholder(tf.float64, {6}, "a")
    for _, fname in ipairs({"divide_no_nan", "multiply_no_nan", "xdivy", "xlogy"}) do
      local z = tf.math[fname](a, tf.constant(PA, tf.float64))
      assert.is_true(grad_error(a, {6}, z, {6}, A) < TOL, fname)
      z = tf.math[fname](tf.constant(PA, tf.float64), a)
      assert.is_true(grad_error(a, {6}, z, {6}, POSITIVE) < TOL, fname)
    end
    -- where the guard is 0 the result and both gradients are 0, with inf or NaN on the other side
    local x, y = tf.placeholder(tf.float64, {2}), tf.placeholder(tf.float64, {2})
    local sess = tf.Session()
    for _, case in ipairs({{"divide_no_nan", {1 / 0, 0 / 0}, {0, 0}}, {"multiply_no_nan", {1 / 0, 0 / 0}, {0, 0}},
                           {"xdivy", {0, 0}, {0, 1 / 0}}, {"xlogy", {0, 0}, {0, -1}}}) do
      local z = tf.math[case[1]](x, y)
      local r = sess:run({z, tf.gradients(z, {x, y})}, {[x] = case[2], [y] = case[3]})
      assert.same({0, 0}, r[1]:totable(), case[1])
      assert.same({0, 0}, r[2][2]:totable(), case[1])
    end
  end)

  it("reduce_variance, reduce_std, reduce_euclidean_norm, log_sigmoid", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local values = fill(GENERAL, {2, 3})
    assert.is_true(grad_error(x, {2, 3}, tf.math.reduce_variance(x, 1), {2}, values) < TOL)
    assert.is_true(grad_error(x, {2, 3}, tf.math.reduce_std(x, {axis = 0, keepdims = true}), {1, 3}, values) < TOL)
    assert.is_true(grad_error(x, {2, 3}, tf.math.reduce_euclidean_norm(x), {}, values) < TOL)
    assert.is_true(grad_error(x, {2, 3}, tf.math.log_sigmoid(x), {2, 3}, values) < TOL)
  end)
end)
