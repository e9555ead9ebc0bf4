-- depthwise_spec.lua — the depthwise convolution (DepthwiseConv2dNative and
-- its two backprops, tf.nn.depthwise_conv2d with rate,
-- depthwise_conv2d_native and the backprop functions), tf.nn.separable_conv2d
-- and local response normalization (LRN, LRNGrad: tf.nn.lrn), in src/ops/nn.c
-- and lua/moonflow/ops/conv.lua. Values and gradients from TensorFlow itself
-- (spec/fixtures/depthwise_values.py, its output committed as
-- spec/fixtures/depthwise_values.lua), in float32 and float64; NCHW against
-- NHWC; gradients (and second derivatives) against central differences;
-- shapes when built; errors.
local tf = require("moonflow")
local H = require("spec.helpers")
local G = require("moonflow.graph")
local V = require("spec.fixtures.depthwise_values")
local error_of, assert_values, without_line = H.error_of, H.assert_values, H.without_line

-- Tolerances by dtype: TensorFlow's float64 values, compared in float32 and float64.
local TOL = {[tf.float32] = 2e-5, [tf.float64] = 1e-12}

local function weighted_sum(y, w)
  return tf.reduce_sum(y * tf.constant(w, y.dtype))
end

local function to_nchw(t) return tf.transpose(t, {0, 3, 1, 2}) end
local function to_nhwc(t) return tf.transpose(t, {0, 2, 3, 1}) end

