-- Gradient rules of the shape and layout ops: Reshape, Squeeze, ExpandDims,
-- Transpose, Tile, Slice, StridedSlice, Pack, Unpack, Concat, SplitV, Fill,
-- and the helper ops of their gradients (TileGrad, StridedSliceGrad, SplitV).
-- Each is checked against central differences in float64, with hand-computed
-- values, unknown dimensions fed at run time, and the gradient of the gradient.
local tf = require("moonflow")
local H = require("spec.helpers")
local check_grad_of_grad = H.check_grad_of_grad
local check_grad, numel = H.check_grad, H.numel
local values = H.values
local error_of = H.error_of
local G = require("moonflow.graph")


-- A float64 constant of `shape` with distinct values.
local function const(shape, seed)
  return tf.constant(values(numel(shape), seed), {dtype = tf.float64, shape = shape})
end

-- The gradient rule is linear in the incoming gradient dy; this checks the
-- rule of the op the rule built (its gradient with respect to dy), so that
-- second derivatives through the op are right. x is a constant: the rule may
-- read its shape.
-- A float64 tf.Array of `shape` with those values, to feed.
local function arr(shape, seed)
  local a = tf.Array.new(tf.float64, shape)
  local d = a:data()
  for i, v in ipairs(values(numel(shape), seed)) do d[i - 1] = v end
  return a
end

local function run(t, feeds) return tf.Session():run(t, feeds) end

