-- Softmax, the cross-entropy ops, BiasAdd, BiasAddGrad, the activations and
-- their gradient ops on the GPU (src/cuda/nn.cu, activations.cu, glue
-- src/ops/gpu/gpu_nn.c) against the CPU: edge sizes,
-- extreme logits, both label dtypes, bad labels reported in the CPU's words,
-- float32 and float64, gradients. Pending without a GPU.
local tf = require("moonflow")
local G = require("spec.gpu_blas_helpers")
local H = require("spec.helpers")

describe("nn ops on the GPU", function()
  it("registers GPU kernels (also where no GPU is present)", function()
    local ops = {"Softmax", "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", "BiasAdd",
                 "BiasAddGrad", "Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Softplus", "Softsign", "ReluGrad",
                 "Relu6Grad", "LeakyReluGrad", "EluGrad", "SeluGrad", "SoftplusGrad", "SoftsignGrad"}
    for _, op in ipairs(ops) do assert.is_true(tf.op_info(op).kernels.GPU, op) end
  end)

  for _, dt in ipairs({tf.float32, tf.float64}) do
    G.it(dt.name .. ": Softmax over rows of 1, odd, and more than a block of classes", function()
      for _, shape in ipairs({{1, 1}, {3, 5}, {4, 1000}, {2, 3, 7}, {0, 4}, {2000, 3}}) do
        G.compare({"Softmax"}, function() return {tf.nn.softmax(G.input(shape, dt, 31, 10))} end)
      end
    end)
    G.it(dt.name .. ": Softmax of extreme logits (large, infinite, NaN)", function()
      G.compare({"Softmax"}, function()
        return {tf.nn.softmax(tf.constant({-1000, 1000, 999, 1, 1 / 0, 2, 3, 0 / 0, 4, 5, 6, 7}, dt, {4, 3}))}
      end)
    end)
    G.it(dt.name .. ": SoftmaxCrossEntropyWithLogits, loss and gradient", function()
      for _, shape in ipairs({{1, 1}, {3, 5}, {7, 700}, {0, 3}}) do
        G.compare({"SoftmaxCrossEntropyWithLogits"}, function()
          local x = G.input(shape, dt, 37, 5)
          local labels = tf.nn.softmax(G.input(shape, dt, 41, 3))
          local loss = tf.nn.softmax_cross_entropy_with_logits_v2({labels = labels, logits = x})
          return {loss, tf.gradients(tf.reduce_sum(loss), {x})[1]}
        end)
      end
      G.compare({"SoftmaxCrossEntropyWithLogits"}, function()
        local x = tf.constant({-1000, 1000, 999}, dt, {1, 3})
        return {tf.nn.softmax_cross_entropy_with_logits_v2({labels = tf.constant({0, 0.5, 0.5}, dt, {1, 3}),
                                                             logits = x})}
      end)
    end)
    for _, lt in ipairs({tf.int32, tf.int64}) do
      G.it(dt.name .. ": SparseSoftmaxCrossEntropyWithLogits with " .. lt.name .. " labels, and gradient", function()
        for _, shape in ipairs({{1, 1}, {5, 4}, {9, 1001}}) do
          G.compare({"SparseSoftmaxCrossEntropyWithLogits"}, function()
            local x = G.input(shape, dt, 43, 5)
            local labels = {}
            for i = 1, shape[1] do labels[i] = (i * 7) % shape[2] end
            local loss = tf.nn.sparse_softmax_cross_entropy_with_logits({labels = tf.constant(labels, lt), logits = x})
            return {loss, tf.gradients(tf.reduce_sum(loss), {x})[1]}
          end)
        end
      end)
    end
    G.it(dt.name .. ": a label out of range fails the run on the GPU in the CPU's words", function()
      local function message(dev)
        tf.reset_default_graph()
        local loss = tf.device(dev, function()
          return tf.nn.sparse_softmax_cross_entropy_with_logits({labels = tf.constant({0, 3, -1}, tf.int32),
                                                                 logits = G.input({3, 3}, dt)})
        end)
        local sess = tf.Session()
        local err = H.error_of(function() return sess:run(loss) end)
        assert.equal(2, sess:run(tf.constant(2)))  -- the session stays usable
        sess:close()
        return err
      end
      local want = "Received a label value of 3 which is outside the valid range of [0, 3).  Label values: 0 3 -1"
      local cpu, gpu = message("/cpu:0"), message("/gpu:0")
      assert.truthy(cpu:find(want, 1, true), cpu)
      assert.truthy(gpu:find(want, 1, true), gpu)
    end)
    G.it(dt.name .. ": BiasAdd and its gradient (BiasAddGrad)", function()
      for _, shape in ipairs({{2, 3}, {4, 5, 6, 7}, {1, 1}, {0, 3}, {3000, 513}}) do
        G.compare({"BiasAdd", "BiasAddGrad"}, function()
          local v, b = G.input(shape, dt, 47), G.input({shape[#shape]}, dt, 53)
          local y = tf.nn.bias_add(v, b)
          return {y, tf.gradients(tf.reduce_sum(y * G.input(shape, dt, 59)), {v, b})[2]}
        end)
      end
    end)
  end

  -- Every activation and its gradient op, on values around the kinks (0, 6)
  -- and far out, in every dtype its table lists.
  local ACTS = {
    {"Relu", tf.nn.relu, "ReluGrad", true}, {"Relu6", tf.nn.relu6, "Relu6Grad", true},
    {"LeakyRelu", function(x) return tf.nn.leaky_relu(x, 0.3) end, "LeakyReluGrad"},
    {"Elu", tf.nn.elu, "EluGrad"}, {"Selu", tf.nn.selu, "SeluGrad"},
    {"Softplus", tf.nn.softplus, "SoftplusGrad"}, {"Softsign", tf.nn.softsign, "SoftsignGrad"},
  }
  for _, a in ipairs(ACTS) do
    local name, fn, grad, ints = a[1], a[2], a[3], a[4]
    for _, dt in ipairs(ints and {tf.float32, tf.float64, tf.int32, tf.int64} or {tf.float32, tf.float64}) do
      G.it(name .. " and " .. grad .. " " .. dt.name, function()
        local float = dt == tf.float32 or dt == tf.float64
        G.compare(float and {name, grad} or {name}, function()
          local x = G.input({3, 1001}, dt, 61, 8)
          local edges = tf.constant(float and {0, 6, -0.0, 1e-30, -50, 50, 100, -100, 0 / 0} or {0, 6, -1, 7, 5},
                                    dt)
          local out = {fn(x), fn(edges), fn(G.input({0, 2}, dt))}
          if float then out[#out + 1] = tf.gradients(tf.reduce_sum(fn(x) * G.input({3, 1001}, dt, 67)), {x})[1] end
          return out
        end)
      end)
    end
  end
end)
