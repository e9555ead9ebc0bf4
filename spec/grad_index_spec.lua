-- Gradient rules of the indexing and selection ops: Gather, GatherNd,
-- ScatterNd, Pad (all modes), ReverseV2, Cumsum, Cumprod, OneHot, TopKV2, BooleanMask,
-- embedding_lookup, and the helper ops their rules build (GatherGrad,
-- MirrorPadGrad, BooleanMaskGrad), each checked against central differences
-- in float64, with hand-computed values, unknown dims fed at run time and the
-- gradient of the gradient.
local tf = require("moonflow")
local H = require("spec.helpers")
local check_grad_of_grad = H.check_grad_of_grad
local check_grad, numel, values = H.check_grad, H.numel, H.values

local function const(shape, seed)
  return tf.constant(values(numel(shape), seed), {dtype = tf.float64, shape = shape})
end

-- Checks the rule of the op the rule built (the gradient's gradient through
-- dy). x is a constant: the rule may read its shape.
local function zeros(shape) return tf.Array.new(tf.float64, shape) end
local function grad(y, x, dy) return tf.gradients(y, x, dy)[1] end

-- The op types built under the gradients/ scope.
local function grad_op_types()
  local seen = {}
  for _, op in ipairs(tf.get_default_graph():get_operations()) do
    if op.name:sub(1, 10) == "gradients/" then seen[op.type] = true end
  end
  return seen
end

