-- Gradient rule of MatMul: TensorFlow's four transpose cases, batched
-- products with broadcast batch dimensions (summed back by the driver),
-- unknown dimensions, and second derivatives.
local tf = require("moonflow")
local H = require("spec.helpers")
local check_grad, numel = H.check_grad, H.numel
local values = H.uniform


local function const(shape, seed)
  return tf.constant(values(numel(shape), seed), {dtype = tf.float64, shape = shape})
end

local function run(t, feeds) return tf.Session():run(t, feeds) end

-- The shape of op(a) op(b) with NumPy-broadcast batch dimensions.
local function product_shape(sa, sb, ta, tb)
  local ra, rb = #sa, #sb
  local m = ta and sa[ra] or sa[ra - 1]
  local n = tb and sb[rb - 1] or sb[rb]
  local batch, nb = {}, math.max(ra, rb) - 2
  for i = 1, nb do
    local da = sa[ra - 2 - nb + i] or 1
    local db = sb[rb - 2 - nb + i] or 1
    batch[i] = da == 1 and db or da
  end
  batch[#batch + 1], batch[#batch + 2] = m, n
  return batch
end

-- Checks the gradients of op(a) op(b) with respect to a and to b, the other
-- operand held constant.
local function check_both(sa, sb, ta, tb)
  local out = product_shape(sa, sb, ta, tb)
  local a = tf.placeholder(tf.float64, sa, "a")
  check_grad(a, sa, tf.matmul(a, const(sb, 9), {transpose_a = ta, transpose_b = tb}), out)
  local b = tf.placeholder(tf.float64, sb, "b")
  check_grad(b, sb, tf.matmul(const(sa, 3), b, {transpose_a = ta, transpose_b = tb}), out)
  local ga, gb = unpack(tf.gradients(tf.matmul(a, b, ta, tb), {a, b}))
  assert.same(sa, ga:get_shape():as_list())
  assert.same(sb, gb:get_shape():as_list())
end

describe("gradient of MatMul", function()
  before_each(function() tf.reset_default_graph() end)

  it("has hand-checkable values", function()
    local a = tf.placeholder(tf.float64, {1, 2}, "a")
    local b = tf.placeholder(tf.float64, {2, 1}, "b")
    local ga, gb = unpack(tf.gradients(tf.matmul(a, b), {a, b}))
    local r = run({ga, gb}, {[a] = {{1, 2}}, [b] = {{3}, {4}}})
    assert.same({{3, 4}}, r[1]:totable())
    assert.same({{1}, {2}}, r[2]:totable())
    -- d/dA of sum(A B) with A [2,2], B [2,3]: every row of dA is B's row sums
    local A = tf.placeholder(tf.float64, {2, 2}, "A")
    local B = tf.constant({{1, 2, 3}, {4, 5, 6}}, tf.float64)
    local gA = tf.gradients(tf.matmul(A, B), A)[1]
    assert.same({{6, 15}, {6, 15}}, run(gA, {[A] = {{0, 0}, {0, 0}}}):totable())
    -- and with dy weighting: dA = dy B^T
    local dy = tf.constant({{1, 0, 0}, {0, 0, 1}}, tf.float64)
    assert.same({{1, 4}, {3, 6}}, run(tf.gradients(tf.matmul(A, B), A, dy)[1], {[A] = {{0, 0}, {0, 0}}}):totable())
  end)

  it("passes gradient checks in the four transpose cases", function()
    check_both({2, 3}, {3, 4}, false, false)
    check_both({3, 2}, {3, 4}, true, false)
    check_both({2, 3}, {4, 3}, false, true)
    check_both({3, 2}, {4, 3}, true, true)
  end)

  it("passes gradient checks for batched products", function()
    check_both({2, 2, 3}, {2, 3, 2}, false, false)
    check_both({2, 3, 2}, {2, 3, 2}, true, false)
    check_both({2, 2, 3}, {2, 2, 3}, false, true)
    check_both({2, 3, 2}, {2, 2, 3}, true, true)
  end)

  it("sums the gradients of broadcast batch dimensions back", function()
    check_both({2, 1, 2, 3}, {3, 3, 2}, false, false)
    check_both({3, 2}, {2, 2, 3}, false, false)   -- one matrix a for every batch of b
    check_both({2, 2, 3}, {3, 2}, false, false)   -- the folded-batch kernel path
    check_both({1, 3, 2}, {2, 1, 2, 3}, true, true)
    -- hand values: a shared matrix gets the sum over the batch
    local a = tf.placeholder(tf.float64, {1, 2}, "a")
    local b = tf.constant({{{1}, {2}}, {{10}, {20}}, {{100}, {200}}}, tf.float64)  -- [3,2,1]
    local y = tf.matmul(a, b)
    assert.same({3, 1, 1}, y:get_shape():as_list())
    local ga = tf.gradients(y, a)[1]
    assert.same({1, 2}, ga:get_shape():as_list())
    assert.same({{111, 222}}, run(ga, {[a] = {{0, 0}}}):totable())
  end)

  it("works with unknown dimensions", function()
    local a = tf.placeholder(tf.float64, {-1, -1, 3}, "a")
    local b = const({3, 2})
    local y = tf.matmul(a, b)
    local ga = tf.gradients(y, a)[1]
    assert.same({-1, -1, 3}, ga:get_shape():as_list())
    check_grad(a, {2, 2, 3}, y, {2, 2, 2})
    check_grad(a, {1, 4, 3}, y, {1, 4, 2})
    -- broadcasting only the run-time shapes reveal
    local p = tf.placeholder(tf.float64, {-1, 2, 3}, "p")
    local q = tf.placeholder(tf.float64, {-1, 3, 2}, "q")
    local gp, gq = unpack(tf.gradients(tf.matmul(p, q), {p, q}))
    local ones = {{1, 1, 1}, {1, 1, 1}}
    local r = run({gp, gq}, {[p] = {ones, ones, ones}, [q] = {{{1, 2}, {3, 4}, {5, 6}}}})
    assert.same({3, 2, 3}, r[1]:shape())
    assert.same({{3, 7, 11}, {3, 7, 11}}, r[1]:totable()[2])
    assert.same({{{6, 6}, {6, 6}, {6, 6}}}, r[2]:totable())
    -- unknown rank
    local u = tf.placeholder(tf.float64, nil, "u")
    check_grad(u, {2, 3}, tf.matmul(u, const({3, 2}), {transpose_a = false}), {2, 2})
    check_grad(u, {3, 2}, tf.matmul(u, const({3, 2}), {transpose_a = true}), {2, 2})
  end)

  it("keeps float32", function()
    local a = tf.placeholder(tf.float32, {2, 2}, "a")
    local g = tf.gradients(tf.matmul(a, a), a)[1]
    assert.equal(tf.float32, g.dtype)
    -- d sum(A A)/dA_ij = (row sum j) + (column sum i): rows 3, 7; columns 4, 6
    assert.same({{3 + 4, 7 + 4}, {3 + 6, 7 + 6}}, run(g, {[a] = {{1, 2}, {3, 4}}}):totable())
  end)

  it("has second derivatives", function()
    -- d2/dx2 of x^T x = sum x_i^2 through matmul: the gradient 2x, its derivative 2
    local x = tf.placeholder(tf.float64, {3, 1}, "x")
    local f = tf.reduce_sum(tf.matmul(x, x, {transpose_a = true}))
    local g = tf.gradients(f, x)[1]
    local h = tf.gradients(g, x)[1]
    local r = run({g, h}, {[x] = {{1}, {-2}, {3}}})
    assert.same({{2}, {-4}, {6}}, r[1]:totable())
    assert.same({{2}, {2}, {2}}, r[2]:totable())
    -- the Jacobian of the gradient of sum(X X^T X), numerically, in each transpose case
    local m = tf.placeholder(tf.float64, {2, 2}, "m")
    for _, t in ipairs({{false, false}, {true, false}, {false, true}, {true, true}}) do
      local y = tf.matmul(tf.matmul(m, m, {transpose_a = t[1], transpose_b = t[2]}), m)
      check_grad(m, {2, 2}, tf.gradients(y, m)[1], {2, 2})
    end
    -- batched with broadcasting
    local bx = tf.placeholder(tf.float64, {2, 2, 3}, "bx")
    local prod = tf.matmul(tf.matmul(const({3, 2}), bx, {transpose_a = true, transpose_b = true}), bx)
    assert.same({2, 2, 3}, prod:get_shape():as_list())
    check_grad(bx, {2, 2, 3}, tf.gradients(prod, bx)[1], {2, 2, 3})
  end)
end)