local function op_types(prefix)
  local seen = {}
  for _, op in ipairs(tf.get_default_graph():get_operations()) do
    if op.name:sub(1, #prefix) == prefix then seen[op.type] = true end
  end
  return seen
end

describe("gradients of reshaping ops", function()
  before_each(function() tf.reset_default_graph() end)

  it("Reshape: dy reshaped back, also with -1 and unknown dims", function()
    local x = tf.placeholder(tf.float64, {2, 3, 2}, "x")
    check_grad(x, {2, 3, 2}, tf.reshape(x, {3, 4}), {3, 4})
    check_grad(x, {2, 3, 2}, tf.reshape(x, {-1}), {12})
    check_grad(x, {2, 3, 2}, tf.reshape(x, {2, 1, -1, 2}), {2, 1, 3, 2})
    local g = tf.gradients(tf.reshape(x, {6, 2}), x, tf.constant({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}}, tf.float64))[1]
    assert.same({2, 3, 2}, g:get_shape():as_list())
    assert.same({{{1, 2}, {3, 4}, {5, 6}}, {{7, 8}, {9, 10}, {11, 12}}}, run(g, {[x] = arr({2, 3, 2})}):totable())

    local u = tf.placeholder(tf.float64, {-1, 3}, "u")
    local gu = tf.gradients(tf.reshape(u, {-1}), u)[1]
    assert.same({-1, 3}, gu:get_shape():as_list())
    assert.same({{1, 1, 1}, {1, 1, 1}}, run(gu, {[u] = {{1, 2, 3}, {4, 5, 6}}}):totable())
    check_grad(u, {4, 3}, tf.reshape(u, {2, -1}), {2, 6})
    local k = const({2, 3, 2})
    check_grad_of_grad(k, {2, 3, 2}, tf.reshape(k, {4, 3}), {4, 3})
  end)

  it("Squeeze: all size-1 dims, listed ones, negative axes, unknown dims", function()
    local x = tf.placeholder(tf.float64, {1, 3, 1, 2}, "x")
    check_grad(x, {1, 3, 1, 2}, tf.squeeze(x), {3, 2})
    check_grad(x, {1, 3, 1, 2}, tf.squeeze(x, {0}), {3, 1, 2})
    check_grad(x, {1, 3, 1, 2}, tf.squeeze(x, {-2}), {1, 3, 2})
    check_grad(x, {1, 3, 1, 2}, tf.squeeze(x, {0, -2}), {3, 2})
    local u = tf.placeholder(tf.float64, {-1, 1, -1}, "u")
    local y = tf.squeeze(u, 1)
    local g = tf.gradients(y, u)[1]
    assert.same({-1, 1, -1}, g:get_shape():as_list())
    assert.same({2, 1, 3}, run(g, {[u] = {{{1, 2, 3}}, {{4, 5, 6}}}}):shape())
    check_grad(u, {2, 1, 3}, y, {2, 3})
    -- unknown rank: squeezing every size-1 dim
    local r = tf.placeholder(tf.float64, nil, "r")
    check_grad(r, {2, 1, 2}, tf.squeeze(r), {2, 2})
  end)

  it("ExpandDims: front, back, negative and middle axes", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    check_grad(x, {2, 3}, tf.expand_dims(x, 0), {1, 2, 3})
    check_grad(x, {2, 3}, tf.expand_dims(x, -1), {2, 3, 1})
    check_grad(x, {2, 3}, tf.expand_dims(x, 1), {2, 1, 3})
    check_grad(x, {2, 3}, tf.expand_dims(x, -2), {2, 1, 3})
    local u = tf.placeholder(tf.float64, {-1}, "u")
    local g = tf.gradients(tf.expand_dims(u, 0), u, tf.constant({{10, 20, 30}}, tf.float64))[1]
    assert.same({10, 20, 30}, run(g, {[u] = {1, 2, 3}}):totable())
    local k = const({2, 3})
    check_grad_of_grad(k, {2, 3}, tf.expand_dims(k, 1), {2, 1, 3})
    check_grad_of_grad(k, {2, 3}, tf.squeeze(tf.expand_dims(k, 1)), {2, 3})
  end)

  it("Transpose: dy transposed by the inverse permutation", function()
    local x = tf.placeholder(tf.float64, {2, 3, 4}, "x")
    for _, perm in ipairs({{0, 1, 2}, {1, 0, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}}) do
      local y = tf.transpose(x, perm)
      local s = {}
      for i, p in ipairs(perm) do s[i] = ({2, 3, 4})[p + 1] end
      check_grad(x, {2, 3, 4}, y, s)
    end
    check_grad(x, {2, 3, 4}, tf.transpose(x), {4, 3, 2})
    -- hand values: y = x^T with y[i][j] = x[j][i]; dy[i][j] = 10 i + j lands at dx[j][i]
    local m = tf.placeholder(tf.float64, {2, 3}, "m")
    local dy = tf.constant({{0, 1}, {10, 11}, {20, 21}}, tf.float64)
    local g = tf.gradients(tf.transpose(m), m, dy)[1]
    assert.same({{0, 10, 20}, {1, 11, 21}}, run(g, {[m] = arr({2, 3})}):totable())
    -- a cyclic permutation is not its own inverse
    local c = tf.placeholder(tf.float64, {1, 2, 3}, "c")
    local gc = tf.gradients(tf.transpose(c, {2, 0, 1}), c,
                            tf.constant({{{1, 2}}, {{3, 4}}, {{5, 6}}}, tf.float64))[1]
    assert.same({{{1, 3, 5}, {2, 4, 6}}}, run(gc, {[c] = arr({1, 2, 3})}):totable())
    -- unknown dims and unknown rank (default perm)
    local u = tf.placeholder(tf.float64, {-1, -1, 2}, "u")
    check_grad(u, {3, 1, 2}, tf.transpose(u, {2, 0, 1}), {2, 3, 1})
    local r = tf.placeholder(tf.float64, nil, "r")
    check_grad(r, {2, 3}, tf.transpose(r), {3, 2})
    local k = const({2, 3, 4})
    check_grad_of_grad(k, {2, 3, 4}, tf.transpose(k, {1, 2, 0}), {3, 4, 2})
  end)
end)

