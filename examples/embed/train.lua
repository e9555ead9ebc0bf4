-- examples/embed/train.lua DIR: trains a small policy net (8 inputs, two
-- hidden layers of 64, 4 outputs) to fit a fixed function, then saves its
-- graph (DIR/policy.graph) and weights (DIR/policy.ckpt) for host.c, and
-- prints its outputs for the inputs host.c uses, one row a line.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/embed/train.lua /tmp/policy
local tf = require("moonflow")
local dir = arg[1] or "."

tf.set_random_seed(1)
local x = tf.placeholder(tf.float32, {-1, 8}, "x")
local target = tf.placeholder(tf.float32, {-1, 4}, "target")
local h = tf.layers.dense(x, 64, {activation = tf.nn.relu, name = "h1"})
h = tf.layers.dense(h, 64, {activation = tf.nn.relu, name = "h2"})
local policy = tf.nn.softmax(tf.layers.dense(h, 4, {name = "logits"}), {name = "policy"})
local loss = tf.reduce_mean(tf.square(policy - target))
local train = tf.train.AdamOptimizer(0.01):minimize(loss)

-- Inputs i = 0..n-1: x[i][j] = sin(i + j); the target prefers action i % 4.
local function batch(n)
  local xs, ts = {}, {}
  for i = 1, n do
    xs[i], ts[i] = {}, {0, 0, 0, 0}
    for j = 1, 8 do xs[i][j] = math.sin(i + j) end
    ts[i][(i % 4) + 1] = 1
  end
  return xs, ts
end

local sess = tf.Session()
sess:run(tf.global_variables_initializer())
local xs, ts = batch(32)
for _ = 1, 200 do sess:run(train, {[x] = xs, [target] = ts}) end
tf.train.write_graph(tf.get_default_graph(), dir .. "/policy.graph")
tf.train.Saver():save(sess, dir .. "/policy.ckpt")
local out = sess:run(policy, {[x] = (batch(3))})
for i = 0, 2 do
  local row = {}
  for j = 0, 3 do row[#row + 1] = string.format("%.9g", out:get(i, j)) end
  print(table.concat(row, " "))
end
