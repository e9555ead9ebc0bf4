-- maximize_entropy.lua — "check your gradients with tf.test.compute_gradient_error"
-- from effective-tensorflow.txt. Entropy written as cross entropy against the
-- distribution's own softmax has the wrong gradient (no gradient flows into
-- labels); the cookbook's stable entropy, -sum(softmax * log_softmax), has the
-- right one, and maximizing it with Adam reaches the uniform distribution.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/maximize_entropy.lua
local tf = require("moonflow")
tf.set_random_seed(1)

local function non_differentiable_softmax_entropy(logits)
  local probs = tf.nn.softmax(logits)
  return tf.nn.softmax_cross_entropy_with_logits({labels = probs, logits = logits})
end

local function softmax_entropy(logits, dim)
  local plogp = tf.nn.softmax(logits, dim) * tf.nn.log_softmax(logits, dim)
  return -tf.reduce_sum(plogp, dim)
end

local w = tf.get_variable("w", {5})
print("gradient error, cross entropy against its own softmax:",
      tf.test.compute_gradient_error(w, {5}, non_differentiable_softmax_entropy(w), {}))
local y = softmax_entropy(w)
print("gradient error, stable entropy:", tf.test.compute_gradient_error(w, {5}, y, {}))

-- Maximum entropy: minimize its negative.
local train_op = tf.train.AdamOptimizer():minimize(-y)
local sess = tf.Session()
sess:run(tf.global_variables_initializer())
print("softmax(w) before:", sess:run(tf.nn.softmax(w)))
for _ = 1, 10000 do sess:run(train_op) end
print("softmax(w) after: ", sess:run(tf.nn.softmax(w)))
print("entropy:", sess:run(y), "log(5) =", math.log(5))