describe("gradient of Tile", function()
  before_each(function() tf.reset_default_graph() end)

  it("sums dy over the tiles", function()
    local x = tf.placeholder(tf.float64, {2}, "x")
    local g = tf.gradients(tf.tile(x, {3}), x, tf.constant({1, 2, 3, 4, 5, 6}, tf.float64))[1]
    assert.same({2}, g:get_shape():as_list())
    assert.same({1 + 3 + 5, 2 + 4 + 6}, run(g, {[x] = {7, 8}}):totable())
    local m = tf.placeholder(tf.float64, {1, 2}, "m")
    local gm = tf.gradients(tf.tile(m, {2, 2}), m, tf.constant({{1, 2, 3, 4}, {5, 6, 7, 8}}, tf.float64))[1]
    assert.same({{1 + 3 + 5 + 7, 2 + 4 + 6 + 8}}, run(gm, {[m] = {{0, 0}}}):totable())
  end)

  it("passes gradient checks for several multiples", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    check_grad(x, {2, 3}, tf.tile(x, {1, 1}), {2, 3})
    check_grad(x, {2, 3}, tf.tile(x, {2, 1}), {4, 3})
    check_grad(x, {2, 3}, tf.tile(x, {1, 3}), {2, 9})
    check_grad(x, {2, 3}, tf.tile(x, {3, 2}), {6, 6})
    local c = tf.placeholder(tf.float64, {2, 1, 2}, "c")
    check_grad(c, {2, 1, 2}, tf.tile(c, {2, 3, 1}), {4, 3, 2})
    local s = tf.placeholder(tf.float64, {}, "s")
    check_grad(s, {}, tf.tile(s, {}), {})
  end)

  it("gives zeros when a multiple is 0", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local y = tf.tile(x, {0, 2})
    assert.same({0, 6}, y:get_shape():as_list())
    local g = tf.gradients(y, x)[1]
    assert.same({2, 3}, g:get_shape():as_list())
    assert.same({{0, 0, 0}, {0, 0, 0}}, run(g, {[x] = arr({2, 3})}):totable())
  end)

  it("works with unknown dimensions", function()
    local u = tf.placeholder(tf.float64, {-1, 2}, "u")
    local y = tf.tile(u, {2, 3})
    local g = tf.gradients(y, u)[1]
    assert.same({-1, 2}, g:get_shape():as_list())
    assert.same({{6, 6}, {6, 6}, {6, 6}}, run(g, {[u] = {{1, 2}, {3, 4}, {5, 6}}}):totable())
    check_grad(u, {3, 2}, y, {6, 6})
    local r = tf.placeholder(tf.float64, nil, "r")
    check_grad(r, {2, 2}, tf.tile(r, {2, 1}), {4, 2})
  end)

  it("handles rank 8 with every multiple above 1 (a 16-dimensional view)", function()
    local dims = {2, 1, 1, 2, 1, 1, 1, 1}
    local mult = {2, 2, 3, 2, 2, 2, 2, 2}
    local x = tf.placeholder(tf.float64, dims, "x")
    local y = tf.tile(x, mult)
    local out_dims, n = {}, 1
    for i = 1, 8 do out_dims[i] = dims[i] * mult[i]; n = n * out_dims[i] end
    local seed = {}
    for i = 1, n do seed[i] = i % 17 - 8 end
    local dy = tf.constant(seed, {dtype = tf.float64, shape = out_dims})
    local g = run(tf.gradients(y, x, dy)[1], {[x] = arr(dims)})
    -- reference: every output element adds its seed to the input element it copies
    local expect = {0, 0, 0, 0}
    local idx = {}
    for k = 0, n - 1 do
      local rem = k
      for d = 8, 1, -1 do idx[d] = rem % out_dims[d]; rem = (rem - idx[d]) / out_dims[d] end
      local src = 0
      for d = 1, 8 do src = src * dims[d] + idx[d] % dims[d] end
      expect[src + 1] = expect[src + 1] + seed[k + 1]
    end
    local got, data = {}, g:data()
    for i = 1, 4 do got[i] = data[i - 1] end
    assert.same(expect, got)
  end)

  it("differentiates TileGrad again (by tiling)", function()
    local x = const({2, 3})
    check_grad_of_grad(x, {2, 3}, tf.tile(x, {2, 2}), {4, 6})
    local ops = op_types("gradients/")
    assert.is_true(ops.TileGrad)
  end)

  it("reports TileGrad misuse clearly", function()
    local dy = tf.placeholder(tf.float64, {4, 3}, "dy")
    local shape = tf.constant({2, 2}, tf.int32)
    assert.matches("not shape %[2,2%] tiled by the multiples",
                   error_of(G.op, {"TileGrad", inputs = {dy, shape}, attrs = {multiples = G.attr.ints{2, 1}}}))
    assert.matches("multiples has 1 entries",
                   error_of(G.op, {"TileGrad", inputs = {dy, shape}, attrs = {multiples = G.attr.ints{2}}}))
    assert.matches("the shape must be an int32 or int64 vector",
                   error_of(G.op, {"TileGrad", inputs = {dy, dy}, attrs = {multiples = G.attr.ints{2, 1}}}))
    local ok = G.op{"TileGrad", inputs = {dy, tf.constant({2, 3}, tf.int32)}, attrs = {multiples = G.attr.ints{2, 1}}}
    assert.same({{5, 7, 9}, {17, 19, 21}},
                run(ok, {[dy] = {{1, 2, 3}, {4, 5, 6}, {4, 5, 6}, {13, 14, 15}}}):totable())
    -- a run-time gradient of the wrong shape
    local u = tf.placeholder(tf.float64, {-1, 3}, "u")
    local bad = G.op{"TileGrad", inputs = {u, tf.constant({2, 3}, tf.int32)}, attrs = {multiples = G.attr.ints{2, 1}}}
    assert.matches("not shape %[2,3%] tiled", error_of(run, bad, {[u] = {{1, 2, 3}}}))
  end)
end)