describe("tf.nn.depthwise_conv2d", function()
  before_each(tf.reset_default_graph)

  it("values and gradients as TensorFlow's, float32 and float64, NHWC and NCHW", function()
    for _, case in ipairs(V.depthwise) do
      local name, xv, fv, strides, padding, dil, want, w, want_dx, want_df = unpack(case)
      for _, dtype in ipairs({tf.float32, tf.float64}) do
        for _, format in ipairs({"NHWC", "NCHW"}) do
          local x, f = tf.constant(xv, dtype), tf.constant(fv, dtype)
          local nchw = format == "NCHW"
          local y = tf.nn.depthwise_conv2d(nchw and to_nchw(x) or x, f, strides, padding,
                                           {rate = dil, data_format = format})
          if nchw then
            assert.same({#want, #want[1][1][1], #want[1], #want[1][1]}, y:get_shape():as_list())
            y = to_nhwc(y)
          end
          assert.same({#want, #want[1], #want[1][1], #want[1][1][1]}, y:get_shape():as_list())
          local g = tf.gradients(weighted_sum(y, w), {x, f})
          local r = H.run({y, g[1], g[2]})
          local tol = TOL[dtype]
          assert(H.same(want, r[1]:totable(), tol), name .. " " .. format .. " value")
          assert(H.same(want_dx, r[2]:totable(), tol), name .. " " .. format .. " input gradient")
          assert(H.same(want_df, r[3]:totable(), tol), name .. " " .. format .. " filter gradient")
        end
      end
    end
  end)

  it("the native op and its backprop functions, called directly", function()
    local _, xv, fv, strides, padding, _, want, w, want_dx, want_df = unpack(V.depthwise[2])
    local x, f = tf.constant(xv, tf.float64), tf.constant(fv, tf.float64)
    local s = {1, strides[1], strides[2], 1}
    local y = tf.nn.depthwise_conv2d_native(x, f, s, padding)
    local dy = tf.constant(w, tf.float64)
    local dx = tf.nn.depthwise_conv2d_native_backprop_input({1, 5, 5, 2}, f, dy, s, padding)
    local df = tf.nn.depthwise_conv2d_backprop_filter(x, tf.constant({3, 3, 2, 2}, tf.int32), dy, s, padding)
    assert.same({1, 5, 5, 2}, dx:get_shape():as_list())
    assert.same({3, 3, 2, 2}, df:get_shape():as_list())
    local r = H.run({y, dx, df})
    assert_values(want, r[1]:totable(), 1e-12)
    assert_values(want_dx, r[2]:totable(), 1e-12)
    assert_values(want_df, r[3]:totable(), 1e-12)
  end)

  it("uneven strides (which TensorFlow's CPU kernel refuses) agree with one conv2d per channel", function()
    local xv, fv = H.values(1 * 6 * 7 * 2, 3), H.values(3 * 2 * 2 * 2, 4)
    local x = tf.reshape(tf.constant(xv, tf.float64), {1, 6, 7, 2})
    local f = tf.reshape(tf.constant(fv, tf.float64), {3, 2, 2, 2})
    for _, padding in ipairs({"SAME", "VALID"}) do
      local y = tf.nn.depthwise_conv2d(x, f, {1, 2, 3, 1}, padding)
      local parts = {}
      for c = 0, 1 do
        local xc = tf.slice(x, {0, 0, 0, c}, {-1, -1, -1, 1})
        local fc = tf.reshape(tf.slice(f, {0, 0, c, 0}, {-1, -1, 1, -1}), {3, 2, 1, 2})
        parts[#parts + 1] = tf.nn.conv2d(xc, fc, {1, 2, 3, 1}, padding)
      end
      local r = H.run({y, tf.concat(parts, 3)})
      assert_values(r[2]:totable(), r[1]:totable(), 1e-12)
    end
  end)

  it("gradients and second derivatives against central differences", function()
    local x_shape, f_shape = {1, 4, 5, 2}, {3, 2, 2, 2}
    for _, opts in ipairs({{1, "SAME", 1, "NHWC"}, {2, "VALID", 1, "NHWC"}, {1, "SAME", 2, "NCHW"},
                           {3, "SAME", 1, "NCHW"}}) do
      local stride, padding, rate, format = unpack(opts)
      local shape = format == "NCHW" and {1, 2, 4, 5} or x_shape
      local x = tf.placeholder(tf.float64, shape)
      local f = tf.placeholder(tf.float64, f_shape)
      local xv, fv = H.values(40, 1), H.values(24, 2)
      local function conv(a, b) return tf.nn.depthwise_conv2d(a, b, stride, padding, {rate = rate, data_format = format}) end
      local y = conv(x, tf.reshape(tf.constant(fv, tf.float64), f_shape))
      H.check_grad(x, shape, y, y:get_shape():as_list(), {x_init_value = xv})
      y = conv(tf.reshape(tf.constant(xv, tf.float64), shape), f)
      H.check_grad(f, f_shape, y, y:get_shape():as_list(), {x_init_value = fv})
      -- the backprops' own gradients (each is bilinear): with respect to each of their operands
      local xc, fc = tf.reshape(tf.constant(xv, tf.float64), shape), tf.reshape(tf.constant(fv, tf.float64), f_shape)
      local y_shape = conv(xc, fc):get_shape():as_list()
      local dyv = H.values(H.numel(y_shape), 9)
      local dy = tf.reshape(tf.constant(dyv, tf.float64), y_shape)
      H.check_grad(f, f_shape, tf.gradients(conv(xc, f), xc, dy)[1], shape, {x_init_value = fv})
      H.check_grad(x, shape, tf.gradients(conv(x, fc), fc, dy)[1], f_shape, {x_init_value = xv})
      local dyp = tf.placeholder(tf.float64, y_shape)
      H.check_grad(dyp, y_shape, tf.gradients(conv(xc, fc), xc, dyp)[1], shape, {x_init_value = dyv})
      H.check_grad(dyp, y_shape, tf.gradients(conv(xc, fc), fc, dyp)[1], f_shape, {x_init_value = dyv})
    end
  end)

  it("results do not depend on the thread count", function()
    local x = tf.reshape(tf.constant(H.values(2 * 33 * 31 * 16, 5)), {2, 33, 31, 16})
    local f = tf.reshape(tf.constant(H.values(3 * 3 * 16 * 2, 6)), {3, 3, 16, 2})
    local y = tf.nn.depthwise_conv2d(x, f, 1, "SAME")
    local g = tf.gradients(tf.reduce_sum(y * y), {x, f})
    local results = {}
    for _, threads in ipairs({1, 4}) do
      local sess = tf.Session({intra_op_parallelism_threads = threads})
      local r = sess:run({y, g[1], g[2]})
      results[threads] = {r[1]:totable(), r[2]:totable(), r[3]:totable()}
      sess:close()
    end
    for i = 1, 3 do assert.same(results[1][i], results[4][i]) end
  end)

  it("empty batches and no channels", function()
    local x = tf.placeholder(tf.float32, {-1, 3, 3, 2})
    local f = tf.constant(1, tf.float32, {2, 2, 2, 1})
    local y = tf.nn.depthwise_conv2d(x, f, 1, "SAME")
    local df = tf.gradients(tf.reduce_sum(y), f)[1]
    local sess = tf.Session()
    local r = sess:run({y, df}, {[x] = sess:run(tf.zeros({0, 3, 3, 2}))})
    assert.same({0, 3, 3, 2}, r[1]:shape())
    assert_values({{{{0}, {0}}, {{0}, {0}}}, {{{0}, {0}}, {{0}, {0}}}}, r[2]:totable())
    local none = tf.nn.depthwise_conv2d(tf.zeros({1, 3, 3, 0}), tf.zeros({2, 2, 0, 3}), 1, "VALID")
    assert.same({1, 2, 2, 0}, sess:run(none):shape())
    sess:close()
  end)

  it("errors: depth, ranks, window attributes, rate with strides, data_format, sizes, dtypes", function()
    local function msg(...) return without_line(error_of(...)) end
    local x, f = tf.zeros({1, 4, 4, 3}), tf.zeros({2, 2, 2, 1})
    assert.matches("^DepthwiseConv2dNative: input and filter must have the same depth: the input has 3 channels but "
                   .. "the filter %[height, width, in_channels, channel_multiplier%] has 2",
                   msg(tf.nn.depthwise_conv2d, x, f, 1, "SAME"))
    assert.equal("DepthwiseConv2dNative: input and filter must have the same depth: the input has 3 channels but "
                 .. "the filter [height, width, in_channels, channel_multiplier] has 2 (input shape [1,3,4,5], filter "
                 .. "shape [2,2,2,1])",
                 msg(tf.nn.depthwise_conv2d_native, tf.zeros({1, 3, 4, 5}), f, 1, "SAME", "NCHW"))
    assert.matches("^DepthwiseConv2dNative: input must be 4%-D %[batch, height, width, channels%], got shape %[4,4,3%]",
                   msg(tf.nn.depthwise_conv2d, tf.zeros({4, 4, 3}), f, 1, "SAME"))
    assert.matches("^DepthwiseConv2dNative: filter must be 4%-D %[height, width, in_channels, channel_multiplier%]",
                   msg(tf.nn.depthwise_conv2d, x, tf.zeros({2, 2, 3}), 1, "SAME"))
    assert.matches("Negative dimension size caused by subtracting 5 from 4",
                   msg(tf.nn.depthwise_conv2d, x, tf.zeros({5, 1, 3, 1}), 1, "VALID"))
    assert.equal("tf.nn.depthwise_conv2d: strides > 1 not supported in conjunction with rate > 1 (strides 2, rate 2)",
                 msg(tf.nn.depthwise_conv2d, x, tf.zeros({2, 2, 3, 1}), 2, "SAME", 2))
    assert.equal("DepthwiseConv2dNative: strides is {2, 1, 1, 1}, but windows over the batch and depth dimensions "
                 .. "are not supported: they must be 1, as in {1, height, width, 1} (NHWC)",
                 msg(tf.nn.depthwise_conv2d_native, x, tf.zeros({2, 2, 3, 1}), {2, 1, 1, 1}, "SAME"))
    assert.equal("DepthwiseConv2dNative: strides is {1, 2, 1, 1}, but windows over the batch and depth dimensions "
                 .. "are not supported: they must be 1, as in {1, 1, height, width} (NCHW)",
                 msg(tf.nn.depthwise_conv2d_native, x, tf.zeros({2, 2, 4, 1}), {1, 2, 1, 1}, "SAME", "NCHW"))
    assert.equal('DepthwiseConv2dNative: data_format must be "NHWC" or "NCHW", got "NWHC"',
                 msg(tf.nn.depthwise_conv2d_native, x, tf.zeros({2, 2, 3, 1}), 1, "SAME", "NWHC"))
    assert.equal('DepthwiseConv2dNative: padding must be "SAME" or "VALID", got "FULL"',
                 msg(tf.nn.depthwise_conv2d_native, x, tf.zeros({2, 2, 3, 1}), 1, "FULL"))
    assert.matches("^DepthwiseConv2dNative: the filter's height and width must be at least 1",
                   msg(tf.nn.depthwise_conv2d, x, tf.zeros({0, 2, 3, 1}), 1, "SAME"))
    assert.matches("^DepthwiseConv2dNative: input has dtype float32 but filter has dtype float64",
                   msg(tf.nn.depthwise_conv2d, x, tf.zeros({2, 2, 3, 1}, tf.float64), 1, "SAME"))
    assert.matches("^DepthwiseConv2dNative: input has dtype int32",
                   msg(tf.nn.depthwise_conv2d, tf.zeros({1, 4, 4, 3}, tf.int32), tf.zeros({2, 2, 3, 1}, tf.int32), 1,
                       "SAME"))
    assert.matches("^DepthwiseConv2dNativeBackpropInput: out_backprop has shape %[1,4,4,2%], but a depthwise "
                   .. "convolution of an input of shape %[1,4,4,3%] gives %[1,4,4,3%]",
                   msg(tf.nn.depthwise_conv2d_native_backprop_input, {1, 4, 4, 3}, tf.zeros({2, 2, 3, 1}),
                       tf.zeros({1, 4, 4, 2}), 1, "SAME"))
    assert.matches("^DepthwiseConv2dNativeBackpropFilter: filter_sizes must be a vector of 4 dims",
                   msg(tf.nn.depthwise_conv2d_native_backprop_filter, x, {2, 2, 3}, tf.zeros({1, 4, 4, 3}), 1,
                       "SAME"))
    -- a shape known only when run: the session's error, and the session stays usable
    local p = tf.placeholder(tf.float32, {1, -1, -1, -1})
    local y = tf.nn.depthwise_conv2d(p, tf.zeros({2, 2, 3, 1}), 1, "SAME")
    local sess = tf.Session()
    assert.matches("input and filter must have the same depth",
                   error_of(sess.run, sess, y, {[p] = sess:run(tf.zeros({1, 3, 3, 2}))}))
    assert.same({1, 3, 3, 3}, sess:run(y, {[p] = sess:run(tf.zeros({1, 3, 3, 3}))}):shape())
    sess:close()
  end)
end)

describe("tf.nn.separable_conv2d", function()
  before_each(tf.reset_default_graph)

  it("values and gradients as TensorFlow's, NHWC and NCHW", function()
    for _, case in ipairs(V.separable) do
      local name, xv, dwv, pwv, strides, padding, rate, want, w, want_dx, want_ddw, want_dpw = unpack(case)
      for _, format in ipairs({"NHWC", "NCHW"}) do
        local x, dw, pw = tf.constant(xv, tf.float64), tf.constant(dwv, tf.float64), tf.constant(pwv, tf.float64)
        local nchw = format == "NCHW"
        local y = tf.nn.separable_conv2d(nchw and to_nchw(x) or x, dw, pw, strides, padding,
                                         {rate = rate, data_format = format, name = "sep"})
        assert.matches("^sep", y.op.name)
        if nchw then y = to_nhwc(y) end
        local g = tf.gradients(weighted_sum(y, w), {x, dw, pw})
        local r = H.run({y, g[1], g[2], g[3]})
        assert(H.same(want, r[1]:totable(), 1e-12), name .. " value")
        assert(H.same(want_dx, r[2]:totable(), 1e-12), name .. " input gradient")
        assert(H.same(want_ddw, r[3]:totable(), 1e-12), name .. " depthwise filter gradient")
        assert(H.same(want_dpw, r[4]:totable(), 1e-12), name .. " pointwise filter gradient")
      end
    end
  end)

  it("errors: a pointwise filter that is not 1x1", function()
    assert.equal("tf.nn.separable_conv2d: pointwise_filter must be [1, 1, in_channels * channel_multiplier, "
                 .. "out_channels], got shape (3, 1, 4, 2)",
                 without_line(error_of(tf.nn.separable_conv2d, tf.zeros({1, 4, 4, 2}), tf.zeros({2, 2, 2, 2}),
                                       tf.zeros({3, 1, 4, 2}), 1, "SAME")))
  end)
end)

describe("tf.nn.lrn", function()
  before_each(tf.reset_default_graph)

  it("values and gradients as TensorFlow's, float32 and float64", function()
    for _, case in ipairs(V.lrn) do
      local name, xv, radius, bias, alpha, beta, want, w, want_dx = unpack(case)
      for _, dtype in ipairs({tf.float32, tf.float64}) do
        local x = tf.constant(xv, dtype)
        local y = tf.nn.local_response_normalization(x, radius, bias, alpha, beta)
        local g = tf.gradients(weighted_sum(y, w), x)[1]
        local r = H.run({y, g})
        assert(H.same(want, r[1]:totable(), 2e-6), name .. " value")
        assert(H.same(want_dx, r[2]:totable(), 2e-6), name .. " gradient")
      end
    end
  end)

  it("defaults (depth_radius 5, bias 1, alpha 1, beta 0.5), an options table, a gradient against central differences",
     function()
    local x = tf.constant({{{{1, 2, 3}}}}, tf.float64)
    local want = {}
    for k, v in ipairs({1, 2, 3}) do want[k] = v / math.sqrt(1 + 14) end
    assert_values({{{want}}}, H.value(tf.nn.lrn(x)), 1e-15)
    assert_values({{{want}}}, H.value(tf.nn.lrn(x, {depth_radius = 5, name = "n"})), 1e-15)
    local p = tf.placeholder(tf.float64, {2, 2, 1, 6})
    H.check_grad(p, {2, 2, 1, 6}, tf.nn.lrn(p, 2, 1.5, 0.7, 0.8), {2, 2, 1, 6}, {x_init_value = H.values(24, 3), delta = 1e-6},
                  1e-6)
    -- TensorFlow defines no gradient for LRNGrad: a second derivative is an error, not a silent zero
    local dx = tf.gradients(tf.reduce_sum(tf.nn.lrn(p)), p)[1]
    assert.matches("LRNGrad has no gradient %(TensorFlow defines none either%)",
                   error_of(tf.gradients, tf.reduce_sum(dx), p))
  end)

  it("errors: rank, depth_radius, dtypes, LRNGrad's shapes", function()
    local function msg(...) return without_line(error_of(...)) end
    assert.matches("^LRN: input must be 4%-D %[batch, height, width, channels%], got shape %[2,3%]",
                   msg(tf.nn.lrn, tf.zeros({2, 3})))
    assert.equal("LRN: depth_radius must be between 0 and 2^31 - 1, got -1", msg(tf.nn.lrn, tf.zeros({1, 1, 1, 2}), -1))
    assert.equal("tf.nn.lrn: depth_radius must be an integer, got 1.5", msg(tf.nn.lrn, tf.zeros({1, 1, 1, 2}), 1.5))
    assert.equal("tf.nn.lrn: beta must be a number, got x",
                 msg(tf.nn.lrn, tf.zeros({1, 1, 1, 2}), {beta = "x"}))
    assert.matches("^LRN: input has dtype int32", msg(tf.nn.lrn, tf.zeros({1, 1, 1, 2}, tf.int32)))
    assert.matches("^LRNGrad: input_grads, input_image, and out_image should have the same shape, got %[1,1,1,2%], "
                   .. "%[1,1,1,3%] and %[1,1,1,2%]",
                   msg(function()
                     return G.op{"LRNGrad", inputs = {tf.zeros({1, 1, 1, 2}), tf.zeros({1, 1, 1, 3}),
                                                     tf.zeros({1, 1, 1, 2})}}
                   end))
  end)
end)
