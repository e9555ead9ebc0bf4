-- The autodiff driver: tf.gradients semantics, independent of any one op's rule.
local tf = require("moonflow")
local error_of = require("spec.helpers").error_of

describe("tf.gradients", function()
  before_each(function() tf.reset_default_graph() end)

  it("returns one gradient per x", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    local w = tf.placeholder(tf.float64, {3}, "w")
    local y = tf.reduce_sum(x * w)
    local g = tf.gradients(y, {x, w})
    assert.equal(2, #g)
    local sess = tf.Session()
    local r = sess:run(g, {[x] = {1, 2, 3}, [w] = {4, 5, 6}})
    assert.same({4, 5, 6}, r[1]:totable())
    assert.same({1, 2, 3}, r[2]:totable())
  end)

  it("sums over several ys", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local g = tf.gradients({x * 3, x * x}, x)[1]
    assert.equal(3 + 2 * 5, tf.Session():run(g, {[x] = 5}))
  end)

  it("weights ys by grad_ys", function()
    local x = tf.placeholder(tf.float64, {2}, "x")
    local g = tf.gradients(x * x, x, tf.constant({10, 100}, tf.float64))[1]
    assert.same({20, 400}, tf.Session():run(g, {[x] = {1, 2}}):totable())
  end)

  it("accumulates fan-out with AddN", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local a, b, c = x * 2, x * 3, x * 4
    local g = tf.gradients(a + b + c, x)[1]
    assert.equal(9, tf.Session():run(g, {[x] = 1}))
    local found = false
    for _, op in ipairs(tf.get_default_graph():get_operations()) do
      if op.type == "AddN" and op.name:match("^gradients/") then found = true end
    end
    assert.is_true(found)
  end)

  it("reduces broadcast gradients to the input's shape", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local b = tf.placeholder(tf.float64, {3}, "b")
    local s = tf.placeholder(tf.float64, {}, "s")
    local y = (x + b) * s
    local gx, gb, gs = unpack(tf.gradients(y, {x, b, s}))
    assert.same({2, 3}, gx:get_shape():as_list())
    assert.same({3}, gb:get_shape():as_list())
    local sess = tf.Session()
    local r = sess:run({gx, gb, gs}, {[x] = {{1, 2, 3}, {4, 5, 6}}, [b] = {1, 1, 1}, [s] = 2})
    assert.same({{2, 2, 2}, {2, 2, 2}}, r[1]:totable())
    assert.same({4, 4, 4}, r[2]:totable())
    assert.equal(21 + 6, r[3])
  end)

  it("reduces broadcasting that only the run-time shapes reveal", function()
    local x = tf.placeholder(tf.float64, {-1, -1}, "x")
    local y = tf.placeholder(tf.float64, {-1, -1}, "y")
    local gy = tf.gradients(x * y, y)[1]
    local r = tf.Session():run(gy, {[x] = {{1, 2}, {3, 4}}, [y] = {{1}, {1}}})
    assert.same({{3}, {7}}, r:totable())
  end)

  it("does not differentiate integer or bool inputs", function()
    local i = tf.placeholder(tf.int32, {}, "i")
    local x = tf.placeholder(tf.float64, {}, "x")
    local y = x * tf.cast(i, tf.float64)
    local g = tf.gradients(y, {x, i})
    assert.is_not_nil(g[1])
    assert.is_nil(g[2])
    assert.equal(7, tf.Session():run(g[1], {[x] = 2, [i] = 7}))
  end)

  it("gives nil for unconnected xs, or zeros when asked", function()
    local x = tf.placeholder(tf.float64, {2}, "x")
    local z = tf.placeholder(tf.float64, {2}, "z")
    local y = x * 2
    assert.is_nil(tf.gradients(y, z)[1])
    local zero = tf.gradients(y, {z, x}, nil, {unconnected_gradients = "zero"})
    local r = tf.Session():run(zero, {[x] = {1, 1}, [z] = {5, 6}})
    assert.same({0, 0}, r[1]:totable())
    assert.same({2, 2}, r[2]:totable())
    assert.matches('unconnected_gradients must be "none" or "zero"',
                   error_of(tf.gradients, y, z, nil, {unconnected_gradients = "zeros"}), 1, true)
  end)

  it("stops at tf.stop_gradient", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local y = x * tf.stop_gradient(x * x)
    local g = tf.gradients(y, x)[1]
    assert.equal(9, tf.Session():run(g, {[x] = 3}))  -- d/dx of x*c with c = x*x held fixed
    assert.is_nil(tf.gradients(tf.stop_gradient(x), x)[1])
  end)

  it("passes no gradient through ops declared non-differentiable, and needs no rule off the path", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    local f = tf.floor(x) * 2
    -- Floor is declared non-differentiable: no error, no gradient
    assert.is_nil(tf.gradients(f, x)[1])
    -- an op off the path needs no rule
    local _ = tf.floor(x)
    assert.is_not_nil(tf.gradients(x * 2, x)[1])
  end)

  it("differentiates with respect to variables, also through read_value", function()
    local v = tf.Variable(3, {name = "v", dtype = tf.float64})
    local y = v:read_value() * v
    local g = tf.gradients(y, v)[1]
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.equal(6, sess:run(g))
    -- an assignment passes no gradient
    assert.is_nil(tf.gradients(tf.assign(v, v * 2), v)[1])
  end)

  it("computes second derivatives: d2(x^3)/dx2 = 6x", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local y = x * x * x
    local dy = tf.gradients(y, x)[1]
    local d2y = tf.gradients(dy, x)[1]
    local sess = tf.Session()
    for _, v in ipairs({-2, 0.5, 3}) do
      assert.near(3 * v * v, sess:run(dy, {[x] = v}), 1e-12)
      assert.near(6 * v, sess:run(d2y, {[x] = v}), 1e-12)
    end
  end)

  it("names an op without a gradient, its type and the Lua line that made it", function()
    -- WhileGrad (the gradient of a loop) has no gradient: a second derivative through a loop.
    local x = tf.placeholder(tf.float64, {}, "x")
    local _, y = tf.while_loop(function(i) return tf.less(i, 3) end,
                               function(i, a) return i + 1, a * x end, {tf.constant(0, tf.int32), x})
    local line = debug.getinfo(1, "l").currentline + 1
    local g = tf.gradients(y, x)[1]
    assert.equal(4 * 2 ^ 3, tf.Session():run(g, {[x] = 2}))  -- y = x^4
    local e = error_of(tf.gradients, g, x)
    assert.truthy(e:find("No gradient defined for operation 'gradients/while_grad/WhileGrad' " ..
                         "(op type: WhileGrad)", 1, true), e)
    assert.truthy(e:find("gradients_spec.lua:" .. line, 1, true), e)
    -- Stopped there, no rule is needed: d(stop_gradient(g) + z^2)/dz = 2z.
    local z = tf.placeholder(tf.float64, {}, "z")
    assert.equal(4, tf.Session():run(tf.gradients(tf.stop_gradient(g) + z * z, z)[1], {[x] = 2, [z] = 2}))
  end)

  it("puts gradient ops under the gradients/ name scope", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local g1 = tf.gradients(x * x, x)[1]
    local g2 = tf.gradients(x * x, x)[1]
    assert.matches("^gradients/", g1.name)
    assert.matches("^gradients_1/", g2.name)
  end)

  it("rejects bad arguments clearly", function()
    local x = tf.placeholder(tf.float64, {}, "x")
    local i = tf.placeholder(tf.int32, {}, "i")
    assert.matches("only float32 and float64 tensors have gradients", error_of(tf.gradients, i * 2, x), 1, true)
    assert.matches("must be a Tensor or a list of Tensors", error_of(tf.gradients, 3, x), 1, true)
    local other = tf.Graph():as_default(function() return tf.placeholder(tf.float64, {}) end)
    assert.matches("must be from the same graph", error_of(tf.gradients, x * 2, other), 1, true)
    tf.get_default_graph():finalize()
    assert.matches("finalized", error_of(tf.gradients, x, x), 1, true)
  end)
end)

describe("tf.test.compute_gradient", function()
  before_each(function() tf.reset_default_graph() end)

  it("returns the theoretical and numerical Jacobians, x_size by y_size", function()
    local x = tf.placeholder(tf.float64, {2}, "x")
    local y = tf.stack({x[0] * x[1], x[0] + x[1], x[1] * 3})
    local t, n = tf.test.compute_gradient(x, {2}, y, {3}, {x_init_value = {2, 5}})
    assert.same({{5, 1, 0}, {2, 1, 3}}, t)
    for i = 1, 2 do for j = 1, 3 do assert.near(t[i][j], n[i][j], 1e-8) end end
    assert.is_true(tf.test.compute_gradient_error(x, {2}, y, {3}) < 1e-8)
  end)

  it("flags a wrong gradient", function()
    local x = tf.placeholder(tf.float64, {3}, "x")
    -- stop_gradient hides the dependence: the symbolic Jacobian is 0, the numeric one is not
    local y = tf.stop_gradient(x) * 2
    assert.is_true(tf.test.compute_gradient_error(x, {3}, y, {3}) > 1)
  end)
end)
