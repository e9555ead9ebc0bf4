-- Gradients through control flow: tf.cond (only the taken branch, to any order), tf.where,
-- tf.while_loop (data-dependent trip counts, captures, nesting, what is kept),
-- TensorArrays, and a recurrent net against the same net unrolled in Lua.
local tf = require("moonflow")
local H = require("spec.helpers")
setup(H.growth_off)
teardown(H.growth_restore)

local function i32(v) return tf.constant(v, tf.int32) end

-- A float64 tf.Array of a shape filled with reproducible values.
local function arr(shape, seed)
  local a = tf.Array.new(tf.float64, shape)
  for i, v in ipairs(H.values(H.numel(shape), seed)) do a:data()[i - 1] = v end
  return a
end

local function max_diff(a, b)
  if type(a) == "number" then return math.abs(a - b) end
  local worst = 0
  for k = 0, a:size() - 1 do worst = math.max(worst, math.abs(a:data()[k] - b:data()[k])) end
  return worst
end

describe("gradients through tf.cond", function()
  before_each(function() tf.reset_default_graph() end)

  it("come from the taken branch only", function()
    local x = tf.placeholder(tf.float64, {})
    local y = tf.placeholder(tf.float64, {})
    local r = tf.cond(tf.less(x, 0), function() return x * x * y end, function() return x * 3 end)
    local gx, gy = unpack(tf.gradients(r, {x, y}))
    local sess = tf.Session()
    assert.same({-12, 4}, sess:run({gx, gy}, {[x] = -2, [y] = 3}))
    assert.same({3, 0}, sess:run({gx, gy}, {[x] = 2, [y] = 3}))
    local c = tf.cond(tf.less(x, 0), function() return x * x * 3 end, function() return tf.sin(x) end)
    H.check_grad(x, {}, c, {}, {x_init_value = {-0.5}, delta = 1e-6})
    H.check_grad(x, {}, c, {}, {x_init_value = {0.5}, delta = 1e-6})
  end)

  it("reach variables and tensors of enclosing functions, for several results", function()
    local w = tf.Variable(tf.constant({1.5, -2}, tf.float64), {name = "w"})
    local x = tf.placeholder(tf.float64, {2})
    local p = tf.placeholder(tf.bool, {})
    local a, b = tf.cond(p, function() return tf.reduce_sum(w * x), x * 2 end,
                         function() return tf.reduce_sum(tf.sin(w)), w end)
    local loss = a + tf.reduce_sum(b * b)
    local gw, gx = unpack(tf.gradients(loss, {w, x}))
    local sess = tf.Session()
    sess:run(w.initializer)
    local r = sess:run({gw, gx}, {[x] = {3, 4}, [p] = true})
    assert.same({3, 4}, r[1]:totable())
    assert.same({1.5 + 24, -2 + 32}, r[2]:totable())
    r = sess:run({gw, gx}, {[x] = {3, 4}, [p] = false})
    assert.near(math.cos(1.5) + 3, r[1]:get(0), 1e-12)
    assert.near(math.cos(-2) - 4, r[1]:get(1), 1e-12)
    assert.same({0, 0}, r[2]:totable())
  end)

  it("nest, and keep a branch's random draws for its gradient", function()
    local x = tf.placeholder(tf.float64, {3})
    local r = tf.cond(tf.greater(tf.reduce_sum(x), 0), function()
      return tf.cond(tf.greater(x[0], 0), function() return tf.exp(x) * x end, function() return x * x * x end)
    end, function() return tf.tanh(x) end)
    for _, v in ipairs({{0.3, 0.2, 0.1}, {-0.3, 0.5, 0.1}, {-0.3, -0.5, 0.1}}) do
      H.check_grad(x, {3}, r, {3}, {x_init_value = v, delta = 1e-6}, 1e-7)
    end
    local out, noise = tf.cond(tf.constant(true), function()
      local n = tf.random_uniform({3}, {dtype = tf.float64, seed = 7}) + 1
      return x * n, n
    end, function() return x, tf.ones({3}, tf.float64) end)
    local g = tf.gradients(tf.reduce_sum(out), x)[1]
    local got = tf.Session():run({g, noise}, {[x] = {1, 2, 4}})
    assert.same(got[2]:totable(), got[1]:totable())  -- d(sum(x * noise))/dx is the same draw
  end)

  it("differentiate again: second and third derivatives by branch (hand-computed, float64)", function()
    local x = tf.placeholder(tf.float64, {})
    local p = tf.placeholder(tf.bool, {})
    local r = tf.cond(p, function() return x * x * x end, function() return tf.sin(x) end)
    local g = tf.gradients(r, x)[1]
    local g2 = tf.gradients(g, x)[1]
    local g3 = tf.gradients(g2, x)[1]
    local sess = tf.Session()
    for _, v in ipairs({0.7, -1.3}) do
      local t = sess:run({g, g2, g3}, {[x] = v, [p] = true})
      assert.near(3 * v * v, t[1], 1e-12)
      assert.near(6 * v, t[2], 1e-12)
      assert.near(6, t[3], 1e-12)
      local f = sess:run({g, g2, g3}, {[x] = v, [p] = false})
      assert.near(math.cos(v), f[1], 1e-12)
      assert.near(-math.sin(v), f[2], 1e-12)
      assert.near(-math.cos(v), f[3], 1e-12)
    end
    -- the second derivative against finite differences of the first
    local c = tf.cond(tf.less(x, 0), function() return x * x * x end, function() return tf.sin(x) end)
    for _, v in ipairs({-0.8, 0.6}) do
      H.check_grad(x, {}, tf.gradients(c, x)[1], {}, {x_init_value = {v}, delta = 1e-6}, 1e-7)
    end
  end)

  it("differentiate again: mixed partials with captured tensors and variables", function()
    local x = tf.placeholder(tf.float64, {})
    local y = tf.placeholder(tf.float64, {})
    local w = tf.Variable(tf.constant(1.5, tf.float64), {name = "w"})
    local p = tf.placeholder(tf.bool, {})
    -- then: x^2 y^3 w; else: exp(x y) + w x
    local r = tf.cond(p, function() return x * x * y * y * y * w end, function() return tf.exp(x * y) + w * x end)
    local gx = tf.gradients(r, x)[1]
    local gxy, gxw, gxx = unpack(tf.gradients(gx, {y, w, x}))
    local sess = tf.Session()
    sess:run(w.initializer)
    local a, b = 0.8, -1.2
    local t = sess:run({gxy, gxw, gxx}, {[x] = a, [y] = b, [p] = true})
    assert.near(6 * a * b * b * 1.5, t[1], 1e-12)
    assert.near(2 * a * b * b * b, t[2], 1e-12)
    assert.near(2 * b * b * b * 1.5, t[3], 1e-12)
    local f = sess:run({gxy, gxw, gxx}, {[x] = a, [y] = b, [p] = false})
    assert.near(math.exp(a * b) * (1 + a * b), f[1], 1e-12)
    assert.near(1, f[2], 1e-12)
    assert.near(b * b * math.exp(a * b), f[3], 1e-12)
    -- against finite differences of d/dx, in y and in x (x, y, p fixed tensors, fed when varied)
    for _, pv in ipairs({true, false}) do
      local xc, yc = tf.constant(a, tf.float64), tf.constant(b, tf.float64)
      local rc = tf.cond(tf.constant(pv), function() return xc * xc * yc * yc * yc * w end,
                         function() return tf.exp(xc * yc) + w * xc end)
      local gxc = tf.gradients(rc, xc)[1]
      H.check_grad(yc, {}, gxc, {}, {x_init_value = {b}, delta = 1e-6, session = sess}, 1e-7)
      H.check_grad(xc, {}, gxc, {}, {x_init_value = {a}, delta = 1e-6, session = sess}, 1e-7)
    end
  end)

  it("differentiate again through a cond inside a cond, keeping a branch's random draws", function()
    local x = tf.placeholder(tf.float64, {3})
    local r = tf.cond(tf.greater(tf.reduce_sum(x), 0), function()
      return tf.cond(tf.greater(x[0], 0), function() return tf.exp(x) * x end, function() return x * x * x end)
    end, function() return tf.tanh(x) end)
    local g = tf.gradients(tf.reduce_sum(r), x)[1]
    local g2 = tf.gradients(tf.reduce_sum(g), x)[1]
    local sess = tf.Session()
    local cases = {
      {{0.3, 0.2, 0.1}, function(v) return math.exp(v) * (v + 2) end},
      {{-0.3, 0.5, 0.1}, function(v) return 6 * v end},
      {{-0.3, -0.5, 0.1}, function(v) local t = math.tanh(v) return -2 * t * (1 - t * t) end},
    }
    for _, c in ipairs(cases) do
      local got = sess:run(g2, {[x] = c[1]})
      for i = 1, 3 do assert.near(c[2](c[1][i]), got:get(i - 1), 1e-12) end
      H.check_grad(x, {3}, g, {3}, {x_init_value = c[1], delta = 1e-6}, 1e-7)
    end
    local out, noise = tf.cond(tf.constant(true), function()
      local n = tf.random_uniform({3}, {dtype = tf.float64, seed = 7}) + 1
      return tf.cond(tf.greater(x[0], 0), function() return x * x * n end, function() return x end), n
    end, function() return x, tf.ones({3}, tf.float64) end)
    local d2 = tf.gradients(tf.reduce_sum(tf.gradients(tf.reduce_sum(out), x)[1]), x)[1]
    local got = sess:run({d2, noise}, {[x] = {1, 2, 4}})
    for i = 0, 2 do assert.near(2 * got[2]:get(i), got[1]:get(i), 1e-12) end  -- the same draw
    -- a draw in the inner cond: the gradient's gradient keeps it too (third order)
    local o1, o2 = tf.cond(tf.greater(x[1], 0), function()
      return tf.cond(tf.greater(x[0], 0), function()
        local n = tf.random_uniform({3}, {dtype = tf.float64}) + 1
        return x * x * x * n, n
      end, function() return x, x end)
    end, function() return x, x end)
    local f1 = tf.gradients(tf.reduce_sum(o1), x)[1]
    local f2 = tf.gradients(tf.reduce_sum(f1), x)[1]
    local f3 = tf.gradients(tf.reduce_sum(f2), x)[1]
    local t = sess:run({o1, o2, f1, f2, f3}, {[x] = {1, 2, 3}})
    for i = 0, 2 do
      local v, n = i + 1, t[2]:get(i)
      assert.near(v ^ 3 * n, t[1]:get(i), 1e-12)
      assert.near(3 * v * v * n, t[3]:get(i), 1e-12)
      assert.near(6 * v * n, t[4]:get(i), 1e-12)
      assert.near(6 * n, t[5]:get(i), 1e-12)
    end
  end)
end)

