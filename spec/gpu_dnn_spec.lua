-- The GPU kernels of src/ops/gpu/dnn.c (issue 14) against the CPU kernels
-- of src/ops/nn.c: Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter
-- through cuDNN (float32, to 1e-5 of the result's largest magnitude: cuDNN
-- sums in another order),
-- MaxPool, AvgPool and their gradients MaxPoolGrad, AvgPoolGrad and
-- MaxPoolGradGrad (float32 and float64, bit for bit: the GPU kernels add in
-- the host kernels' order and route ties to the same maximum). Each case
-- builds one subgraph under /cpu:0 and again under /gpu:0 from the same
-- fed values, and checks with log_device_placement that the op ran on the GPU.
-- Without a GPU every case is pending (skipped), never passed.
local tf = require("moonflow")
local H = require("spec.helpers")
local GH = require("spec.gpu_compare")
setup(H.growth_off)
teardown(H.growth_restore)

-- A fed Array of shape with reproducible values in [-1, 1); ties = k makes
-- the values multiples of 1/k (many equal maxima in a window).
local function array(shape, dtype, seed, ties)
  local a = tf.Array.new(dtype, shape)
  local d, n = a:data(), H.numel(shape)
  local v = H.uniform(n, seed)
  for i = 1, n do d[i - 1] = ties and math.floor(v[i] * ties) / ties or v[i] end
  return a
end

-- Convolutions: x [n, h, w, c], filter [kh, kw, c, oc], strides, padding,
-- dilations; y, and the gradients of sum(y * u) in x and in the filter
-- (Conv2DBackpropInput, Conv2DBackpropFilter).
local conv_cases = {
  {"VALID 3x3", {2, 7, 6, 3}, {3, 3, 3, 4}, {1, 1}, "VALID"},
  {"SAME, uneven padding (one more after)", {2, 8, 8, 3}, {3, 3, 3, 5}, {2, 2}, "SAME"},
  {"SAME 2x2, stride 1: the padding only after", {1, 5, 6, 2}, {2, 2, 2, 3}, {1, 1}, "SAME"},
  {"SAME, different strides and padding per dim", {2, 9, 8, 4}, {4, 3, 4, 2}, {3, 2}, "SAME"},
  {"dilations", {1, 9, 9, 2}, {3, 3, 2, 3}, {1, 1}, "SAME", {2, 2}},
  {"dilations, VALID, strides", {2, 11, 10, 3}, {3, 2, 3, 2}, {2, 1}, "VALID", {2, 3}},
  {"pointwise 1x1", {3, 4, 5, 6}, {1, 1, 6, 7}, {1, 1}, "SAME"},
  {"stride beyond the window", {1, 9, 9, 2}, {2, 2, 2, 2}, {4, 3}, "SAME"},
  {"one pixel", {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, "VALID"},
  {"empty batch", {0, 5, 5, 2}, {3, 3, 2, 2}, {1, 1}, "SAME"},
  {"no input channels (an empty sum)", {2, 4, 4, 0}, {3, 3, 0, 2}, {1, 1}, "SAME"},
  {"no output channels", {2, 4, 4, 3}, {3, 3, 3, 0}, {1, 1}, "SAME"},
  {"large (over 1M outputs)", {16, 32, 32, 16}, {3, 3, 16, 64}, {1, 1}, "SAME"},
}

describe("GPU Conv2D and its backprops (cuDNN)", function()
  it("are registered with GPU kernels, as are the pooling ops (checked with or without a GPU)", function()
    for _, op in ipairs({"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "AvgPool", "MaxPoolGrad",
                         "AvgPoolGrad", "MaxPoolGradGrad"}) do
      assert.same({CPU = true, GPU = true}, tf.op_info(op).kernels, op)
    end
  end)

  for _, case in ipairs(conv_cases) do
    local what, xs, fs, strides, padding, dilations = (table.unpack or unpack)(case)
    it("match the CPU: " .. what, function()
      if GH.no_gpu() then return pending(GH.no_gpu()) end
      local results = {}
      for _, dev in ipairs({"/cpu:0", "/gpu:0"}) do
        results[dev] = GH.run_on(dev, function()
          local x, f = tf.placeholder(tf.float32, xs, "x"), tf.placeholder(tf.float32, fs, "f")
          local y = tf.nn.conv2d(x, f, strides, padding, {dilations = dilations, name = "conv"})
          local ys = y:get_shape():as_list()
          local u = tf.placeholder(tf.float32, ys, "u")
          local grads = tf.gradients(y, {x, f}, u)
          return {y, grads[1], grads[2]},
                 {[x] = array(xs, tf.float32, 3), [f] = array(fs, tf.float32, 5), [u] = array(ys, tf.float32, 9)}
        end)
      end
      GH.assert_close(results["/cpu:0"], results["/gpu:0"], 1e-5)
      GH.assert_placed(results["/gpu:0"], {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"})
    end)
  end

  it("run float64 convolutions on the CPU (cuDNN's float64 is not used), visible in the placement log", function()
    if GH.no_gpu() then return pending(GH.no_gpu()) end
    local r = GH.run_on("/gpu:0", function()
      local x = tf.placeholder(tf.float64, {1, 4, 4, 1}, "x")
      local f = tf.placeholder(tf.float64, {2, 2, 1, 1}, "f")
      return {tf.nn.conv2d(x, f, 1, "SAME", {name = "conv"})},
             {[x] = array({1, 4, 4, 1}, tf.float64, 1), [f] = array({2, 2, 1, 1}, tf.float64, 2)}
    end, {allow_soft_placement = true})
    GH.assert_placed(r, {}, {"Conv2D"})
  end)
end)

-- Pooling: x, ksize, strides, padding; MaxPool/AvgPool, their gradients
-- (MaxPoolGrad, AvgPoolGrad) and the gradient of MaxPoolGrad in its incoming
-- gradient (MaxPoolGradGrad).
local pool_cases = {
  {"VALID 2x2 stride 2", {2, 6, 6, 3}, {2, 2}, {2, 2}, "VALID"},
  {"SAME 3x3 stride 2 (windows overlap, clipped at the borders)", {2, 7, 8, 5}, {3, 3}, {2, 2}, "SAME"},
  {"SAME 3x3 stride 1 with ties", {1, 6, 5, 4}, {3, 3}, {1, 1}, "SAME", 3},
  {"VALID 3x2 strides 1x2 with ties", {2, 7, 9, 70}, {3, 2}, {1, 2}, "VALID", 2},
  {"window larger than the stride, SAME, uneven", {1, 10, 7, 2}, {4, 4}, {3, 2}, "SAME"},
  {"stride beyond the window", {1, 9, 9, 2}, {2, 2}, {4, 3}, "SAME"},
  {"one pixel", {1, 1, 1, 1}, {1, 1}, {1, 1}, "VALID"},
  {"empty batch", {0, 4, 4, 2}, {2, 2}, {2, 2}, "SAME"},
  {"large (over 1M inputs)", {8, 64, 64, 40}, {3, 3}, {2, 2}, "SAME", 4},
}

describe("GPU pooling", function()
  for _, dtype in ipairs({tf.float32, tf.float64}) do
    for _, case in ipairs(pool_cases) do
      local what, xs, k, s, padding, ties = (table.unpack or unpack)(case)
      it(string.format("matches the CPU bit for bit, %s: %s", dtype.name, what), function()
        if GH.no_gpu() then return pending(GH.no_gpu()) end
        local results = {}
        for _, dev in ipairs({"/cpu:0", "/gpu:0"}) do
          results[dev] = GH.run_on(dev, function()
            local x = tf.placeholder(dtype, xs, "x")
            local mp = tf.nn.max_pool(x, k, s, padding, {name = "max"})
            local ap = tf.nn.avg_pool(x, k, s, padding, {name = "avg"})
            local ys = mp:get_shape():as_list()
            local u, v = tf.placeholder(dtype, ys, "u"), tf.placeholder(dtype, xs, "v")
            local dmax = tf.gradients(mp, x, u)[1]
            local davg = tf.gradients(ap, x, u)[1]
            local gg = tf.gradients(dmax, u, v)[1]
            return {mp, ap, dmax, davg, gg},
                   {[x] = array(xs, dtype, 11, ties), [u] = array(ys, dtype, 13), [v] = array(xs, dtype, 17)}
          end)
        end
        GH.assert_close(results["/cpu:0"], results["/gpu:0"], 0)
        GH.assert_placed(results["/gpu:0"], {"MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad", "MaxPoolGradGrad"})
      end)
    end
  end
end)
