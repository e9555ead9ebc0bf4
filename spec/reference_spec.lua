-- The reference texts' examples, ported to Lua, with the texts' results.
local tf = require("moonflow")

describe("tensorflow-the-confusing-parts: graphs, sessions, placeholders", function()
  before_each(function() tf.reset_default_graph() end)

  it("tf.constant creates a node and prints as a Tensor", function()
    local two_node = tf.constant(2, tf.int32)
    assert.equal('Tensor("Const:0", shape=(), dtype=int32)', tostring(two_node))
  end)

  it("every call creates a new node; copying the handle does not", function()
    local two_node = tf.constant(2)
    local another_two_node = tf.constant(2)
    two_node = tf.constant(2)
    tf.constant(3)
    assert.equal(4, #tf.get_default_graph():get_operations())
    local another_pointer_at_two_node = two_node
    two_node = nil
    assert.is_nil(two_node)
    assert.equal('Tensor("Const_2:0", shape=(), dtype=float32)', tostring(another_pointer_at_two_node))
    assert.equal(4, #tf.get_default_graph():get_operations())
    assert.equal("Const_1:0", another_two_node.name)
  end)

  it("the session computes a sum node", function()
    local two_node = tf.constant(2, tf.int32)
    local three_node = tf.constant(3, tf.int32)
    local sum_node = two_node + three_node
    assert.equal("Add", sum_node.op.type)
    local sess = tf.Session()
    assert.equal(5, sess:run(sum_node))
    assert.same({2, 5}, sess:run({two_node, sum_node}))
  end)

  it("a placeholder must be fed", function()
    local input_placeholder = tf.placeholder(tf.int32)
    local sess = tf.Session()
    local ok, err = pcall(sess.run, sess, input_placeholder)
    assert.is_false(ok)
    assert.matches("You must feed a value for placeholder tensor 'Placeholder' with dtype int32", err, 1, true)
    assert.equal(2, sess:run(input_placeholder, {[input_placeholder] = 2}))
  end)

  it("only the computation path of the fetch runs", function()
    local input_placeholder = tf.placeholder(tf.int32)
    local three_node = tf.constant(3, tf.int32)
    local sum_node = input_placeholder + three_node
    local sess = tf.Session()
    assert.equal(3, sess:run(three_node))
    local ok, err = pcall(sess.run, sess, sum_node)
    assert.is_false(ok)
    assert.matches("You must feed a value for placeholder tensor 'Placeholder' with dtype int32", err, 1, true)
    assert.equal(3, sess:run(three_node))  -- the session is still usable
    assert.equal(7, sess:run(sum_node, {[input_placeholder] = 4}))
  end)
end)

describe("effective-tensorflow: basics", function()
  before_each(function() tf.reset_default_graph() end)

  it("multiplies two random matrices with an inferred static shape", function()
    local x = tf.random_normal({10, 10})
    local y = tf.random_normal({10, 10})
    local z = tf.matmul(x, y)
    assert.equal('Tensor("MatMul:0", shape=(10, 10), dtype=float32)', tostring(z))
    local sess = tf.Session()
    local xv, yv, zv = unpack(sess:run({x, y, z}))
    -- x and y are stateful random ops: fetched in the same run, z is their product.
    local want = 0
    for k = 0, 9 do want = want + xv:get(2, k) * yv:get(k, 7) end
    assert.near(want, zv:get(2, 7), 1e-4)
  end)
end)

describe("effective-tensorflow: static and dynamic shapes", function()
  before_each(function() tf.reset_default_graph() end)

  -- get_shape from the text: static dims where known, dynamic ones otherwise.
  local function get_shape(tensor)
    local static_shape = tensor:get_shape():as_list()
    local dynamic_shape = tf.unstack(tf.shape(tensor))
    local dims = {}
    for i, s in ipairs(static_shape) do dims[i] = s == -1 and dynamic_shape[i] or s end
    return dims
  end

  it("static shape, dynamic shape, set_shape and reshape", function()
    local a = tf.placeholder(tf.float32, {-1, 128})
    assert.same({-1, 128}, a:get_shape():as_list())
    local dynamic_shape = tf.shape(a)
    local sess = tf.Session()
    local feed = {}
    for i = 1, 3 do feed[i] = {} for j = 1, 128 do feed[i][j] = i end end
    assert.same({3, 128}, sess:run(dynamic_shape, {[a] = feed}):totable())
    a:set_shape({32, 128})
    assert.same({32, 128}, a:get_shape():as_list())
    a:set_shape({-1, 128})
    assert.same({32, 128}, a:get_shape():as_list())
    local r = tf.reshape(a, {32, 128})
    assert.same({32, 128}, r:get_shape():as_list())
  end)

  it("collapses dimensions whether shapes are static or not", function()
    local b = tf.placeholder(tf.float32, {-1, 10, 32})
    local shape = get_shape(b)
    local collapsed = tf.reshape(b, tf.stack({shape[1], shape[2] * shape[3]}))
    assert.same({-1, 320}, collapsed:get_shape():as_list())
    local value = {}
    for i = 1, 2 do value[i] = {} for j = 1, 10 do value[i][j] = {} for k = 1, 32 do value[i][j][k] = k end end end
    local sess = tf.Session()
    local out = sess:run(collapsed, {[b] = value})
    assert.same({2, 320}, out:shape())
    assert.equal(32, out:get(1, 319))
  end)
end)

describe("effective-tensorflow: broadcasting the good and the ugly", function()
  before_each(function() tf.reset_default_graph() end)

  it("adds with explicit tiling and with broadcasting alike", function()
    local a = tf.constant({{1, 2}, {3, 4}})
    local b = tf.constant({{1}, {2}})
    local sess = tf.Session()
    local tiled = sess:run(a + tf.tile(b, {1, 2})):totable()
    local broadcast = sess:run(a + b):totable()
    assert.same({{2, 3}, {5, 6}}, tiled)
    assert.same(tiled, broadcast)
  end)

  it("reduce_sum(a + b) is 12, and reducing axis 0 gives [5, 7]", function()
    local a = tf.constant({{1}, {2}})
    local b = tf.constant({1, 2})
    local sess = tf.Session()
    assert.equal(12, sess:run(tf.reduce_sum(a + b)))
    local c = tf.reduce_sum(a + b, 0)
    assert.same({5, 7}, sess:run(c):totable())
  end)
end)

describe("effective-tensorflow: overloaded operators", function()
  before_each(function() tf.reset_default_graph() end)

  it("slicing, unstack and reduce_sum give the same row sums", function()
    local x = tf.random_uniform({500, 10}, {seed = 1})
    local z_slices = tf.zeros({10})
    for i = 0, 499 do z_slices = z_slices + x[i] end
    local z_unstack = tf.zeros({10})
    for _, row in ipairs(tf.unstack(x)) do z_unstack = z_unstack + row end
    local z_reduce = tf.reduce_sum(x, {axis = 0})
    local sess = tf.Session()
    local r = sess:run({z_slices, z_unstack, z_reduce})
    for j = 0, 9 do
      assert.near(r[3]:get(j), r[1]:get(j), 1e-3)
      assert.near(r[3]:get(j), r[2]:get(j), 1e-3)
    end
  end)

  it("maps every operator to its op", function()
    local x = tf.constant({{1, 2}, {3, 4}})
    local y = tf.constant({{2, 2}, {2, 2}})
    local sess = tf.Session()
    local function run(t) return sess:run(t):totable() end
    assert.same(run(tf.negative(x)), run(-x))
    assert.same(run(tf.add(x, y)), run(x + y))
    assert.same(run(tf.subtract(x, y)), run(x - y))
    assert.same(run(tf.multiply(x, y)), run(x * y))
    assert.same(run(tf.divide(x, y)), run(x / y))
    assert.same(run(tf.mod(x, y)), run(x % y))
    assert.same(run(tf.pow(x, y)), run(x ^ y))
    assert.same(run(tf.matmul(x, y)), run(x:matmul(y)))
    assert.same({{-1, -2}, {-3, -4}}, run(-x))
    assert.same({{1, 0}, {1, 0}}, run(x % y))
    assert.same({{1, 4}, {9, 16}}, run(x ^ y))
    assert.same({{6, 6}, {14, 14}}, run(x:matmul(y)))
    assert.same({{false, false}, {true, true}}, run(tf.greater(x, y)))
    assert.same({{true, true}, {false, false}}, run(tf.less_equal(x, y)))
    assert.same({{false, true}, {false, false}}, run(tf.equal(x, y)))
  end)
end)