describe("gradients through tf.where", function()
  before_each(function() tf.reset_default_graph() end)

  it("go to the selected side, summed over broadcasting", function()
    local x = tf.placeholder(tf.float64, {2, 3})
    local y = tf.placeholder(tf.float64, {3})
    local c = tf.constant({{true, false, true}, {false, false, true}})
    local r = tf.where(c, x * x, y)
    local gx, gy = unpack(tf.gradients(tf.reduce_sum(r), {x, y}))
    local v = tf.Session():run({gx, gy}, {[x] = {{1, 2, 3}, {4, 5, 6}}, [y] = {7, 8, 9}})
    assert.same({{2, 0, 6}, {0, 0, 12}}, v[1]:totable())
    assert.same({1, 2, 0}, v[2]:totable())
    local yc = tf.constant({7, 8, 9}, tf.float64)
    H.check_grad(x, {2, 3}, tf.where(c, x * x, yc), {2, 3})
    local xc = tf.constant(arr({2, 3}, 1))
    H.check_grad(y, {3}, tf.where(c, xc, y * y), {2, 3})
  end)

  it("go to the rows a vector condition picks, and through tf.where_v2", function()
    local x = tf.placeholder(tf.float64, {3, 2})
    local c = tf.constant({false, true, true})
    local gx = tf.gradients(tf.reduce_sum(tf.where(c, x * x, 0)), x)[1]
    assert.same({{0, 0}, {6, 8}, {10, 12}}, tf.Session():run(gx, {[x] = {{1, 2}, {3, 4}, {5, 6}}}):totable())
    local yc = tf.constant(arr({3, 2}, 2))
    H.check_grad(x, {3, 2}, tf.where(c, x * x, yc), {3, 2})
    H.check_grad(x, {3, 2}, tf.where(c, yc, x * yc), {3, 2})
    H.check_grad(x, {3, 2}, tf.where_v2(tf.constant({true, false}), x * x, yc), {3, 2})
    local k = tf.constant(arr({3, 2}, 3))
    H.check_grad_of_grad(k, {3, 2}, tf.where(c, k * k, 1), {3, 2})
  end)
end)

