-- Arrays as values (eager.lua): operators, comparisons, indexing and op
-- methods on tf.Array compute at once with the graph's kernels; and
-- Tensor:eval / Operation:run with the default session (sess:as_default,
-- tf.InteractiveSession), as TensorFlow 1.x.
local tf = require("moonflow")
local eager = require("moonflow.eager")
local H = require("spec.helpers")

describe("tf.Array operands", function()
  local a = tf.array({1, 2})
  local m = tf.array({{1, 2}, {3, 4}})

  it("take the tensor operators, with Lua numbers on either side", function()
    assert.same({2, 3}, (a + 1):totable())
    assert.same({0, -1}, (1 - a):totable())
    assert.same({1, 4}, (a * a):totable())
    assert.same({0.5, 1}, (a / 2):totable())
    assert.same({1, 0}, (a % 2):totable())
    assert.same({1, 4}, (a ^ 2):totable())
    assert.same({-1, -2}, (-a):totable())
    assert.equal(tf.float32, (a + 1).dtype)
    -- broadcasting and dtypes as in the graph: int32 stays int32
    local i = tf.array({{1}, {2}}, tf.int32)
    local s = i + tf.array({10, 20}, tf.int32)
    assert.equal(tf.int32, s.dtype)
    assert.same({{11, 21}, {12, 22}}, s:totable())
  end)

  it("take every op as a method; scalar results are Lua values", function()
    assert.same({{7, 10}, {15, 22}}, m:matmul(m):totable())
    assert.same({4, 6}, m:reduce_sum(0):totable())
    assert.equal(10, m:reduce_sum())
    assert.same({{1, 3}, {2, 4}}, m:transpose():totable())
    assert.same({{true, true}, {false, false}}, m:less(3):totable())
    assert.same({{false, true}, {false, false}}, m:equal(2):totable())
    assert.same({{2, 3}, {4, 5}}, m:add(1):totable())
    -- tf.* functions build graph ops, arrays becoming constants, as TensorFlow 1.x's
    assert.is_true(tf.is_tensor(tf.add(m, 1)))
    local parts = m:split(2)
    assert.same({{1, 2}}, parts[1]:totable())
    assert.same({{3, 4}}, parts[2]:totable())
  end)

  it("index the first axis, 0-based, negative from the end", function()
    assert.same({3, 4}, m[1]:totable())
    assert.same({1, 2}, m[-2]:totable())
    assert.equal(3, m[-1][0])
    -- the array's own methods come first
    assert.same({2, 2}, m:shape())
    assert.equal(4, m:size())
  end)

  it("with a tensor operand build a graph op instead", function()
    local t = a + tf.constant(1)
    assert.is_true(tf.is_tensor(t))
    assert.same({2, 3}, tf.Session():run(t):totable())
  end)

  it("build each op once per dtypes, shapes and arguments", function()
    local b = a + a  -- warms the cache for this signature
    local before = eager.scratch_ops()
    for _ = 1, 100 do b = b + a end
    assert.same({102, 204}, b:totable())
    assert.equal(before, eager.scratch_ops())
  end)

  it("report errors with the op, the shapes and the user's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local err = H.error_of(function() local r = m:matmul(tf.array({1, 2, 3})); return r end)
    assert.matches("MatMul[_%d]*: MatMul needs inputs of rank >= 2, but b has shape %[3%] %(rank 1%)", err)
    assert.matches("eager_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() return a + "s" end)
    -- a Lua string converts to a string value, which a float32 operand's conversion refuses
    assert.matches('tf.add: argument y: expected numbers, got the string "s"', err, 1, true)
    assert.same({2, 3}, (a + 1):totable())  -- still usable
  end)
end)

describe("the default session", function()
  before_each(function() tf.reset_default_graph() end)

  it("runs t:eval() and op:run() inside sess:as_default(fn)", function()
    local x = tf.placeholder(tf.float32, {2})
    local y = x * 2
    local v = tf.Variable(3)
    local sess = tf.Session()
    local got = sess:as_default(function()
      assert.equal(sess, tf.get_default_session())
      v.initializer:run()
      return y:eval({[x] = {1, 2}})
    end)
    assert.same({2, 4}, got:totable())
    assert.is_nil(tf.get_default_session())
    assert.equal(3, v:eval(nil, sess))
    assert.same({6, 8}, y:eval({[x] = {3, 4}}, sess):totable())
  end)

  it("is a tf.InteractiveSession until it is closed", function()
    local c = tf.constant({1, 2}) * 3
    local sess = tf.InteractiveSession()
    assert.equal(sess, tf.get_default_session())
    assert.same({3, 6}, c:eval():totable())
    local inner = tf.Session()
    assert.equal(inner, inner:as_default(tf.get_default_session))
    sess:close()
    assert.is_nil(tf.get_default_session())
  end)

  it("is required, and of the tensor's graph", function()
    local c = tf.constant(1)
    assert.matches("Tensor:eval: No default session is registered. Use sess:as_default(fn), make a " ..
                   "tf.InteractiveSession(), or pass the session: Tensor:eval(feeds, sess)",
                   H.error_of(c.eval, c), 1, true)
    assert.matches("Operation:run: No default session is registered", H.error_of(c.op.run, c.op), 1, true)
    local other = tf.Session(tf.Graph())
    assert.matches("Tensor:eval: Cannot use the given session to evaluate Tensor(\"Const:0\", shape=(), " ..
                   "dtype=float32): its graph is different from the session's graph.",
                   H.error_of(c.eval, c, nil, other), 1, true)
    assert.matches("Tensor:eval: session must be a tf.Session, got 5", H.error_of(c.eval, c, nil, 5), 1, true)
  end)
end)
