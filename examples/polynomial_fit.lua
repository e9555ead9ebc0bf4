-- polynomial_fit.lua — the first example of effective-tensorflow.txt: fit
-- g(x, w) = w0 x^2 + w1 x + w2 to samples of f(x) = 5x^2 + 3 with Adam (rate
-- 0.1), 1000 steps of 100 fresh samples each, with the text's shrinkage term
-- 0.1 * l2_loss(w). The text shows one run: [4.9924135, 0.00040895029, 3.4504161].
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/polynomial_fit.lua [--no-shrinkage]
local tf = require("moonflow")
local shrinkage = arg[1] ~= "--no-shrinkage"
tf.set_random_seed(1)

-- Placeholders are used to feed values from Lua to the graph.
local x = tf.placeholder(tf.float32)
local y = tf.placeholder(tf.float32)

-- The desired function is a polynomial of 2nd degree: a vector of 3
-- coefficients, initialized with random noise.
local w = tf.get_variable("w", {3, 1})

-- yhat, our estimate of y.
local f = tf.stack({tf.square(x), x, tf.ones_like(x)}, 1)
local yhat = tf.squeeze(tf.matmul(f, w), 1)

-- The loss is the l2 distance between the estimate of y and its true value,
-- plus a shrinkage term that keeps the weights small.
local loss = tf.nn.l2_loss(yhat - y)
if shrinkage then loss = loss + 0.1 * tf.nn.l2_loss(w) end

-- Adam with learning rate 0.1.
local train_op = tf.train.AdamOptimizer(0.1):minimize(loss)

-- generate_data: 100 samples of x uniform in [-10, 10) and y = 5x^2 + 3 (the
-- text uses NumPy; a seeded random op of a second graph stands in for it).
local data = tf.Graph()
local sample_x, sample_y = data:as_default(function()
  tf.set_random_seed(2)
  local xs = tf.random_uniform({100}, -10, 10)
  return xs, 5 * tf.square(xs) + 3
end)
local data_sess = tf.Session(data)
local function generate_data()
  local r = data_sess:run({sample_x, sample_y})
  return r[1], r[2]
end

local sess = tf.Session()
-- Since we are using variables we first need to initialize them.
sess:run(tf.global_variables_initializer())
for step = 1, 1000 do
  local x_val, y_val = generate_data()
  local loss_val = sess:run({train_op, loss}, {[x] = x_val, [y] = y_val})[2]
  if step % 100 == 0 then print(string.format("step %4d  loss %.6g", step, loss_val)) end
end
print("w =", sess:run(tf.reshape(w, {3})))