describe("gradients through tf.while_loop", function()
  before_each(function() tf.reset_default_graph() end)

  it("follow a data-dependent trip count, to loop variables and captured tensors", function()
    local x = tf.placeholder(tf.float64, {})
    local w = tf.placeholder(tf.float64, {})
    local n = tf.placeholder(tf.int32, {})
    local _, y = tf.while_loop(function(i) return tf.less(i, n) end, function(i, y) return i + 1, y * x * w end,
                               {i32(0), x})
    local gx, gw = unpack(tf.gradients(y, {x, w}))
    local sess = tf.Session()
    for _, k in ipairs({0, 1, 4}) do
      -- y = x^(k+1) w^k
      local r = sess:run({y, gx, gw}, {[x] = 1.1, [w] = 1.5, [n] = k})
      assert.near(1.1 ^ (k + 1) * 1.5 ^ k, r[1], 1e-12)
      assert.near((k + 1) * 1.1 ^ k * 1.5 ^ k, r[2], 1e-12)
      assert.near(k * 1.1 ^ (k + 1) * 1.5 ^ (k - 1), r[3], 1e-12)
    end
  end)

  it("stop after the trip count the condition decides and at maximum_iterations", function()
    local x = tf.placeholder(tf.float64, {2})
    local y = tf.while_loop(function(y) return tf.less(tf.reduce_sum(y), 10) end,
                            function(y) return y * 1.5 + tf.sin(y) end, {x})
    H.check_grad(x, {2}, y, {2}, {x_init_value = {0.3, 0.5}, delta = 1e-7}, 1e-6)
    local _, z = tf.while_loop(function() return true end, function(i, z) return i + 1, z * x end, {i32(0), x},
                               {maximum_iterations = 3})
    H.check_grad(x, {2}, z, {2}, {x_init_value = {0.3, 0.5}, delta = 1e-6}, 1e-8)
  end)

  it("count the iterations of linear bodies, which keep no values", function()
    -- y = x * 2^3: nothing of the forward pass is needed backwards, only the trip count.
    local x = tf.placeholder(tf.float64, {})
    local y = tf.while_loop(function(a) return tf.less(a, 10) end, function(a) return a * 2 end, {x})
    local sess = tf.Session()
    local r = sess:run({y, tf.gradients(y, x)[1]}, {[x] = 1.5})  -- 1.5 -> 3 -> 6 -> 12
    assert.equal(12, r[1])
    assert.equal(8, r[2])
    H.check_grad(x, {}, y, {}, {x_init_value = {1.5}, delta = 1e-6}, 1e-8)
    -- a0 = 1, a <- a + x three times: z = 1 + 3x, dz/dx = 3.
    local _, z = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, a) return i + 1, a + x end,
                               {i32(0), tf.constant(1, tf.float64)})
    r = sess:run({z, tf.gradients(z, x)[1]}, {[x] = 0.5})
    assert.equal(2.5, r[1])
    assert.equal(3, r[2])
    H.check_grad(x, {}, z, {}, {x_init_value = {0.5}, delta = 1e-6}, 1e-8)
    -- Over vectors, with a captured vector: w = 2^2 x + (2 + 1) c after two steps a <- 2a + c.
    local v = tf.placeholder(tf.float64, {2})
    local c = tf.constant({0.5, -1}, tf.float64)
    local _, w = tf.while_loop(function(i) return tf.less(i, 2) end, function(i, a) return i + 1, a * 2 + c end,
                               {i32(0), v})
    assert.same({4, 4}, sess:run(tf.gradients(tf.reduce_sum(w), v)[1], {[v] = {1, 2}}):totable())
    H.check_grad(v, {2}, w, {2}, {x_init_value = {1, 2}, delta = 1e-6}, 1e-8)
  end)

  it("train a variable a linear body adds", function()
    -- loss = 1 + 3 v: dloss/dv = 3, so one step at rate 0.1 takes v from 2 to 1.7.
    local v = tf.Variable(tf.constant(2, tf.float64), {name = "v"})
    local _, loss = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, a) return i + 1, a + v end,
                                  {i32(0), tf.constant(1, tf.float64)})
    local train = tf.train.GradientDescentOptimizer(0.1):minimize(loss)
    local sess = tf.Session()
    sess:run(v.initializer)
    assert.equal(7, sess:run(loss))
    sess:run(train)
    assert.near(1.7, sess:run(v), 1e-12)
    sess:run(train)
    assert.near(1.4, sess:run(v), 1e-12)
  end)

  it("of the gradient of a loop are reported as unsupported, naming the op and the line", function()
    local x = tf.placeholder(tf.float64, {})
    local _, y = tf.while_loop(function(i) return tf.less(i, 2) end, function(i, a) return i + 1, a * a end,
                               {i32(0), x}, {name = "squares"})
    local line = debug.getinfo(1, "l").currentline + 1
    local g = tf.gradients(y, x)[1]
    assert.equal(4 * 1.5 ^ 3, tf.Session():run(g, {[x] = 1.5}))  -- y = x^4
    local e = H.error_of(tf.gradients, g, x)
    assert.truthy(e:find("gradients of the gradient of tf.while_loop ('squares') are not supported", 1, true), e)
    assert.truthy(e:find("(op type: WhileGrad)", 1, true), e)
    assert.truthy(e:find("control_flow_grad_spec.lua:" .. line, 1, true), e)
    -- Stopped there, the first-order gradient takes part in further gradients as a constant.
    local h = tf.gradients(tf.stop_gradient(g) * x + x * x, x)[1]
    assert.equal(4 * 1.5 ^ 3 + 3, tf.Session():run(h, {[x] = 1.5}))
  end)

  it("give none with back_prop = false", function()
    local x = tf.placeholder(tf.float64, {})
    local _, y = tf.while_loop(function(i) return tf.less(i, 2) end, function(i, y) return i + 1, y * x end,
                               {i32(0), x}, {back_prop = false})
    local g = tf.gradients(y, x)
    assert.is_nil(g[1])
    assert.equal(0, tf.Session():run(tf.gradients(y, x, {unconnected_gradients = "zero"})[1], {[x] = 3}))
    assert.equal(0, tf.Session():run(y.op:output(2), {[x] = 3}))  -- the stash keeps nothing
  end)

  it("run through nested loops, loops in conds and conds in loops", function()
    local x = tf.placeholder(tf.float64, {2})
    local _, nested = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, y)
      local _, z = tf.while_loop(function(j) return tf.less(j, 2) end,
                                 function(j, z) return j + 1, z * tf.sin(z) + x end, {i32(0), y})
      return i + 1, z
    end, {i32(0), x})
    H.check_grad(x, {2}, nested, {2}, {x_init_value = {0.3, -0.7}, delta = 1e-6}, 1e-8)
    local _, cond_in = tf.while_loop(function(i) return tf.less(i, 4) end, function(i, y)
      return i + 1, tf.cond(tf.greater(tf.reduce_sum(y), 0), function() return y * y * x end, function() return y - x * 2 end)
    end, {i32(0), x})
    H.check_grad(x, {2}, cond_in, {2}, {x_init_value = {0.3, 0.5}, delta = 1e-6}, 1e-8)
    H.check_grad(x, {2}, cond_in, {2}, {x_init_value = {-0.3, 0.1}, delta = 1e-6}, 1e-8)
    local loop_in = tf.cond(tf.greater(tf.reduce_sum(x), 0), function()
      local _, z = tf.while_loop(function(i) return tf.less(i, 3) end,
                                 function(i, z) return i + 1, tf.cos(z) * x end, {i32(0), x})
      return z
    end, function() return x * 3 end)
    H.check_grad(x, {2}, loop_in, {2}, {x_init_value = {0.3, 0.5}, delta = 1e-6}, 1e-8)
    H.check_grad(x, {2}, loop_in, {2}, {x_init_value = {-0.3, 0.1}, delta = 1e-6}, 1e-8)
  end)

  it("run through deeper mixes of loops, conds, variables and TensorArrays", function()
    local x = tf.placeholder(tf.float64, {2})
    local v = tf.Variable(tf.constant({0.3, 0.2}, tf.float64), {name = "v"})
    -- (read again at each inner iteration: clear_after_read = false)
    local ta = tf.TensorArray(tf.float64, 3, {clear_after_read = false}):unstack(tf.stack({x, x * 2, x * x}))
    -- an inner loop whose trip count is the outer counter, reading a variable and a captured array
    local _, y = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, y)
      local _, z = tf.while_loop(function(j) return tf.less(j, i + 1) end, function(j, z)
        return j + 1, tf.tanh(z * v + ta:read(i)) + y * 0.1
      end, {i32(0), y})
      return i + 1, z
    end, {i32(0), x})
    -- a loop in a cond in a loop, reading back the array it writes
    local _, acc = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, acc, out)
      local prev = tf.cond(tf.greater(i, 0), function() return out:read(i - 1) end, function() return x end)
      local w = tf.cond(tf.greater(tf.reduce_sum(prev), 0), function()
        local _, q = tf.while_loop(function(k) return tf.less(k, 2) end, function(k, q) return k + 1, q * prev + x end,
                                   {i32(0), prev})
        return q
      end, function() return prev * 3 end)
      return i + 1, acc + w, out:write(i, w * 0.5)
    end, {i32(0), tf.zeros({2}, tf.float64), tf.TensorArray(tf.float64, 3, {element_shape = {2}})})
    local sess = tf.Session()
    sess:run(v.initializer)
    for _, at in ipairs({{0.4, 0.6}, {-0.5, 0.2}}) do
      for _, out in ipairs({y, acc}) do
        H.check_grad(x, {2}, out, {2}, {x_init_value = at, delta = 1e-6, session = sess}, 1e-8)
      end
    end
  end)

  it("reach variables the body reads, and train them", function()
    local w = tf.Variable(tf.constant(0.5, tf.float64), {name = "w"})
    local x = tf.placeholder(tf.float64, {})
    local _, y = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, y) return i + 1, y * w end, {i32(0), x})
    local loss = tf.square(y - 1)
    local gw = tf.gradients(loss, w)[1]
    local sess = tf.Session()
    sess:run(w.initializer)
    -- loss = (x w^3 - 1)^2, dloss/dw = 2 (x w^3 - 1) 3 x w^2
    assert.near(2 * (2 * 0.125 - 1) * 3 * 2 * 0.25, sess:run(gw, {[x] = 2}), 1e-12)
    local step = tf.assign_sub(w, gw * 0.05)
    for _ = 1, 200 do sess:run(step, {[x] = 2}) end
    assert.near(0.5 ^ (1 / 3), sess:run(w), 1e-4)
  end)

  it("reach variables read by a cond inside the loop", function()
    local w = tf.Variable(tf.constant({1, 2, 3}, tf.float64), {name = "w"})
    local x = tf.placeholder(tf.float64, {3})
    local _, y = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, y)
      return i + 1, tf.cond(tf.greater(tf.reduce_sum(y), 0), function() return y * w end, function() return y - w end)
    end, {i32(0), x})
    local gx, gw = unpack(tf.gradients(tf.reduce_sum(y), {x, w}))
    local sess = tf.Session()
    sess:run(w.initializer)
    local r = sess:run({gx, gw}, {[x] = {1, 2, 3}})
    assert.same({1, 8, 27}, r[1]:totable())   -- y = x w^3
    assert.same({3, 24, 81}, r[2]:totable())  -- 3 x w^2
    r = sess:run({gx, gw}, {[x] = {-1, -2, -3}})
    assert.same({1, 1, 1}, r[1]:totable())    -- y = x - 3 w
    assert.same({-3, -3, -3}, r[2]:totable())
  end)

  it("see a value fed for a variable, so gradient checks on variables work through them", function()
    local w = tf.Variable(tf.constant({0.5, -0.3}, tf.float64), {name = "w"})
    local x = tf.constant({1.2, 0.7}, tf.float64)
    local _, y = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, y)
      return i + 1, tf.cond(tf.greater(tf.reduce_sum(y), 0), function() return tf.sin(y * w) + y end,
                            function() return y - w end)
    end, {i32(0), x})
    local sess = tf.Session()
    sess:run(w.initializer)
    local fed = sess:run(y, {[w] = {0, 0}}):totable()
    assert.same({1.2, 0.7}, fed)  -- sin(0) + y, three times
    assert.is_true(sess:run(y):get(0) ~= 1.2)
    H.check_grad(w, {2}, y, {2}, {x_init_value = {0.5, -0.3}, delta = 1e-6}, 1e-8)
  end)

  it("keep the random draws of the forward pass and do not repeat its assignments", function()
    local count = tf.Variable(0, {name = "count", dtype = tf.int32})
    local x = tf.placeholder(tf.float64, {})
    local _, y = tf.while_loop(function(i) return tf.less(i, 5) end, function(i, y)
      local bump = tf.assign_add(count, 1)
      local r = tf.random_uniform({}, {dtype = tf.float64}) + tf.cast(bump, tf.float64) * 0
      return i + 1, y * (r + 1)
    end, {i32(0), x})
    local g = tf.gradients(y, x)[1]
    local sess = tf.Session()
    sess:run(count.initializer)
    local r = sess:run({y, g}, {[x] = 2})
    assert.near(r[1] / 2, r[2], 1e-12)  -- y = x * prod(1 + r_t): dy/dx = y / x, same draws
    assert.equal(5, sess:run(count))
  end)

  it("keep one checkpoint of the loop variables per iteration, and nothing without a gradient", function()
    local T, B, Hd = 10, 3, 4
    local h0 = tf.placeholder(tf.float64, {B, Hd})
    local w = tf.constant(arr({Hd, Hd}, 1))
    local _, h = tf.while_loop(function(i) return tf.less(i, T) end,
                               function(i, hh) return i + 1, tf.tanh(tf.matmul(hh, w)) end, {i32(0), h0})
    local stash = h.op:output(2)
    local sess = tf.Session()
    local feed = {[h0] = arr({B, Hd}, 2)}
    assert.equal(0, sess:run(stash, feed))  -- no gradient built yet
    local gw = tf.gradients(tf.reduce_sum(h), w)[1]
    local r = sess:run({gw, stash}, feed)
    assert.equal(T * B * Hd * 8, r[2])  -- h, 96 bytes a step: tanh's output is recomputed
    H.check_grad(h0, {B, Hd}, h, {B, Hd}, {x_init_value = H.values(B * Hd, 3), delta = 1e-6}, 1e-8)
  end)

  it("of a recurrent net with TensorArrays equal those of the net unrolled in Lua (1e-10, float64)", function()
    local T, B, D, Hd = 6, 2, 3, 4
    local X = tf.placeholder(tf.float64, {T, B, D})
    local W = tf.Variable(arr({D, Hd}, 1), {name = "W"})
    local U = tf.Variable(arr({Hd, Hd}, 2), {name = "U"})
    local bias = tf.Variable(arr({Hd}, 3), {name = "b"})
    local h0 = tf.placeholder(tf.float64, {B, Hd})
    local wy = tf.constant(arr({T, B, Hd}, 4))
    local function cell(x, h) return tf.tanh(tf.matmul(x, W) + tf.matmul(h, U) + bias) end
    local inputs = tf.TensorArray(tf.float64, T):unstack(X)
    local _, hT, outputs = tf.while_loop(function(t) return tf.less(t, T) end, function(t, h, out)
      local hn = cell(inputs:read(t), h)
      return t + 1, hn, out:write(t, hn)
    end, {i32(0), h0, tf.TensorArray(tf.float64, T)})
    local loss_loop = tf.reduce_sum(outputs:stack() * wy) + tf.reduce_sum(hT * hT)
    local h, hs = h0, {}
    for t = 0, T - 1 do h = cell(X[t], h); hs[#hs + 1] = h end
    local loss_unrolled = tf.reduce_sum(tf.stack(hs) * wy) + tf.reduce_sum(h * h)
    local xs = {X, W, U, bias, h0}
    local g_loop = tf.gradients(loss_loop, xs)
    local g_unrolled = tf.gradients(loss_unrolled, xs)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local feeds = {[X] = arr({T, B, D}, 5), [h0] = arr({B, Hd}, 6)}
    local a = sess:run({loss_loop, g_loop}, feeds)
    local b = sess:run({loss_unrolled, g_unrolled}, feeds)
    assert.is_true(math.abs(a[1] - b[1]) <= 1e-10)
    for i = 1, #xs do assert.is_true(max_diff(a[2][i], b[2][i]) <= 1e-10, "gradient " .. i) end
  end)
end)

