-- linear_regression.lua — the toy linear regression of
-- tensorflow-the-confusing-parts.txt: learn m and b of y = m x + b from one
-- random sample per step, with plain gradient descent (rate 1e-3, 100000 steps).
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/linear_regression.lua
local tf = require("moonflow")

-- Build the graph: first the parameters...
local m = tf.get_variable("m", {}, {initializer = tf.constant_initializer(0)})
local b = tf.get_variable("b", {}, {initializer = tf.constant_initializer(0)})
local init = tf.global_variables_initializer()
-- ...then the computations...
local input_placeholder = tf.placeholder(tf.float32)
local output_placeholder = tf.placeholder(tf.float32)
local x = input_placeholder
local y = output_placeholder
local y_guess = m * x + b
local loss = tf.square(y - y_guess)
-- ...and finally the optimizer and the minimization node.
local optimizer = tf.train.GradientDescentOptimizer(1e-3)
local train_op = optimizer:minimize(loss)

-- Start the session.
local sess = tf.Session()
sess:run(init)

-- The training loop: the problem...
math.randomseed(42)
local true_m = math.random()
local true_b = math.random()
for update_i = 0, 99999 do
  -- (1) get the input and output,
  local input_data = math.random()
  local output_data = true_m * input_data + true_b
  -- (2), (3) and (4) all take place within a single call to sess:run().
  local r = sess:run({loss, train_op}, {[input_placeholder] = input_data, [output_placeholder] = output_data})
  if update_i % 10000 == 0 or update_i == 99999 then print(update_i, r[1]) end
end

print(string.format("True parameters: m=%.4f, b=%.4f", true_m, true_b))
print(string.format("Learned parameters: m=%.4f, b=%.4f", unpack(sess:run({m, b}))))
