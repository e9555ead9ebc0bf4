-- Large elementwise kernels split over the session's threads give the same
-- values, bit for bit, as one thread, and report failing elements anywhere.
local tf = require("moonflow")

describe("intra-op threads", function()
  local n = 300000  -- several chunks of the elementwise grain
  local function run(threads)
    local g = tf.Graph()
    return g:as_default(function()
      local x = tf.range(0, n, 1, tf.float32)
      local y = tf.sigmoid(x * 0.001 - 3) + tf.sqrt(x) / 7
      local q = tf.floordiv(tf.range(0, n, 1, tf.int32), tf.range(n, 0, -1, tf.int32))
      local sess = tf.Session({graph = g, intra_op_parallelism_threads = threads})
      local r = sess:run({y, q})
      return r[1], r[2], sess, g
    end)
  end

  it("gives the single-thread values", function()
    local y1, q1 = run(1)
    local y4, q4 = run(4)
    for _, pair in ipairs({{y1, y4}, {q1, q4}}) do
      local a, b = pair[1], pair[2]
      assert.equal(a:size(), b:size())
      local same = true
      for i = 0, a:size() - 1 do same = same and a:data()[i] == b:data()[i] end
      assert.is_true(same)
    end
    assert.equal(n - 1, q4:get(n - 1))
  end)

  it("reports integer division by zero from any chunk", function()
    local g = tf.Graph()
    g:as_default(function()
      local d = tf.placeholder(tf.int32, {n})
      local q = tf.floordiv(tf.ones({n}, tf.int32), d)
      local sess = tf.Session({graph = g, intra_op_parallelism_threads = 3})
      local dv = tf.Array.from_pointer(require("ffi").new("int32_t[?]", n), {n}, tf.int32)
      for i = 0, n - 1 do dv:data()[i] = 1 end
      dv:data()[n - 5] = 0
      local err = select(2, pcall(sess.run, sess, q, {[d] = dv}))
      assert.truthy(tostring(err):find("division by zero", 1, true), err)
      dv:data()[n - 5] = 2
      assert.equal(0, sess:run(q, {[d] = dv}):get(n - 5))
    end)
  end)
end)