describe("gradients of gathers and scatters", function()
  before_each(function() tf.reset_default_graph() end)

  it("Gather: rows read twice get dy twice; any axis, batch_dims, n-d indices", function()
    local x = tf.placeholder(tf.float64, {4, 3}, "x")
    local y = tf.gather(x, {3, 0, 3})
    local g = grad(y, x)
    assert.same({4, 3}, g:get_shape():as_list())
    assert.same({{1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {2, 2, 2}}, tf.Session():run(g, {[x] = zeros({4, 3})}):totable())
    assert.is_true(grad_op_types().GatherGrad)
    check_grad(x, {4, 3}, y, {3, 3})
    check_grad(x, {4, 3}, tf.gather(x, {2, 0, 2, 2}, {axis = 1}), {4, 4})
    check_grad(x, {4, 3}, tf.gather(x, {{1, 1}, {0, 2}}, {axis = -1}), {4, 2, 2})
    check_grad(x, {4, 3}, tf.gather(x, 2), {3})
    check_grad(x, {4, 3}, tf.gather(x, {{0, 2, 2}, {1, 1, 0}, {2, 0, 1}, {0, 0, 0}}, {axis = 1, batch_dims = 1}), {4, 3})
    local x3 = tf.placeholder(tf.float64, {2, 3, 2}, "x3")
    check_grad(x3, {2, 3, 2}, tf.gather(x3, {{2, 2}, {0, 1}}, {axis = 1, batch_dims = 1}), {2, 2, 2})
  end)

  it("Gather with unknown dims, and the gradient of GatherGrad", function()
    local u = tf.placeholder(tf.float64, {-1, 2}, "u")
    local i = tf.placeholder(tf.int32, {-1}, "i")
    local g = grad(tf.gather(u, i), u)
    assert.same({-1, 2}, g:get_shape():as_list())
    local got = tf.Session():run(g, {[u] = zeros({3, 2}), [i] = {1, 1, 2}})
    assert.same({{0, 0}, {2, 2}, {1, 1}}, got:totable())
    local k = const({4, 3})
    check_grad_of_grad(k, {4, 3}, tf.gather(k, {3, 0, 3}), {3, 3})
    check_grad_of_grad(k, {4, 3}, tf.gather(k, {1, 1}, {axis = 1}), {4, 2})
  end)

  it("GatherNd: dy scattered back, duplicates added; its gradient gathers again", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local y = tf.gather_nd(x, {{0, 1}, {1, 2}, {0, 1}})
    local g = grad(y, x, tf.constant({1, 2, 3}, tf.float64))
    assert.same({{0, 4, 0}, {0, 0, 2}}, tf.Session():run(g, {[x] = zeros({2, 3})}):totable())
    assert.is_true(grad_op_types().ScatterNd)
    check_grad(x, {2, 3}, y, {3})
    check_grad(x, {2, 3}, tf.gather_nd(x, {{1}, {0}, {1}}), {3, 3})
    local k = const({2, 3})
    check_grad_of_grad(k, {2, 3}, tf.gather_nd(k, {{0, 1}, {1, 2}, {0, 1}}), {3})
  end)

  it("ScatterNd: each update's gradient is dy at its index; second order", function()
    local u = tf.placeholder(tf.float64, {3}, "u")
    local y = tf.scatter_nd({{4}, {1}, {4}}, u, {5})
    local g = grad(y, u, tf.constant({10, 20, 30, 40, 50}, tf.float64))
    assert.same({50, 20, 50}, tf.Session():run(g, {[u] = zeros({3})}):totable())
    check_grad(u, {3}, y, {5})
    local u2 = tf.placeholder(tf.float64, {2, 2}, "u2")
    check_grad(u2, {2, 2}, tf.scatter_nd({{2}, {0}}, u2, {3, 2}), {3, 2})
    local k = const({3})
    check_grad_of_grad(k, {3}, tf.scatter_nd({{4}, {1}, {4}}, k, {5}), {5})
  end)

  it("embedding_lookup: through gather, sharded tables and max_norm", function()
    local p = tf.placeholder(tf.float64, {4, 2}, "p")
    check_grad(p, {4, 2}, tf.nn.embedding_lookup(p, {{1, 1}, {3, 0}}), {2, 2, 2})
    local a = tf.placeholder(tf.float64, {2, 2}, "a")
    local b = tf.constant({{5, 6}}, tf.float64)
    check_grad(a, {2, 2}, tf.nn.embedding_lookup({a, b}, {2, 1, 0}), {3, 2})
    local init = {3, 4, 0.3, 0.4, -2, 1, 0.1, 0.2}
    check_grad(p, {4, 2}, tf.nn.embedding_lookup(p, {0, 1, 2, 3, 0}, {max_norm = 1}), {5, 2}, {x_init_value = init},
               1e-7)
  end)
end)

describe("gradients of pads, reversals and running sums", function()
  before_each(function() tf.reset_default_graph() end)

  it("Pad CONSTANT: dy sliced back (a StridedSlice)", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local y = tf.pad(x, {{1, 0}, {2, 1}}, {constant_values = 5})
    local dy = tf.reshape(tf.range(1, 19, 1, {dtype = tf.float64}), {3, 6})
    assert.same({{9, 10, 11}, {15, 16, 17}}, tf.Session():run(grad(y, x, dy), {[x] = zeros({2, 3})}):totable())
    assert.is_true(grad_op_types().StridedSlice)
    check_grad(x, {2, 3}, y, {3, 6})
    check_grad(x, {2, 3}, tf.pad(x, {{0, 0}, {0, 2}}), {2, 5})
    local u = tf.placeholder(tf.float64, {-1, 3}, "u")
    local gu = grad(tf.pad(u, {{2, 1}, {0, 0}}), u)
    assert.same({-1, 3}, gu:get_shape():as_list())
    assert.same({1, 3}, tf.Session():run(gu, {[u] = zeros({1, 3})}):shape())
    local k = const({2, 3})
    check_grad_of_grad(k, {2, 3}, tf.pad(k, {{1, 0}, {2, 1}}), {3, 6})
  end)

  it("Pad REFLECT and SYMMETRIC: the mirrored copies add back", function()
    local v = tf.placeholder(tf.float64, {3}, "v")
    local sess = tf.Session()
    -- REFLECT [a b c] by (2, 0) is [c b a b c]: b and c appear twice
    assert.same({1, 2, 2}, sess:run(grad(tf.pad(v, {{2, 0}}, "REFLECT"), v), {[v] = zeros({3})}):totable())
    -- SYMMETRIC [a b c] by (1, 2) is [a a b c c b]
    assert.same({2, 2, 2}, sess:run(grad(tf.pad(v, {{1, 2}}, "SYMMETRIC"), v), {[v] = zeros({3})}):totable())
    assert.is_true(grad_op_types().MirrorPadGrad)
    local x = tf.placeholder(tf.float64, {3, 4}, "x")
    check_grad(x, {3, 4}, tf.pad(x, {{2, 1}, {1, 3}}, "REFLECT"), {6, 8})
    check_grad(x, {3, 4}, tf.pad(x, {{3, 0}, {4, 2}}, "SYMMETRIC"), {6, 10})
    local k = const({3, 4})
    check_grad_of_grad(k, {3, 4}, tf.pad(k, {{2, 1}, {1, 3}}, "REFLECT"), {6, 8})
    check_grad_of_grad(k, {3, 4}, tf.pad(k, {{3, 0}, {4, 2}}, "SYMMETRIC"), {6, 10})
    local u = tf.placeholder(tf.float64, {-1}, "u")
    local gu = grad(tf.pad(u, {{1, 1}}, "REFLECT"), u)
    assert.same({-1}, gu:get_shape():as_list())
    assert.same({1, 3, 1}, sess:run(gu, {[u] = zeros({3})}):totable())
  end)

  it("ReverseV2: dy reversed the same way", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local y = tf.reverse(x, {1})
    local dy = tf.constant({{1, 2, 3}, {4, 5, 6}}, tf.float64)
    assert.same({{3, 2, 1}, {6, 5, 4}}, tf.Session():run(grad(y, x, dy), {[x] = zeros({2, 3})}):totable())
    check_grad(x, {2, 3}, y, {2, 3})
    check_grad(x, {2, 3}, tf.reverse(x, {0, -1}), {2, 3})
    local k = const({2, 3})
    check_grad_of_grad(k, {2, 3}, tf.reverse(k, {0}), {2, 3})
  end)

  it("Cumsum: dy summed the other way, every combination of exclusive and reverse", function()
    local x = tf.placeholder(tf.float64, {4}, "x")
    local sess = tf.Session()
    local z = {[x] = zeros({4})}
    assert.same({4, 3, 2, 1}, sess:run(grad(tf.cumsum(x), x), z):totable())
    assert.same({3, 2, 1, 0}, sess:run(grad(tf.cumsum(x, {exclusive = true}), x), z):totable())
    assert.same({1, 2, 3, 4}, sess:run(grad(tf.cumsum(x, {reverse = true}), x), z):totable())
    assert.same({0, 1, 2, 3}, sess:run(grad(tf.cumsum(x, {exclusive = true, reverse = true}), x), z):totable())
    local m = tf.placeholder(tf.float64, {3, 4}, "m")
    for _, axis in ipairs({0, 1, -1}) do
      for _, exclusive in ipairs({false, true}) do
        for _, reverse in ipairs({false, true}) do
          check_grad(m, {3, 4}, tf.cumsum(m, {axis = axis, exclusive = exclusive, reverse = reverse}), {3, 4})
        end
      end
    end
    local k = const({3, 4})
    check_grad_of_grad(k, {3, 4}, tf.cumsum(k, {axis = 1, exclusive = true}), {3, 4})
  end)

  it("Cumprod: exact at zeros too (one, several, first or last along the scan), any axis and direction", function()
    local x = tf.placeholder(tf.float64, {4}, "x")
    local sess = tf.Session()
    -- d/dx_k of sum(cumprod(x)), by hand: x = {2, 0, 3, 4} has products {2, 0, 0, 0}
    assert.same({1, 32, 0, 0}, sess:run(grad(tf.cumprod(x), x), {[x] = {2, 0, 3, 4}}):totable())
    assert.same({1, 8, 0, 0}, sess:run(grad(tf.cumprod(x, {exclusive = true}), x), {[x] = {2, 0, 3, 4}}):totable())
    assert.same({0, 36, 4, 4}, sess:run(grad(tf.cumprod(x, {reverse = true}), x), {[x] = {2, 0, 3, 4}}):totable())
    local inits = {{0.5, -1.3, 2.1, 0.7}, {2, 0, 3, 4}, {0, 2, 0, 3}, {0, 0, 0, 0}, {1.5, 2, 3, 0}, {-1, 0, -1, 2}}
    for _, exclusive in ipairs({false, true}) do
      for _, reverse in ipairs({false, true}) do
        local y = tf.cumprod(x, {exclusive = exclusive, reverse = reverse})
        for _, init in ipairs(inits) do
          check_grad(x, {4}, y, {4}, {x_init_value = tf.array(init, tf.float64)})
        end
      end
    end
    local m = tf.placeholder(tf.float64, {3, 4}, "m")
    local with_zeros = tf.array({{0.5, 0, 1.2, -0.8}, {1.1, 0.9, 0, 0}, {0, -1.4, 0.6, 1.3}}, tf.float64)
    for _, axis in ipairs({0, 1, -1, -2}) do
      for _, exclusive in ipairs({false, true}) do
        for _, reverse in ipairs({false, true}) do
          local y = tf.cumprod(m, {axis = axis, exclusive = exclusive, reverse = reverse})
          check_grad(m, {3, 4}, y, {3, 4})
          check_grad(m, {3, 4}, y, {3, 4}, {x_init_value = with_zeros})
        end
      end
    end
    local k = const({3, 4})
    check_grad_of_grad(k, {3, 4}, tf.cumprod(k, {axis = 1, exclusive = true, reverse = true}), {3, 4})
    -- the second derivative where x has no zeros
    check_grad(m, {3, 4}, tf.gradients(tf.cumprod(m, 1), m)[1], {3, 4})
  end)
end)

describe("gradients of selections", function()
  before_each(function() tf.reset_default_graph() end)

  it("OneHot: on_value gets dy where the mask is 1, off_value the rest; none to indices", function()
    local on = tf.placeholder(tf.float64, {}, "on")
    local off = tf.placeholder(tf.float64, {}, "off")
    local idx = tf.constant({0, 2, -1}, tf.int32)
    local y = tf.one_hot(idx, 3, on, off)
    local g = tf.gradients(y, {on, off, idx})
    local r = tf.Session():run({g[1], g[2]}, {[on] = 1, [off] = 0})
    assert.equal(2, r[1])
    assert.equal(7, r[2])
    assert.is_nil(g[3])
    check_grad(on, {}, tf.one_hot(idx, 3, on, -1.5), {3, 3}, {x_init_value = 0.7})
    check_grad(off, {}, tf.one_hot({{1, 0}, {3, 1}}, 3, 2.5, off, {axis = 1}) * tf.constant(values(12), {dtype = tf.float64, shape = {2, 3, 2}}), {2, 3, 2}, {x_init_value = -0.2})
  end)

  it("TopKV2: dy of the values added at their indices", function()
    local x = tf.placeholder(tf.float64, {4}, "x")
    local v = tf.nn.top_k(x, 2)
    local g = grad(v, x, tf.constant({10, 20}, tf.float64))
    assert.same({0, 10, 0, 20}, tf.Session():run(g, {[x] = {1, 5, 3, 4}}):totable())
    local m = tf.placeholder(tf.float64, {3, 5}, "m")
    -- well separated values, so that the finite differences keep the order
    local init = {}
    for j = 1, 15 do init[j] = ((j * 7) % 15) * 0.1 end
    local vm = tf.nn.top_k(m, 3)
    check_grad(m, {3, 5}, vm, {3, 3}, {x_init_value = init})
    check_grad(m, {3, 5}, tf.nn.top_k(m, 5), {3, 5}, {x_init_value = init})
    local u = tf.placeholder(tf.float64, {-1, 3}, "u")
    local gu = grad(tf.nn.top_k(u, 1), u)
    assert.same({-1, 3}, gu:get_shape():as_list())
    assert.same({{0, 1, 0}, {1, 0, 0}}, tf.Session():run(gu, {[u] = {{1, 3, 2}, {5, 4, 0}}}):totable())
    local k = tf.constant({{0.1, 0.5, 0.3}, {0.9, 0.2, 0.4}}, tf.float64)
    check_grad_of_grad(k, {2, 3}, tf.nn.top_k(k, 2), {2, 2})
  end)

  it("BooleanMask: dy put back where the mask is true; second order", function()
    local x = tf.placeholder(tf.float64, {3, 2}, "x")
    local y = tf.boolean_mask(x, {true, false, true})
    local g = grad(y, x, tf.constant({{1, 2}, {3, 4}}, tf.float64))
    assert.same({{1, 2}, {0, 0}, {3, 4}}, tf.Session():run(g, {[x] = zeros({3, 2})}):totable())
    assert.is_true(grad_op_types().BooleanMaskGrad)
    check_grad(x, {3, 2}, y, {2, 2})
    check_grad(x, {3, 2}, tf.boolean_mask(x, {{true, false}, {false, true}, {true, true}}), {4})
    check_grad(x, {3, 2}, tf.boolean_mask(x, {false, true}, {axis = 1}), {3, 1})
    local k = const({3, 2})
    check_grad_of_grad(k, {3, 2}, tf.boolean_mask(k, {true, false, true}), {2, 2})
    -- a mask fed at run time
    local m = tf.placeholder(tf.bool, {-1}, "m")
    local gm = grad(tf.boolean_mask(x, m), x)
    assert.same({3, 2}, gm:get_shape():as_list())
    local sess = tf.Session()
    assert.same({{0, 0}, {1, 1}, {1, 1}}, sess:run(gm, {[x] = zeros({3, 2}), [m] = {false, true, true}}):totable())
    assert.same({{0, 0}, {0, 0}, {0, 0}}, sess:run(gm, {[x] = zeros({3, 2}), [m] = {false, false, false}}):totable())
    -- a constant mask fed another value
    local c = tf.constant({true, false, false})
    local gc = grad(tf.boolean_mask(x, c), x)
    assert.same({{1, 1}, {0, 0}, {1, 1}}, sess:run(gc, {[x] = zeros({3, 2}), [c] = {true, false, true}}):totable())
  end)

  it("ArgMax, ArgMin, InTopK and SequenceMask pass no gradient", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local y = tf.cast(tf.argmax(x, 1), tf.float64) + tf.cast(tf.argmin(x, 1), tf.float64) +
              tf.cast(tf.nn.in_top_k(x, {0, 1}, 1), tf.float64)
    assert.is_nil(tf.gradients(y, x)[1])
    local z = tf.gradients(tf.reduce_sum(x) + y, x)[1]
    assert.same({{2, 2, 2}, {2, 2, 2}}, tf.Session():run(z, {[x] = zeros({2, 3})}):totable())
  end)
end)