describe("gradients through TensorArrays", function()
  before_each(function() tf.reset_default_graph() end)

  it("pass through writes, reads, stacks and unstacks", function()
    local x = tf.placeholder(tf.float64, {3, 2})
    local ta = tf.TensorArray(tf.float64, 3, {clear_after_read = false}):unstack(x)  -- index 2 is read twice
    local y = ta:read(2) * ta:read(0) + ta:read(2)
    H.check_grad(x, {3, 2}, y, {2})
    local w = tf.TensorArray(tf.float64, 3):write(1, x[0] * 2):write(0, tf.sin(x[1])):write(2, x[2])
    H.check_grad(x, {3, 2}, w:stack(), {3, 2}, {delta = 1e-6})
    H.check_grad(x, {3, 2}, w:read(0), {2}, {delta = 1e-6})
    local grown = tf.TensorArray(tf.float64, 1, {dynamic_size = true}):write(0, x[1]):write(1, x[0] * x[0])
    H.check_grad(x, {3, 2}, grown:stack(), {2, 2})
  end)

  it("pass through gathers, scatters, concats and splits", function()
    local x = tf.placeholder(tf.float64, {4, 2})
    local ta = tf.TensorArray(tf.float64, 4, {clear_after_read = false}):unstack(x)  -- index 3 is read twice
    H.check_grad(x, {4, 2}, ta:gather({3, 1, 3}), {3, 2})
    local sc = tf.TensorArray(tf.float64, 4):scatter({2, 0, 1, 3}, x * x)
    H.check_grad(x, {4, 2}, sc:stack(), {4, 2})
    H.check_grad(x, {4, 2}, ta:concat(), {8})
    local sp = tf.TensorArray(tf.float64, 2):split(tf.reshape(x, {8}), {4, 4})
    H.check_grad(x, {4, 2}, sp:read(1), {4})
  end)

  it("reach a loop's array that no iteration wrote, as zeros", function()
    -- sum(stack) = x (0 + 1 + ... + (n - 1)): 0 for n = 0, 3 for n = 3
    local x = tf.placeholder(tf.float64, {})
    local n = tf.placeholder(tf.int32, {})
    local _, t = tf.while_loop(function(i) return tf.less(i, n) end,
                               function(i, t) return i + 1, t:write(i, tf.cast(i, tf.float64) * x) end,
                               {i32(0), tf.TensorArray(tf.float64, 0, {dynamic_size = true})})
    local gs = tf.gradients(tf.reduce_sum(t:stack()), x)[1]
    local gg = tf.gradients(tf.reduce_sum(t:gather({})), x)[1]
    local sess = tf.Session()
    assert.same({0, 0}, sess:run({gs, gg}, {[x] = 2, [n] = 0}))
    assert.same({3, 0}, sess:run({gs, gg}, {[x] = 2, [n] = 3}))
  end)

  it("accumulate over a loop that reads a captured array and writes a looped one", function()
    local x = tf.placeholder(tf.float64, {5, 2})
    local ta = tf.TensorArray(tf.float64, 5):unstack(x)
    local _, acc, out = tf.while_loop(function(i) return tf.less(i, 5) end, function(i, acc, out)
      local v = ta:read(i)
      return i + 1, acc * v + v, out:write(i, acc * 2)
    end, {i32(0), tf.zeros({2}, tf.float64), tf.TensorArray(tf.float64, 5)})
    H.check_grad(x, {5, 2}, acc, {2})
    H.check_grad(x, {5, 2}, out:stack(), {5, 2})
  end)

  it("pass through splits into unequal lengths and concats of elements of unequal first dimension", function()
    local x = tf.placeholder(tf.float64, {6, 2})
    local sp = tf.TensorArray(tf.float64, 3, {clear_after_read = false}):split(x * x, {1, 3, 2})
    H.check_grad(x, {6, 2}, sp:read(1), {3, 2})
    H.check_grad(x, {6, 2}, sp:read(0) * 3 + sp:read(2)[1], {1, 2})
    H.check_grad(x, {6, 2}, sp:concat(), {6, 2})
    H.check_grad(x, {6, 2}, sp:gather({2, 2}), {2, 2, 2})
    -- the elements' gradients through a concat: written with their own shapes
    local w = tf.TensorArray(tf.float64, 3, {infer_shape = false})
    local function rows(a, b) return tf.slice(x, {a, 0}, {b - a, 2}) end
    w = w:write(2, tf.sin(rows(0, 1))):write(0, rows(1, 4) * 2):write(1, tf.exp(rows(4, 6)))
    H.check_grad(x, {6, 2}, w:concat(), {6, 2}, {delta = 1e-6})
    -- an array that turns ragged after uniform writes (dynamic size: it grows too)
    local d = tf.TensorArray(tf.float64, 1, {infer_shape = false, dynamic_size = true})
    d = d:write(0, rows(0, 1)):write(1, rows(1, 2) * rows(1, 2)):write(2, rows(2, 6) * 3)
    H.check_grad(x, {6, 2}, d:concat(), {6, 2})
    -- hand-computed: d sum(concat(split(x, {1, 3, 2})) * c) / dx = c
    local c = tf.constant({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}}, tf.float64)
    local plain = tf.TensorArray(tf.float64, 3):split(x, {1, 3, 2})
    local g = tf.gradients(tf.reduce_sum(plain:concat() * c), x)[1]
    local sess = tf.Session()
    assert.same({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}},
                sess:run(g, {[x] = {{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}}):totable())
  end)

  it("flow through a loop that reads the elements of an unequal split and writes results of their lengths", function()
    local x = tf.placeholder(tf.float64, {6, 2})
    local src = tf.TensorArray(tf.float64, 3):split(x, {3, 1, 2})
    local _, acc, out = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, acc, out)
      local e = src:read(i)  -- [3, 2], then [1, 2], then [2, 2]
      local y = tf.tanh(e) * acc
      return i + 1, acc + tf.reduce_sum(e * e, 0), out:write(i, y)
    end, {i32(0), tf.ones({2}, tf.float64), tf.TensorArray(tf.float64, 3, {infer_shape = false})})
    H.check_grad(x, {6, 2}, out:concat(), {6, 2}, {delta = 1e-6})
    H.check_grad(x, {6, 2}, acc, {2}, {delta = 1e-6})
    -- hand-computed: out = concat(tanh(e_i) * acc_i); x = 0 gives tanh' = 1, acc_i = 1: d sum(out) / dx = 1
    local g = tf.gradients(tf.reduce_sum(out:concat()), x)[1]
    assert.same({{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
                tf.Session():run(g, {[x] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}}}):totable())
  end)
end)
