-- Gradient rules of the reductions (Sum, Mean, Prod, Max, Min; Any and All
-- have none) and of ReducedShape, checked against central differences in
-- float64, with hand-computed values, every axis/keepdims variant, unknown
-- dimensions and unknown rank fed at run time, and second derivatives.
local tf = require("moonflow")
local H = require("spec.helpers")
local check_grad, numel = H.check_grad, H.numel
local values = H.values
local error_of = H.error_of
local G = require("moonflow.graph")


local function arr(shape, seed)
  local a = tf.Array.new(tf.float64, shape)
  local d = a:data()
  for i, v in ipairs(values(numel(shape), seed)) do d[i - 1] = v end
  return a
end

local function run(t, feeds) return tf.Session():run(t, feeds) end

-- Nested tables of numbers equal within tol (results that went through a division).
local function assert_close(expected, actual, tol)
  if type(expected) == "number" then
    assert.is_true(math.abs(expected - actual) <= (tol or 1e-12),
                   string.format("expected %.17g, got %.17g", expected, actual))
    return
  end
  assert.equal(#expected, #actual)
  for i = 1, #expected do assert_close(expected[i], actual[i], tol) end
end

-- The shape of a reduction of `dims` over `axes` (nil: all).
local function reduced(dims, axes, keepdims)
  local red = {}
  if axes == nil then for d = 1, #dims do red[d] = true end
  else for _, a in ipairs(axes) do red[a % #dims + 1] = true end end
  local out = {}
  for d = 1, #dims do
    if not red[d] then out[#out + 1] = dims[d] elseif keepdims then out[#out + 1] = 1 end
  end
  return out
end

local AXES = {false, {0}, {1}, {-1}, {0, 2}, {-1, -3}, {2, 0, 1}, {}}
local SHAPE = {2, 3, 2}

-- Gradient checks of `reduce` over every axis variant, with and without keepdims.
local function check_variants(reduce)
  local x = tf.placeholder(tf.float64, SHAPE, "x")
  for _, axes in ipairs(AXES) do
    for _, keep in ipairs({false, true}) do
      local y = reduce(x, {axis = axes or nil, keepdims = keep})
      local shape = reduced(SHAPE, axes or nil, keep)
      assert.same(shape, y:get_shape():as_list())
      check_grad(x, SHAPE, y, shape)
    end
  end
end

describe("gradient of Sum", function()
  before_each(function() tf.reset_default_graph() end)

  it("broadcasts dy back over the reduced axes", function()
    local x = tf.placeholder(tf.float64, {2, 3, 2}, "x")
    local g = tf.gradients(tf.reduce_sum(x, 1), x, tf.constant({{1, 2}, {3, 4}}, tf.float64))[1]
    assert.same({2, 3, 2}, g:get_shape():as_list())
    assert.same({{{1, 2}, {1, 2}, {1, 2}}, {{3, 4}, {3, 4}, {3, 4}}}, run(g, {[x] = arr(SHAPE)}):totable())
    local ga = tf.gradients(tf.reduce_sum(x), x)[1]
    assert.same({{{1, 1}, {1, 1}, {1, 1}}, {{1, 1}, {1, 1}, {1, 1}}}, run(ga, {[x] = arr(SHAPE)}):totable())
    local gk = tf.gradients(tf.reduce_sum(x, {0, -1}, true), x, tf.constant({{{1}, {2}, {3}}}, tf.float64))[1]
    assert.same({{{1, 1}, {2, 2}, {3, 3}}, {{1, 1}, {2, 2}, {3, 3}}}, run(gk, {[x] = arr(SHAPE)}):totable())
  end)

  it("passes gradient checks for every axis and keepdims variant", function()
    check_variants(tf.reduce_sum)
  end)

  it("works with unknown dimensions and unknown rank", function()
    local u = tf.placeholder(tf.float64, {-1, 3, -1}, "u")
    local y = tf.reduce_sum(u, {0, -1})
    local g = tf.gradients(y, u, tf.constant({1, 2, 3}, tf.float64))[1]
    assert.same({-1, 3, -1}, g:get_shape():as_list())
    local sess = tf.Session()
    assert.same({{{1}, {2}, {3}}}, sess:run(g, {[u] = arr({1, 3, 1})}):totable())
    assert.same({2, 3, 4}, sess:run(g, {[u] = arr({2, 3, 4})}):shape())
    check_grad(u, {2, 3, 2}, y, {3})
    local r = tf.placeholder(tf.float64, nil, "r")
    check_grad(r, {2, 3}, tf.reduce_sum(r, 1), {2})
    check_grad(r, {2, 3}, tf.reduce_sum(r, {-1}, true), {2, 1})
    check_grad(r, {2, 3, 2}, tf.reduce_sum(r), {})
    local gr = tf.gradients(tf.reduce_sum(r, {0, 2}), r)[1]
    assert.same({{{1, 1}, {1, 1}, {1, 1}}}, run(gr, {[r] = arr({1, 3, 2})}):totable())
  end)

  it("gives gradients of the input's static shape, needing no SumToShape when it is known", function()
    local x = tf.placeholder(tf.float64, {2, 1, 3}, "x")
    for _, reduce in ipairs({tf.reduce_sum, tf.reduce_mean, tf.reduce_prod, tf.reduce_max, tf.reduce_min}) do
      local g = tf.gradients(reduce(x, {0, 1}), x)[1]
      assert.same({2, 1, 3}, g:get_shape():as_list())
    end
    for _, op in ipairs(tf.get_default_graph():get_operations()) do
      assert.is_true(op.type ~= "SumToShape" and op.type ~= "ReducedShape", op.name)
    end
    local u = tf.placeholder(tf.float64, {-1, 1, 3}, "u")
    assert.same({-1, 1, 3}, tf.gradients(tf.reduce_max(u, {0, 1}), u)[1]:get_shape():as_list())
  end)

  it("keeps float32", function()
    local x = tf.placeholder(tf.float32, {-1, 2}, "x")
    local g = tf.gradients(tf.reduce_sum(x, 0), x)[1]
    assert.equal(tf.float32, g.dtype)
    assert.same({{1, 1}, {1, 1}}, run(g, {[x] = {{1, 2}, {3, 4}}}):totable())
  end)
end)

describe("gradient of Mean", function()
  before_each(function() tf.reset_default_graph() end)

  it("divides by the number of elements averaged", function()
    local x = tf.placeholder(tf.float64, {2, 4}, "x")
    local g = tf.gradients(tf.reduce_mean(x, 1), x, tf.constant({4, 8}, tf.float64))[1]
    assert.same({{1, 1, 1, 1}, {2, 2, 2, 2}}, run(g, {[x] = arr({2, 4})}):totable())
    local ga = tf.gradients(tf.reduce_mean(x), x)[1]
    assert.same({{0.125, 0.125, 0.125, 0.125}, {0.125, 0.125, 0.125, 0.125}}, run(ga, {[x] = arr({2, 4})}):totable())
  end)

  it("passes gradient checks for every axis and keepdims variant", function()
    check_variants(tf.reduce_mean)
  end)

  it("counts at run time when the shapes are unknown", function()
    local u = tf.placeholder(tf.float64, {-1, -1}, "u")
    local g = tf.gradients(tf.reduce_mean(u, -1), u)[1]
    local sess = tf.Session()
    assert.same({{0.25, 0.25, 0.25, 0.25}, {0.25, 0.25, 0.25, 0.25}}, sess:run(g, {[u] = arr({2, 4})}):totable())
    local r = sess:run(g, {[u] = arr({3, 5})}):totable()
    for i = 1, 3 do assert_close({0.2, 0.2, 0.2, 0.2, 0.2}, r[i]) end
    check_grad(u, {3, 2}, tf.reduce_mean(u, 0, true), {1, 2})
    -- unknown rank
    local w = tf.placeholder(tf.float64, nil, "w")
    check_grad(w, {2, 3}, tf.reduce_mean(w, {1}), {2})
    check_grad(w, {2, 3, 2}, tf.reduce_mean(w), {})
    -- float32 count
    local f = tf.placeholder(tf.float32, {-1}, "f")
    local gf = tf.gradients(tf.reduce_mean(f), f)[1]
    assert.equal(tf.float32, gf.dtype)
    assert.same({0.5, 0.5}, run(gf, {[f] = {1, 2}}):totable())
  end)

  it("gives an empty gradient for an empty input", function()
    local u = tf.placeholder(tf.float64, {-1, 3}, "u")
    local g = tf.gradients(tf.reduce_mean(u, 0), u)[1]
    assert.same({0, 3}, run(g, {[u] = tf.Array.new(tf.float64, {0, 3})}):shape())
  end)
end)

describe("gradient of Prod", function()
  before_each(function() tf.reset_default_graph() end)

  it("is the product of the other elements, zeros included", function()
    local x = tf.placeholder(tf.float64, {4, 3}, "x")
    local g = tf.gradients(tf.reduce_prod(x, 1), x)[1]
    local v = {{2, 3, 4}, {2, 0, 3}, {0, 0, 3}, {-1, 5, 0.5}}
    assert_close({{12, 8, 6}, {0, 6, 0}, {0, 0, 0}, {2.5, -0.5, -5}}, run(g, {[x] = v}):totable())
    -- along axis 0, weighted by dy
    local g0 = tf.gradients(tf.reduce_prod(x, 0, true), x, tf.constant({{1, 10, 100}}, tf.float64))[1]
    -- column 0 has one zero, column 1 two, column 2 none
    assert_close({{0, 0, 450}, {0, 0, 600}, {-4, 0, 600}, {0, 0, 3600}}, run(g0, {[x] = v}):totable())
    local w = {{2, 3, 4}, {2, 1, 3}, {1, 2, 3}, {-1, 5, 0.5}}
    assert_close({{-2, 100, 450}, {-2, 300, 600}, {-4, 150, 600}, {4, 60, 3600}}, run(g0, {[x] = w}):totable())
    -- over all elements with one zero
    local ga = tf.gradients(tf.reduce_prod(x), x)[1]
    local one_zero = {{1, 2, 3}, {1, 1, 1}, {0.5, 2, 1}, {1, 0, 1}}
    assert_close({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 6, 0}}, run(ga, {[x] = one_zero}):totable())
  end)

  it("passes gradient checks for every axis and keepdims variant", function()
    check_variants(tf.reduce_prod)
  end)

  it("passes gradient checks at a single zero", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local init = {0.5, 0, -2, 1.5, 3, 0}
    check_grad(x, {2, 3}, tf.reduce_prod(x, 1), {2}, {x_init_value = init})
    check_grad(x, {2, 3}, tf.reduce_prod(x, 0), {3}, {x_init_value = {0.5, 2, -2, 1.5, 0, 0.25}})
  end)

  it("works with unknown dimensions and unknown rank", function()
    local u = tf.placeholder(tf.float64, {-1, -1}, "u")
    local y = tf.reduce_prod(u, -1)
    check_grad(u, {3, 2}, y, {3})
    assert_close({{3, 2}, {0, 0}}, run(tf.gradients(y, u)[1], {[u] = {{2, 3}, {0, 0}}}):totable())
    local r = tf.placeholder(tf.float64, nil, "r")
    check_grad(r, {2, 2, 2}, tf.reduce_prod(r, {0, 2}), {2})
    -- an empty reduction: the product is 1 and the gradient has no elements
    local g = tf.gradients(tf.reduce_prod(u, 1), u)[1]
    assert.same({2, 0}, run(g, {[u] = tf.Array.new(tf.float64, {2, 0})}):shape())
  end)

  it("has exact second derivatives away from zeros", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    local g = tf.gradients(tf.reduce_prod(x), x)[1]
    local rows = tf.unstack(g)
    local a, b, c = 2, -3, 0.5
    local expect = {{0, c, b}, {c, 0, a}, {b, a, 0}}
    for i = 1, 3 do
      assert_close(expect[i], run(tf.gradients(rows[i], x)[1], {[x] = {a, b, c}}):totable())
    end
    local m = tf.placeholder(tf.float64, {2, 3}, "m")
    check_grad(m, {2, 3}, tf.gradients(tf.reduce_prod(m, 1), m)[1], {2, 3})
    check_grad(m, {2, 3}, tf.gradients(tf.reduce_prod(m, {0, 1}, true), m)[1], {2, 3})
  end)
end)

describe("gradients of Max and Min", function()
  before_each(function() tf.reset_default_graph() end)

  it("go to the extreme elements, split among ties", function()
    local x = tf.placeholder(tf.float64, {3, 3}, "x")
    local v = {{1, 3, 3}, {5, 1, 2}, {2, 2, 2}}
    local gmax = tf.gradients(tf.reduce_max(x, 1), x, tf.constant({6, 6, 6}, tf.float64))[1]
    assert_close({{0, 3, 3}, {6, 0, 0}, {2, 2, 2}}, run(gmax, {[x] = v}):totable())
    local gmin = tf.gradients(tf.reduce_min(x, -1), x)[1]
    assert_close({{1, 0, 0}, {0, 1, 0}, {1 / 3, 1 / 3, 1 / 3}}, run(gmin, {[x] = v}):totable())
    local gcol = tf.gradients(tf.reduce_max(x, 0, true), x)[1]
    assert.same({{0, 1, 1}, {1, 0, 0}, {0, 0, 0}}, run(gcol, {[x] = v}):totable())
    local gall = tf.gradients(tf.reduce_min(x), x)[1]
    assert.same({{0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0}}, run(gall, {[x] = v}):totable())
  end)

  it("pass gradient checks for every axis and keepdims variant", function()
    check_variants(tf.reduce_max)
    check_variants(tf.reduce_min)
  end)

  it("work with unknown dimensions and unknown rank", function()
    local u = tf.placeholder(tf.float64, {-1, 3}, "u")
    local g = tf.gradients(tf.reduce_max(u, 1), u)[1]
    assert.same({-1, 3}, g:get_shape():as_list())
    assert.same({{0, 1, 0}, {0.5, 0, 0.5}}, run(g, {[u] = {{1, 4, 2}, {7, 0, 7}}}):totable())
    check_grad(u, {4, 3}, tf.reduce_min(u, 0), {3})
    local r = tf.placeholder(tf.float64, nil, "r")
    check_grad(r, {2, 3, 2}, tf.reduce_max(r, {-1, 0}), {3})
    check_grad(r, {2, 3, 2}, tf.reduce_min(r, {1}, true), {2, 1, 2})
  end)

  it("are linear in dy: the gradient of the gradient with respect to dy", function()
    local x = tf.constant(values(12), {dtype = tf.float64, shape = {3, 4}})
    for _, reduce in ipairs({tf.reduce_max, tf.reduce_min}) do
      local dy = tf.placeholder(tf.float64, {3}, "dy")
      local dx = tf.gradients(reduce(x, 1), x, dy)[1]
      check_grad(dy, {3}, dx, {3, 4})
    end
  end)
end)

describe("reduction gradients, second order and the rest", function()
  before_each(function() tf.reset_default_graph() end)

  it("d2/dx2 of reduce_sum(x*x) and reduce_mean(x*x)", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local g = tf.gradients(tf.reduce_sum(x * x), x)[1]
    local h = tf.gradients(g, x)[1]
    local v = {{1, -2, 3}, {0.5, 0, 4}}
    local r = run({g, h}, {[x] = v})
    assert.same({{2, -4, 6}, {1, 0, 8}}, r[1]:totable())
    assert.same({{2, 2, 2}, {2, 2, 2}}, r[2]:totable())
    local gm = tf.gradients(tf.reduce_mean(x * x, 0), x)[1]
    local hm = tf.gradients(gm, x)[1]
    assert.same({{1, 1, 1}, {1, 1, 1}}, run(hm, {[x] = v}):totable())
    -- the gradients' Jacobians, numerically
    check_grad(x, {2, 3}, g, {2, 3})
    check_grad(x, {2, 3}, tf.gradients(tf.reduce_mean(x * x, 1, true), x)[1], {2, 3})
    check_grad(x, {2, 3}, tf.gradients(tf.reduce_max(x * x, 0), x)[1], {2, 3})
    -- an unknown shape
    local u = tf.placeholder(tf.float64, {-1, -1}, "u")
    local hu = tf.gradients(tf.gradients(tf.reduce_mean(u * u), u)[1], u)[1]
    local ru = run(hu, {[u] = arr({2, 2})}):totable()
    for i = 1, 2 do for j = 1, 2 do assert.equal(0.5, ru[i][j]) end end
  end)

  it("gives no gradient through Any and All", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    local y = tf.cast(tf.reduce_any(tf.greater(x, 0)), tf.float64) + tf.cast(tf.reduce_all(tf.less(x, 2)), tf.float64)
    assert.is_nil(tf.gradients(y, x)[1])
  end)

  it("ReducedShape: the keepdims shape of a reduction", function()
    local function reduced_shape(shape, axes)
      local attrs = axes and {axis = G.attr.ints(axes)} or nil
      return G.op{"ReducedShape", inputs = {shape}, attrs = attrs}
    end
    local s = tf.constant({2, 3, 4}, tf.int32)
    assert.same({1, 3, 1}, run(reduced_shape(s, {0, -1})):totable())
    assert.same({1, 1, 1}, run(reduced_shape(s)):totable())
    assert.same({2, 3, 4}, run(reduced_shape(s, {})):totable())
    local s64 = tf.constant({5, 6}, tf.int64)
    local r = reduced_shape(s64, {1})
    assert.equal(tf.int64, r.dtype)
    assert.same({2}, r:get_shape():as_list())
    assert.same({5, 1}, run(r):totable())
    assert.matches("axis 3 is out of range for a tensor of rank 3", error_of(reduced_shape, s, {3}))
    assert.matches("names dimension 0 a second time", error_of(reduced_shape, s, {0, -3}))
    assert.matches("the shape must be an int32 or int64 vector",
                   error_of(reduced_shape, tf.constant({2.0}, tf.float64), {0}))
    -- checked again at run time when the length is unknown
    local p = tf.placeholder(tf.int32, {-1}, "p")
    local rp = reduced_shape(p, {-2})
    assert.same({4, 1, 6}, run(rp, {[p] = {4, 5, 6}}):totable())
    assert.matches("axis %-2 is out of range for a tensor of rank 1", error_of(run, rp, {[p] = {4}}))
  end)
end)