describe("gradients of Slice and StridedSlice", function()
  before_each(function() tf.reset_default_graph() end)

  it("Slice: dy padded back with zeros", function()
    local x = tf.placeholder(tf.float64, {4}, "x")
    local g = tf.gradients(tf.slice(x, {1}, {2}), x, tf.constant({10, 20}, tf.float64))[1]
    assert.same({0, 10, 20, 0}, run(g, {[x] = arr({4})}):totable())
    local m = tf.placeholder(tf.float64, {3, 4}, "m")
    check_grad(m, {3, 4}, tf.slice(m, {1, 0}, {2, 3}), {2, 3})
    check_grad(m, {3, 4}, tf.slice(m, {0, 1}, {-1, -1}), {3, 3})
    check_grad(m, {3, 4}, tf.slice(m, {2, 3}, {1, 1}), {1, 1})
    check_grad(m, {3, 4}, tf.slice(m, {1, 1}, {0, 2}), {0, 2})
    local gm = tf.gradients(tf.slice(m, {1, 2}, {-1, 2}), m, tf.constant({{1, 2}, {3, 4}}, tf.float64))[1]
    assert.same({{0, 0, 0, 0}, {0, 0, 1, 2}, {0, 0, 3, 4}}, run(gm, {[m] = arr({3, 4})}):totable())
  end)

  it("Slice: unknown dimensions, size -1 resolved at run time", function()
    local u = tf.placeholder(tf.float64, {-1, 3}, "u")
    local y = tf.slice(u, {1, 1}, {-1, 2})
    local g = tf.gradients(y, u)[1]
    assert.same({-1, 3}, g:get_shape():as_list())
    assert.same({{0, 0, 0}, {0, 1, 1}, {0, 1, 1}}, run(g, {[u] = arr({3, 3})}):totable())
    check_grad(u, {4, 3}, y, {3, 2})
  end)

  it("StridedSlice: hand values with negative strides", function()
    local x = tf.placeholder(tf.float64, {5}, "x")
    -- x[::-2] reads x[4], x[2], x[0]
    local y = tf.strided_slice(x, {0}, {0}, {strides = {-2}, begin_mask = 1, end_mask = 1})
    local g = tf.gradients(y, x, tf.constant({1, 2, 3}, tf.float64))[1]
    assert.same({3, 0, 2, 0, 1}, run(g, {[x] = values(5)}):totable())
    -- x[3:0:-1] reads x[3], x[2], x[1]
    local y2 = tf.strided_slice(x, {3}, {0}, {strides = {-1}})
    local g2 = tf.gradients(y2, x, tf.constant({1, 2, 3}, tf.float64))[1]
    assert.same({0, 3, 2, 1, 0}, run(g2, {[x] = values(5)}):totable())
    -- x[-2] (shrink): a scalar gradient lands on one element
    local g3 = tf.gradients(x[-2], x)[1]
    assert.same({0, 0, 0, 1, 0}, run(g3, {[x] = values(5)}):totable())
  end)

  it("StridedSlice: gradient checks with masks, new axes, ellipsis and strides", function()
    local x = tf.placeholder(tf.float64, {3, 4, 5}, "x")
    local S = {3, 4, 5}
    local cases = {
      -- x[1:3, ::2, -1:0:-2]
      {{1, 0, -1}, {3, 0, 0}, {strides = {1, 2, -2}, begin_mask = 2, end_mask = 2}, {2, 2, 2}},
      -- x[::-1, 1, :] (shrink the middle axis)
      {{0, 1, 0}, {0, 2, 0}, {strides = {-1, 1, 1}, begin_mask = 5, end_mask = 5, shrink_axis_mask = 2}, {3, 5}},
      -- x[..., 2] (ellipsis then shrink)
      {{0, 2}, {0, 3}, {strides = {1, 1}, ellipsis_mask = 1, shrink_axis_mask = 2}, {3, 4}},
      -- x[:, tf.newaxis, 1:3] (new axis)
      {{0, 0, 1}, {0, 0, 3}, {strides = {1, 1, 1}, begin_mask = 1, end_mask = 1, new_axis_mask = 2}, {3, 1, 2, 5}},
      -- x[-1, -3:, ::3]
      {{-1, -3, 0}, {0, 0, 0}, {strides = {1, 1, 3}, end_mask = 6, begin_mask = 4, shrink_axis_mask = 1}, {3, 2}},
      -- x[2:0:-1, 3:-5:-2, 4:1:-1]: negative strides everywhere
      {{2, 3, 4}, {0, -5, 1}, {strides = {-1, -2, -1}}, {2, 2, 3}},
      -- an empty slice
      {{2, 0, 0}, {1, 4, 5}, {strides = {1, 1, 1}}, {0, 4, 5}},
    }
    for _, c in ipairs(cases) do
      local y = tf.strided_slice(x, c[1], c[2], c[3])
      assert.same(c[4], y:get_shape():as_list())
      check_grad(x, S, y, c[4])
    end
    -- x[i] indexing, twice
    check_grad(x, S, x[1][-1], {5})
  end)

  it("StridedSlice: unknown dimensions and unknown rank", function()
    local u = tf.placeholder(tf.float64, {-1, -1}, "u")
    local y = tf.strided_slice(u, {0, -1}, {0, 0}, {strides = {2, -1}, begin_mask = 1, end_mask = 3})
    local g = tf.gradients(y, u)[1]
    assert.same({-1, -1}, g:get_shape():as_list())
    assert.same({{1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, run(g, {[u] = arr({3, 3})}):totable())
    check_grad(u, {5, 2}, y, {3, 2})
    local r = tf.placeholder(tf.float64, nil, "r")
    check_grad(r, {4, 3}, tf.strided_slice(r, {1}, {-1}), {2, 3})
    check_grad(r, {4, 3}, r[-1], {3})
  end)

  it("differentiates StridedSliceGrad again (by slicing)", function()
    local x = const({3, 4})
    check_grad_of_grad(x, {3, 4}, tf.strided_slice(x, {2, 0}, {0, 4}, {strides = {-1, 3}}), {2, 2})
    check_grad_of_grad(x, {3, 4}, tf.slice(x, {1, 1}, {2, -1}), {2, 3})
    check_grad_of_grad(x, {3, 4}, x[1], {4})
    assert.is_true(op_types("gradients").StridedSliceGrad)
  end)

  it("reports StridedSliceGrad misuse clearly", function()
    local dy = tf.placeholder(tf.float64, {2}, "dy")
    local attrs = {begin = G.attr.ints{0}, ["end"] = G.attr.ints{3}}
    assert.matches("the gradient has shape %[2%], but this slice of a tensor of shape %[4%] has shape %[3%]",
                   error_of(G.op, {"StridedSliceGrad", inputs = {tf.constant({4}, tf.int32), dy}, attrs = attrs}))
    assert.matches("shape must be int32 or int64",
                   error_of(G.op, {"StridedSliceGrad", inputs = {dy, dy}, attrs = attrs}))
    local u = tf.placeholder(tf.float64, {-1}, "u")
    local y = G.op{"StridedSliceGrad", inputs = {tf.constant({4}, tf.int32), u}, attrs = attrs}
    assert.same({5, 6, 7, 0}, run(y, {[u] = {5, 6, 7}}):totable())
    assert.matches("the gradient has shape %[2%], but th[a-z ]+slice[a-z%[%] 0-9]+ has shape %[3%]", error_of(run, y, {[u] = {5, 6}}))
  end)
end)

describe("gradients of Pack, Unpack, Concat and SplitV", function()
  before_each(function() tf.reset_default_graph() end)

  it("Pack: dy unstacked along the axis", function()
    local a = tf.placeholder(tf.float64, {2}, "a")
    local b = tf.placeholder(tf.float64, {2}, "b")
    local dy = tf.constant({{1, 2}, {3, 4}}, tf.float64)
    local g = tf.gradients(tf.stack({a, b}), {a, b}, dy)
    local r = run({g[1], g[2]}, {[a] = {0, 0}, [b] = {0, 0}})
    assert.same({1, 2}, r[1]:totable())
    assert.same({3, 4}, r[2]:totable())
    local g1 = tf.gradients(tf.stack({a, b}, 1), {a, b}, dy)
    r = run({g1[1], g1[2]}, {[a] = {0, 0}, [b] = {0, 0}})
    assert.same({1, 3}, r[1]:totable())
    assert.same({2, 4}, r[2]:totable())
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    for axis, shape in pairs({[0] = {3, 2, 3}, [1] = {2, 3, 3}, [2] = {2, 3, 3}, [-1] = {2, 3, 3}, [-3] = {3, 2, 3}}) do
      check_grad(x, {2, 3}, tf.stack({x, x * 1, x}, axis), shape)
    end
    -- the same tensor stacked twice gets both gradients
    local gx = tf.gradients(tf.stack({a, a}), a, dy)[1]
    assert.same({4, 6}, run(gx, {[a] = {0, 0}}):totable())
  end)

  it("Unpack: the outputs' gradients stacked, zeros for unused outputs", function()
    local x = tf.placeholder(tf.float64, {3, 2}, "x")
    local parts = tf.unstack(x)
    local g = tf.gradients(parts[2], x, tf.constant({5, 6}, tf.float64))[1]
    assert.same({{0, 0}, {5, 6}, {0, 0}}, run(g, {[x] = arr({3, 2})}):totable())
    local cols = tf.unstack(x, {axis = -1})
    local gc = tf.gradients({cols[1], cols[2]}, x, {tf.constant({1, 2, 3}, tf.float64), tf.constant({4, 5, 6}, tf.float64)})[1]
    assert.same({{1, 4}, {2, 5}, {3, 6}}, run(gc, {[x] = arr({3, 2})}):totable())
    for _, axis in ipairs({0, 1, -1, -2}) do
      local outs = tf.unstack(x, {axis = axis})
      check_grad(x, {3, 2}, outs[#outs], axis % 2 == 0 and {2} or {3})
    end
    -- unknown dims with num given
    local u = tf.placeholder(tf.float64, {-1, 2}, "u")
    local us = tf.unstack(u, {axis = 1, num = 2})
    check_grad(u, {4, 2}, us[2], {4})
  end)

  it("Concat: dy cut into the inputs' sizes along the axis", function()
    local a = tf.placeholder(tf.float64, {2, 1}, "a")
    local b = tf.placeholder(tf.float64, {2, 2}, "b")
    local dy = tf.constant({{1, 2, 3}, {4, 5, 6}}, tf.float64)
    local g = tf.gradients(tf.concat({a, b}, 1), {a, b}, dy)
    assert.same({2, 1}, g[1]:get_shape():as_list())
    assert.same({2, 2}, g[2]:get_shape():as_list())
    local r = run({g[1], g[2]}, {[a] = {{0}, {0}}, [b] = {{0, 0}, {0, 0}}})
    assert.same({{1}, {4}}, r[1]:totable())
    assert.same({{2, 3}, {5, 6}}, r[2]:totable())
    local gn = tf.gradients(tf.concat({a, b}, -1), {a, b}, dy)
    r = run({gn[1], gn[2]}, {[a] = {{0}, {0}}, [b] = {{0, 0}, {0, 0}}})
    assert.same({{1}, {4}}, r[1]:totable())
    assert.same({{2, 3}, {5, 6}}, r[2]:totable())
  end)

  it("Concat: gradient checks along several axes, with a constant input", function()
    local x = tf.placeholder(tf.float64, {2, 3, 2}, "x")
    check_grad(x, {2, 3, 2}, tf.concat({x, x}, 0), {4, 3, 2})
    check_grad(x, {2, 3, 2}, tf.concat({x, tf.slice(x, {0, 0, 0}, {2, 1, 2}), x}, 1), {2, 7, 2})
    check_grad(x, {2, 3, 2}, tf.concat({tf.slice(x, {0, 1, 0}, {2, 2, 2}), x}, -2), {2, 5, 2})
    check_grad(x, {2, 3, 2}, tf.concat({const({2, 3, 1}), x}, -1), {2, 3, 3})
    check_grad(x, {2, 3, 2}, tf.concat({x}, 2), {2, 3, 2})
  end)

  it("Concat: unknown dimensions and unknown rank, sizes read at run time", function()
    local u = tf.placeholder(tf.float64, {-1, 2}, "u")
    local v = tf.placeholder(tf.float64, {3, 2}, "v")
    local y = tf.concat({u, v, u}, 0)
    local g = tf.gradients(y, {u, v})
    assert.same({-1, 2}, g[1]:get_shape():as_list())
    assert.same({3, 2}, g[2]:get_shape():as_list())
    local dy = {}
    for i = 1, 7 do dy[i] = {i, -i} end
    local dyt = tf.placeholder(tf.float64, {7, 2}, "dyt")
    local gd = tf.gradients(y, {u, v}, dyt)
    local r = run({gd[1], gd[2]}, {[u] = {{0, 0}, {0, 0}}, [v] = arr({3, 2}), [dyt] = dy})
    assert.same({{1 + 6, -1 - 6}, {2 + 7, -2 - 7}}, r[1]:totable())
    assert.same({{3, -3}, {4, -4}, {5, -5}}, r[2]:totable())
    check_grad(u, {1, 2}, tf.concat({u, const({3, 2}), u}, 0), {5, 2})
    local w = tf.placeholder(tf.float64, nil, "w")
    check_grad(w, {2, 2}, tf.concat({w, w * 1}, -1), {2, 4})
  end)

  it("Concat: more than eight inputs keep their static shapes", function()
    local xs = {}
    for i = 1, 10 do xs[i] = tf.placeholder(tf.float64, {2, i}, "x" .. i) end
    local y = tf.concat(xs, 1)
    assert.same({2, 55}, y:get_shape():as_list())
    local g = tf.gradients(y, xs, tf.reshape(tf.cast(tf.range(110), tf.float64), {2, 55}))
    local feeds = {}
    for i = 1, 10 do
      assert.same({2, i}, g[i]:get_shape():as_list())
      local row = {}
      for j = 1, i do row[j] = 0 end
      feeds[xs[i]] = {row, row}
    end
    g.n = nil  -- a plain list to fetch
    local r = run(g, feeds)
    -- input i starts at column (i-1)i/2 of the 55
    for i = 1, 10 do
      local c0 = (i - 1) * i / 2
      local expect = {{}, {}}
      for j = 1, i do expect[1][j] = c0 + j - 1; expect[2][j] = 55 + c0 + j - 1 end
      assert.same(expect, r[i]:totable())
    end
  end)

  it("differentiates the gradients of Pack, Unpack and Concat again", function()
    local x = const({2, 3})
    check_grad_of_grad(x, {2, 3}, tf.concat({x, x, tf.slice(x, {0, 1}, {2, 2})}, 1), {2, 8})
    check_grad_of_grad(x, {2, 3}, tf.stack({x, x}, 1), {2, 2, 3})
    check_grad_of_grad(x, {2, 3}, tf.unstack(x, {axis = 1})[3], {2})
    assert.is_true(op_types("gradients").SplitV)
  end)

  it("SplitV cuts by sizes, one of them -1, and checks them", function()
    local x = tf.constant({{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}}, tf.float64)
    local function split(sizes, axis, num)
      local op = G.build{"SplitV", inputs = {x, tf.constant(sizes, tf.int32)},
                         attrs = {axis = G.attr.int(axis), num_split = G.attr.int(num)}}
      return op.outputs
    end
    local p = split({2, -1, 1}, 1, 3)
    assert.same({2, 2}, p[2]:get_shape():as_list())
    local r = run(p)
    assert.same({{1, 2}, {6, 7}}, r[1]:totable())
    assert.same({{3, 4}, {8, 9}}, r[2]:totable())
    assert.same({{5}, {10}}, r[3]:totable())
    local q = run(split({1, 1}, -2, 2))
    assert.same({{6, 7, 8, 9, 10}}, q[2]:totable())
    assert.matches("the sizes add up to 4, but the dimension 1 being split has size 5",
                   error_of(split, {2, 2}, 1, 2))
    assert.matches("size_splits has 2 entries but num_split is 3", error_of(split, {2, 3}, 1, 3))
    assert.matches("sizes must be non%-negative", error_of(split, {-1, -1}, 1, 2))
    assert.matches("axis 2 is out of range", error_of(split, {2, 3}, 2, 2))
    -- its gradient concatenates, zeros for unused pieces
    local v = tf.placeholder(tf.float64, {2, 5}, "v")
    local pv = G.build{"SplitV", inputs = {v, tf.constant({3, 2}, tf.int32)},
                       attrs = {axis = G.attr.int(1), num_split = G.attr.int(2)}}.outputs
    local gv = tf.gradients(pv[2], v)[1]
    assert.same({{0, 0, 0, 1, 1}, {0, 0, 0, 1, 1}}, run(gv, {[v] = arr({2, 5})}):totable())
    check_grad(v, {2, 5}, pv[1], {2, 3})
  end)
end)

describe("gradients of Fill and the non-differentiable array ops", function()
  before_each(function() tf.reset_default_graph() end)

  it("Fill: the value's gradient is the sum of dy", function()
    local v = tf.placeholder(tf.float64, {}, "v")
    local y = tf.fill({2, 3}, v)
    local g = tf.gradients(y, v)[1]
    assert.same({}, g:get_shape():as_list())
    assert.equal(6, run(g, {[v] = 1.5}))
    assert.equal(21, run(tf.gradients(y, v, tf.constant({{1, 2, 3}, {4, 5, 6}}, tf.float64))[1], {[v] = 0}))
    check_grad(v, {}, y, {2, 3})
    -- dims computed at run time
    local u = tf.placeholder(tf.float64, {-1, -1}, "u")
    local f = tf.fill(tf.shape(u), v)
    assert.equal(12, run(tf.gradients(f, v)[1], {[v] = 2, [u] = arr({3, 4}, 3)}))
    -- second order: the value's gradient does not depend on the value
    local gg = tf.gradients(tf.gradients(tf.reduce_sum(y), v)[1], v)[1]
    assert.is_nil(gg)
  end)

  it("gives no gradient through Shape, Size, Rank, ZerosLike, OnesLike and Range", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local cast = function(t) return tf.cast(t, tf.float64) end
    for _, y in ipairs({cast(tf.shape(x)), cast(tf.size(x)), cast(tf.rank(x)), tf.zeros_like(x), tf.ones_like(x),
                        tf.range(tf.reduce_sum(x))}) do
      assert.is_nil(tf.gradients(y, x)[1])
    end
    local g = tf.gradients(tf.reduce_sum(tf.ones_like(x)) + tf.reduce_sum(x), x)[1]
    assert.same({{1, 1, 1}, {1, 1, 1}}, run(g, {[x] = arr({2, 3})}):totable())
  end)
end)

describe("second derivatives through array ops", function()
  before_each(function() tf.reset_default_graph() end)

  it("d2/dx2 of a quadratic form built from reshape, transpose, tile, slice and concat", function()
    -- f(x) = sum over the tiles of (x^T x) = 2 * sum_i x_i^2 (a [1,1] product tiled twice)
    local x = tf.placeholder(tf.float64, {3}, "x")
    local col = tf.reshape(x, {3, 1})
    local row = tf.transpose(col)
    local f = tf.reduce_sum(tf.tile(tf.matmul(row, col), {2, 1}))
    local g = tf.gradients(f, x)[1]
    local h = tf.gradients(g, x)[1]  -- sum_i d(g_i)/dx_j = 4
    local r = run({g, h}, {[x] = {1, -2, 3}})
    assert.same({4, -8, 12}, r[1]:totable())
    assert.same({4, 4, 4}, r[2]:totable())
    -- the Hessian row by row through unstack and slices: 4 I
    local rows = tf.unstack(g)
    for i = 1, 3 do
      local hr = run(tf.gradients(rows[i], x)[1], {[x] = {1, -2, 3}}):totable()
      for j = 1, 3 do assert.equal(i == j and 4 or 0, hr[j]) end
    end
    -- a form x^T A x with A not symmetric: the Hessian is A + A^T
    local A = tf.constant({{1, 2, 0}, {0, 3, 4}, {5, 0, 6}}, tf.float64)
    local q = tf.reduce_sum(tf.matmul(tf.matmul(row, A), tf.concat({tf.slice(col, {0, 0}, {1, 1}), tf.slice(col, {1, 0}, {2, 1})}, 0)))
    local gq = tf.unstack(tf.gradients(q, x)[1])
    local expect = {{2, 2, 5}, {2, 6, 4}, {5, 4, 12}}
    for i = 1, 3 do
      assert.same(expect[i], run(tf.gradients(gq[i], x)[1], {[x] = {0.5, 1, -1}}):totable())
    end
  end)

  it("checks the gradient of the gradient numerically", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local sq = tf.matmul(x, tf.transpose(x))  -- [2,2], quadratic in x
    local y = tf.concat({tf.reshape(sq, {4}), tf.strided_slice(tf.reshape(tf.tile(sq, {1, 2}), {8}), {7}, {0}, {strides = {-3}})}, 0)
    local g = tf.gradients(tf.reduce_sum(tf.stack({y, y * 1}, 1)), x)[1]
    check_grad(x, {2, 3}, g, {2, 3})
  end)
end)
