-- Convolution, pooling and bias ops of src/ops/nn.c (NHWC): tf.nn.conv2d,
-- conv2d_transpose, conv2d_backprop_input/filter, max_pool, avg_pool, bias_add.
-- Hand-computed cases, comparison with naive Lua references on random inputs,
-- TensorFlow's padding arithmetic, shapes with unknown dims, errors, and every
-- gradient (first and second order) by finite differences in float64.
local tf = require("moonflow")
local H = require("spec.helpers")
local flat, assert_near_all, run = H.flat, H.assert_near_all, H.run
setup(H.growth_off)
teardown(H.growth_restore)

local numel = H.numel

local function const(values, shape, dtype)
  return tf.constant(values, {dtype = dtype or tf.float64, shape = shape})
end

-- A tf.Array (a feed value) of shape from a flat list.
local function array(values, shape, dtype)
  local a = tf.Array.new(dtype or tf.float64, shape)
  local d = a:data()
  for i, v in ipairs(values) do d[i - 1] = v end
  return a
end

-- The 3x3 one-channel image 1..9 and a 2x2 filter [[1, 2], [3, 4]].
local function image3() return const({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1}) end
local function filter2() return const({1, 2, 3, 4}, {2, 2, 1, 1}) end

-- Squeezes a [1, h, w, 1] result to a plain h x w table.
local function plane(v)
  local t = v:totable()[1]
  local out = {}
  for i, row in ipairs(t) do
    out[i] = {}
    for j, px in ipairs(row) do out[i][j] = px[1] end
  end
  return out
end

-- References ------------------------------------------------------------------
-- TensorFlow's windowed output size and padding before, for one dim.
local function window(n, k, s, d, padding)
  local eff = (k - 1) * d + 1
  if padding == "SAME" then
    local out = math.floor((n + s - 1) / s)
    return out, math.floor(math.max(0, (out - 1) * s + eff - n) / 2)
  end
  return math.floor((n - eff + s) / s), 0
end

-- Walks every (output pixel, filter tap) pair of a convolution that lands
-- inside the input: visit(x_index, f_index, y_index) with 1-based flat
-- indices, for each channel pair. Returns the output shape.
local function conv_walk(xs, fs, s, d, padding, visit)
  local n, h, w, c = xs[1], xs[2], xs[3], xs[4]
  local kh, kw, o = fs[1], fs[2], fs[4]
  local oh, pt = window(h, kh, s[1], d[1], padding)
  local ow, pl = window(w, kw, s[2], d[2], padding)
  for b = 0, n - 1 do
    for oy = 0, oh - 1 do
      for ox = 0, ow - 1 do
        for ky = 0, kh - 1 do
          for kx = 0, kw - 1 do
            local iy, ix = oy * s[1] - pt + ky * d[1], ox * s[2] - pl + kx * d[2]
            if iy >= 0 and iy < h and ix >= 0 and ix < w then
              for ci = 0, c - 1 do
                for co = 0, o - 1 do
                  visit(((b * h + iy) * w + ix) * c + ci + 1, ((ky * kw + kx) * c + ci) * o + co + 1,
                        ((b * oh + oy) * ow + ox) * o + co + 1)
                end
              end
            end
          end
        end
      end
    end
  end
  return {n, oh, ow, o}
end

local function zeros(n)
  local t = {}
  for i = 1, n do t[i] = 0 end
  return t
end

-- conv2d, and its gradients for input and filter given dy.
local function ref_conv(x, xs, f, fs, s, d, padding)
  local shape = conv_walk(xs, fs, s, d, padding, function() end)
  local y = zeros(numel(shape))
  conv_walk(xs, fs, s, d, padding, function(i, k, o) y[o] = y[o] + x[i] * f[k] end)
  return y, shape
end
local function ref_conv_grads(x, xs, f, fs, dy, s, d, padding)
  local dx, df = zeros(numel(xs)), zeros(numel(fs))
  conv_walk(xs, fs, s, d, padding, function(i, k, o)
    dx[i] = dx[i] + dy[o] * f[k]
    df[k] = df[k] + dy[o] * x[i]
  end)
  return dx, df
end

-- max or avg pooling; for max also the gradient given dy (first maximum wins).
local function ref_pool(kind, x, xs, k, s, padding, dy)
  local n, h, w, c = xs[1], xs[2], xs[3], xs[4]
  local oh, pt = window(h, k[1], s[1], 1, padding)
  local ow, pl = window(w, k[2], s[2], 1, padding)
  local y, dx = {}, zeros(#x)
  for b = 0, n - 1 do
    for oy = 0, oh - 1 do
      for ox = 0, ow - 1 do
        for ch = 0, c - 1 do
          local best, arg, sum, count = -math.huge, nil, 0, 0
          for ky = 0, k[1] - 1 do
            for kx = 0, k[2] - 1 do
              local iy, ix = oy * s[1] - pt + ky, ox * s[2] - pl + kx
              if iy >= 0 and iy < h and ix >= 0 and ix < w then
                local i = ((b * h + iy) * w + ix) * c + ch + 1
                if x[i] > best then best, arg = x[i], i end
                sum, count = sum + x[i], count + 1
              end
            end
          end
          local o = ((b * oh + oy) * ow + ox) * c + ch + 1
          y[o] = kind == "max" and best or sum / count
          if dy then dx[arg] = dx[arg] + dy[o] end
        end
      end
    end
  end
  return y, {n, oh, ow, c}, dx
end

-- Distinct values, spaced 0.1 apart in a scrambled order: pooling windows have
-- one clear maximum even under the finite-difference step.
local function distinct(n, seed)
  local v = {}
  for i = 1, n do v[i] = (i - n / 2) * 0.1 end
  local r = H.uniform(n, seed)
  for i = n, 2, -1 do
    local j = math.floor((r[i] + 1) / 2 * i) + 1
    v[i], v[j] = v[j], v[i]
  end
  return v
end

-- Conv2D ----------------------------------------------------------------------
describe("tf.nn.conv2d", function()
  before_each(function() tf.reset_default_graph() end)

  it("computes a 3x3 image with a 2x2 filter by hand", function()
    local x, f = image3(), filter2()
    local valid = run(tf.nn.conv2d(x, f, {1, 1, 1, 1}, "VALID"))
    assert.same({1, 2, 2, 1}, valid:shape())
    assert.same({{37, 47}, {67, 77}}, plane(valid))
    -- SAME pads one column and one row after (TensorFlow puts the odd one after)
    assert.same({{37, 47, 21}, {67, 77, 33}, {23, 26, 9}}, plane(run(tf.nn.conv2d(x, f, 1, "SAME"))))
    assert.same({{37, 21}, {23, 9}}, plane(run(tf.nn.conv2d(x, f, 2, "SAME"))))
    assert.same({{37}}, plane(run(tf.nn.conv2d(x, f, {2, 2}, "VALID"))))
    -- dilation 2: the taps are two apart, an effective 3x3 window
    assert.same({{64}}, plane(run(tf.nn.conv2d(x, f, 1, "VALID", {dilations = 2}))))
    assert.same({{20, 36, 15}, {36, 64, 26}, {10, 16, 5}},
                plane(run(tf.nn.conv2d(x, f, 1, "SAME", {dilations = {1, 2, 2, 1}}))))
  end)

  it("pads asymmetrically for SAME as TensorFlow", function()
    -- 4x4 input, 3x3 window, stride 2: 1 row/column of padding, all after
    local x = const({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 4, 4, 1})
    local ones = const({1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 3, 1, 1})
    assert.same({{54, 45}, {72, 54}}, plane(run(tf.nn.conv2d(x, ones, 2, "SAME"))))
    -- stride 1: one before and one after
    assert.same({{14, 24, 30, 22}, {33, 54, 63, 45}, {57, 90, 99, 69}, {46, 72, 78, 54}},
                plane(run(tf.nn.conv2d(x, ones, 1, "SAME"))))
    -- different strides along height and width
    local r = run(tf.nn.conv2d(x, ones, {1, 2, 1, 1}, "VALID"))
    assert.same({1, 1, 2, 1}, r:shape())
    assert.same({{54, 63}}, plane(r))
  end)

  it("sums over input channels and writes each output channel", function()
    -- 1x1x1x2 input, 1x1 filter [in=2, out=3]: y = x W
    local x = const({1, 2}, {1, 1, 1, 2})
    local f = const({1, 2, 3, 4, 5, 6}, {1, 1, 2, 3})
    assert.same({{{{9, 12, 15}}}}, run(tf.nn.conv2d(x, f, 1, "VALID")):totable())
    -- a Lua value takes the other operand's dtype
    local lifted = tf.nn.conv2d({{{{1, 2}}}}, f, 1, "VALID")
    assert.equal(tf.float64, lifted.dtype)
    assert.same({{{{9, 12, 15}}}}, run(lifted):totable())
  end)

  it("matches a reference convolution on random inputs", function()
    local configs = {
      -- input shape, filter shape, strides, dilations, padding
      {{2, 5, 5, 3}, {3, 3, 3, 4}, {1, 1}, {1, 1}, "SAME"},
      {{2, 5, 5, 3}, {3, 3, 3, 4}, {1, 1}, {1, 1}, "VALID"},
      {{1, 7, 6, 2}, {3, 2, 2, 3}, {2, 2}, {1, 1}, "SAME"},
      {{1, 7, 6, 2}, {3, 2, 2, 3}, {2, 3}, {1, 1}, "VALID"},
      {{2, 8, 8, 1}, {3, 3, 1, 2}, {1, 1}, {2, 2}, "SAME"},
      {{1, 9, 7, 2}, {2, 3, 2, 2}, {2, 1}, {2, 3}, "VALID"},
      {{3, 4, 4, 5}, {1, 1, 5, 2}, {1, 1}, {1, 1}, "SAME"},    -- pointwise: no im2col
      {{1, 6, 6, 2}, {1, 1, 2, 3}, {2, 2}, {1, 1}, "VALID"},   -- 1x1 with stride
      {{1, 3, 3, 2}, {5, 5, 2, 2}, {1, 1}, {1, 1}, "SAME"},    -- window larger than the input
      {{2, 6, 5, 3}, {4, 4, 3, 2}, {3, 3}, {1, 1}, "SAME"},
    }
    for ci, c in ipairs(configs) do
      local xs, fs, s, d, padding = unpack(c)
      local xv, fv = H.uniform(numel(xs), ci), H.uniform(numel(fs), 100 + ci)
      local want, shape = ref_conv(xv, xs, fv, fs, s, d, padding)
      for _, dtype in ipairs({tf.float64, tf.float32}) do
        local y = tf.nn.conv2d(const(xv, xs, dtype), const(fv, fs, dtype), s, padding, {dilations = d})
        assert.same(shape, y:get_shape():as_list())
        local got = run(y)
        assert.same(shape, got:shape())
        assert_near_all(want, got, dtype == tf.float64 and 1e-13 or 1e-5, "config " .. ci)
      end
    end
  end)

  it("splits large problems into im2col blocks without changing results", function()
    -- 2*48*48 output rows of 3*3*16 float64 columns: more than one scratch block
    local xs, fs = {2, 48, 48, 16}, {3, 3, 16, 2}
    local xv, fv = H.uniform(numel(xs), 1), H.uniform(numel(fs), 2)
    local dyv = H.uniform(2 * 48 * 48 * 2, 3)
    local want = ref_conv(xv, xs, fv, fs, {1, 1}, {1, 1}, "SAME")
    local want_dx, want_df = ref_conv_grads(xv, xs, fv, fs, dyv, {1, 1}, {1, 1}, "SAME")
    local x, f = const(xv, xs), const(fv, fs)
    local y = tf.nn.conv2d(x, f, 1, "SAME")
    local dx, df = unpack(tf.gradients(y, {x, f}, const(dyv, {2, 48, 48, 2})))
    local r = run({y, dx, df})
    assert_near_all(want, r[1], 1e-12)
    assert_near_all(want_dx, r[2], 1e-12)
    assert_near_all(want_df, r[3], 1e-11)
  end)

  it("infers static shapes with unknown dimensions and runs any batch", function()
    local f = const(H.uniform(3 * 3 * 3 * 4, 1), {3, 3, 3, 4})
    local x = tf.placeholder(tf.float64, {-1, 8, 8, 3})
    assert.same({-1, 4, 4, 4}, tf.nn.conv2d(x, f, 2, "SAME"):get_shape():as_list())
    assert.same({-1, 6, 6, 4}, tf.nn.conv2d(x, f, 1, "VALID"):get_shape():as_list())
    local hw = tf.placeholder(tf.float64, {2, -1, -1, 3})
    assert.same({2, -1, -1, 4}, tf.nn.conv2d(hw, f, 1, "SAME"):get_shape():as_list())
    local any = tf.placeholder(tf.float64)
    assert.same({-1, -1, -1, 4}, tf.nn.conv2d(any, f, 1, "SAME"):get_shape():as_list())
    local xv = H.uniform(2 * 7 * 5 * 3, 4)
    local want = ref_conv(xv, {2, 7, 5, 3}, flat(run(f)), {3, 3, 3, 4}, {2, 2}, {1, 1}, "SAME")
    local got = run(tf.nn.conv2d(hw, f, 2, "SAME"), {[hw] = array(xv, {2, 7, 5, 3})})
    assert.same({2, 4, 3, 4}, got:shape())
    assert_near_all(want, got, 1e-13)
    -- and a gradient through the unknown batch
    local dx = tf.gradients(tf.nn.conv2d(x, f, 2, "SAME"), x)[1]
    assert.same({-1, 8, 8, 3}, dx:get_shape():as_list())
    assert.same({3, 8, 8, 3}, run(dx, {[x] = tf.Array.new(tf.float64, {3, 8, 8, 3})}):shape())
  end)

  it("handles empty batches and channels", function()
    local x = tf.placeholder(tf.float32, {-1, 4, 4, 2})
    local f = const(H.uniform(2 * 2 * 2 * 3, 1), {2, 2, 2, 3}, tf.float32)
    local y = tf.nn.conv2d(x, f, 1, "VALID")
    assert.same({0, 3, 3, 3}, run(y, {[x] = tf.Array.new(tf.float32, {0, 4, 4, 2})}):shape())
    local df = tf.gradients(y, f)[1]
    assert.same({{{{0, 0, 0}, {0, 0, 0}}, {{0, 0, 0}, {0, 0, 0}}}, {{{0, 0, 0}, {0, 0, 0}}, {{0, 0, 0}, {0, 0, 0}}}},
                run(df, {[x] = tf.Array.new(tf.float32, {0, 4, 4, 2})}):totable())
    -- no input channels: every output is an empty sum
    local none = tf.nn.conv2d(tf.zeros({1, 2, 2, 0}), tf.zeros({1, 1, 0, 2}), 1, "VALID")
    assert.same({{{{0, 0}, {0, 0}}, {{0, 0}, {0, 0}}}}, run(none):totable())
    -- a window that just does not fit is an error, not an empty output, even when the
    -- stride would make (in - eff + s) / s zero (TensorFlow's shape function subtracts first)
    assert.matches("Negative dimension size caused by subtracting 3 from 2 for '{{node conv}}'",
                   H.error_of(tf.nn.conv2d, tf.zeros({1, 2, 2, 1}), tf.zeros({3, 3, 1, 1}), 2, "VALID", {name = "conv"}),
                   1, true)
  end)

  it("reports bad arguments clearly and the session stays usable", function()
    local x, f = image3(), filter2()
    local function err(...) return H.error_of(tf.nn.conv2d, ...) end
    assert.matches('data_format "NCHW" is not supported.*NHWC', err(x, f, 1, "SAME", {data_format = "NCHW"}))
    assert.matches('padding must be "SAME" or "VALID", got "FULL"', err(x, f, 1, "FULL"))
    assert.matches("padding must be", err(x, f, 1, nil))
    assert.matches("strides must be an integer", err(x, f, {1, 2, 3}, "SAME"))
    assert.matches("strides must be an integer", err(x, f, 1.5, "SAME"))
    assert.matches("batch and depth dimensions", err(x, f, {2, 1, 1, 1}, "SAME"))
    assert.matches("strides must be positive", err(x, f, 0, "SAME"))
    assert.matches("dilations must be positive", err(x, f, 1, "SAME", {dilations = {0, 1}}))
    assert.matches("unknown option 'dilation'", err(x, f, 1, "SAME", {dilation = 2}))
    assert.matches("input must be 4%-D", err(const({1, 2, 3}, {1, 3, 1}), f, 1, "SAME"))
    assert.matches("filter must be 4%-D", err(x, const({1, 2}, {2, 1}), 1, "SAME"))
    assert.matches("input has 1 channels but the filter", err(x, const({1, 2, 3, 4}, {1, 1, 2, 2}), 1, "SAME"))
    assert.matches("Negative dimension size caused by subtracting 5 from 3 for '{{node Conv2D[_%d]*}}': " ..
                   "the window's height is 5 %(5 with dilation 1%) but the input's is 3; with padding \"VALID\"",
                   err(x, const(H.uniform(25), {5, 5, 1, 1}), 1, "VALID"))
    assert.matches("height is 4 %(2 with dilation 3%) but the input's is 2",
                   err(const({1, 2, 3, 4}, {1, 2, 2, 1}), f, 1, "VALID", {dilations = 3}))
    assert.matches("strides must be .*got {1, 2, 3}", err(x, f, {1, 2, 3}, "SAME"))
    assert.matches("int32.*tf%.cast", err(tf.constant({{{{1}}}}, tf.int32), tf.constant({{{{1}}}}, tf.int32), 1, "SAME"))
    assert.matches("float32.*float64.*tf%.cast", err(tf.constant({{{{1}}}}), const({1}, {1, 1, 1, 1}), 1, "SAME"))
    -- the runtime shape is checked too
    local p = tf.placeholder(tf.float64, {1, -1, -1, 1})
    local y = tf.nn.conv2d(p, const(H.uniform(16), {4, 4, 1, 1}), 1, "VALID")
    assert.matches("Negative dimension size caused by subtracting 4 from 2 for '{{node Conv2D[_%d]*}}'",
                   H.error_of(run, y, {[p] = {{{{1}, {2}}, {{3}, {4}}}}}))
    -- 3 rows and a 4-row window: (3 - 4 + 1) / 1 = 0 rows once came back empty
    assert.matches("Negative dimension size caused by subtracting 4 from 3",
                   H.error_of(run, y, {[p] = {{{{1}, {2}, {3}}, {{3}, {4}, {5}}, {{6}, {7}, {8}}}}}))
    assert.same({{37, 47}, {67, 77}}, plane(run(tf.nn.conv2d(x, f, 1, "VALID"))))
  end)
end)

-- Backprops and conv2d_transpose -------------------------------------------------
describe("convolution backprops", function()
  before_each(function() tf.reset_default_graph() end)

  it("are the ops of conv2d's gradient, with hand-checkable values", function()
    local x, f = image3(), filter2()
    local y = tf.nn.conv2d(x, f, 1, "VALID")
    local dx, df = unpack(tf.gradients(y, {x, f}))
    assert.equal("Conv2DBackpropInput", dx.op.type)
    assert.equal("Conv2DBackpropFilter", df.op.type)
    -- with dy = ones: dx counts the taps covering each pixel, weighted;
    -- df sums the pixels under each tap
    assert.same({{1, 3, 2}, {4, 10, 6}, {3, 7, 4}}, plane(run(dx)))
    assert.same({{{{12}}, {{16}}}, {{{24}}, {{28}}}}, run(df):totable())
  end)

  it("match the reference gradients on random inputs", function()
    local configs = {
      {{2, 5, 5, 3}, {3, 3, 3, 4}, {1, 1}, {1, 1}, "SAME"},
      {{1, 7, 6, 2}, {3, 2, 2, 3}, {2, 2}, {1, 1}, "SAME"},
      {{1, 7, 6, 2}, {3, 2, 2, 3}, {2, 3}, {1, 1}, "VALID"},
      {{2, 8, 8, 1}, {3, 3, 1, 2}, {1, 1}, {2, 2}, "SAME"},
      {{1, 9, 7, 2}, {2, 3, 2, 2}, {2, 1}, {2, 3}, "VALID"},
      {{3, 4, 4, 5}, {1, 1, 5, 2}, {1, 1}, {1, 1}, "SAME"},
      {{1, 6, 6, 2}, {1, 1, 2, 3}, {2, 2}, {1, 1}, "VALID"},
      {{2, 8, 7, 3}, {2, 2, 3, 2}, {2, 2}, {1, 1}, "VALID"},  -- stride 2, a row and column never read
    }
    for ci, c in ipairs(configs) do
      local xs, fs, s, d, padding = unpack(c)
      local xv, fv = H.uniform(numel(xs), ci), H.uniform(numel(fs), 50 + ci)
      local _, ys = ref_conv(xv, xs, fv, fs, s, d, padding)
      local dyv = H.uniform(numel(ys), 90 + ci)
      local want_dx, want_df = ref_conv_grads(xv, xs, fv, fs, dyv, s, d, padding)
      for _, dtype in ipairs({tf.float64, tf.float32}) do
        local x, f, dy = const(xv, xs, dtype), const(fv, fs, dtype), const(dyv, ys, dtype)
        local dx, df = unpack(tf.gradients(tf.nn.conv2d(x, f, s, padding, {dilations = d}), {x, f}, dy))
        -- the same through the public backprop functions
        local bi = tf.nn.conv2d_backprop_input(xs, f, dy, s, padding, {dilations = d})
        local bf = tf.nn.conv2d_backprop_filter(x, fs, dy, s, padding, {dilations = d})
        assert.same(xs, bi:get_shape():as_list())
        assert.same(fs, bf:get_shape():as_list())
        local r = run({dx, df, bi, bf})
        local tol = dtype == tf.float64 and 1e-13 or 1e-5
        assert_near_all(want_dx, r[1], tol, "dx " .. ci)
        assert_near_all(want_df, r[2], tol, "df " .. ci)
        assert_near_all(want_dx, r[3], tol, "backprop_input " .. ci)
        assert_near_all(want_df, r[4], tol, "backprop_filter " .. ci)
      end
    end
  end)

  it("give conv2d_transpose, the transpose of conv2d", function()
    local v = const({1, 2, 3, 4}, {1, 2, 2, 1})
    local ones = const({1, 1, 1, 1}, {2, 2, 1, 1})
    assert.same({{1, 3, 2}, {4, 10, 6}, {3, 7, 4}},
                plane(run(tf.nn.conv2d_transpose(v, ones, {1, 3, 3, 1}, 1, "VALID"))))
    -- stride 2 SAME: each value spreads over its own 2x2 block
    local up = tf.nn.conv2d_transpose(v, ones, {1, 4, 4, 1}, {1, 2, 2, 1})
    assert.same({1, 4, 4, 1}, up:get_shape():as_list())
    assert.same({{1, 1, 2, 2}, {1, 1, 2, 2}, {3, 3, 4, 4}, {3, 3, 4, 4}}, plane(run(up)))
    -- stride 2 maps both 3 and 4 to 2 outputs: output_shape decides
    assert.same({{1, 1, 2}, {1, 1, 2}, {3, 3, 4}}, plane(run(tf.nn.conv2d_transpose(v, ones, {1, 3, 3, 1}, 2, "SAME"))))
    -- output_shape as a tensor: the static shape follows what is known
    local p = tf.placeholder(tf.int32, {4})
    local dyn = tf.nn.conv2d_transpose(v, ones, p, 2, {padding = "SAME", name = "up"})
    assert.equal("up", dyn.op.name)
    assert.same({1, -1, -1, 1}, dyn:get_shape():as_list())
    assert.same({1, 4, 4, 1}, run(dyn, {[p] = {1, 4, 4, 1}}):shape())
    local shaped = tf.nn.conv2d_transpose(v, ones, tf.shape(tf.zeros({1, 4, 4, 1})), 2)
    assert.same({1, 4, 4, 1}, shaped:get_shape():as_list())
  end)

  it("infer shapes from partial sizes and check them", function()
    local f = const(H.uniform(2 * 2 * 3 * 4), {2, 2, 3, 4})
    local dy = tf.placeholder(tf.float64, {5, 2, 2, 4})
    local sizes = tf.placeholder(tf.int32, {4})
    assert.same({5, -1, -1, 3}, tf.nn.conv2d_backprop_input(sizes, f, dy, 2, "SAME"):get_shape():as_list())
    local x = tf.placeholder(tf.float64, {-1, 4, 4, 3})
    local fsz = tf.placeholder(tf.int32, {4})
    assert.same({-1, -1, 3, 4}, tf.nn.conv2d_backprop_filter(x, fsz, dy, 2, "SAME"):get_shape():as_list())
    -- out_backprop must have the shape the convolution gives
    local err = H.error_of(tf.nn.conv2d_backprop_input, {5, 4, 4, 3}, f, tf.placeholder(tf.float64, {5, 3, 3, 4}), 2, "SAME")
    assert.matches("out_backprop has shape %[5,3,3,4%], but a convolution of an input of shape %[5,4,4,3%] gives %[5,2,2,4%]", err)
    assert.matches("input_sizes must be a vector of 4", H.error_of(tf.nn.conv2d_backprop_input, {4, 4, 3}, f, dy, 2, "SAME"))
    assert.matches("input_sizes must be an int32 or int64", H.error_of(tf.nn.conv2d_backprop_input, tf.constant({5, 4, 4, 3}), f, dy, 2, "SAME"))
    local bad = tf.nn.conv2d_backprop_input(sizes, f, dy, 2, "SAME")
    local dyv = tf.Array.new(tf.float64, {5, 2, 2, 4})
    assert.matches("negative dimension", H.error_of(run, bad, {[sizes] = {5, -4, 4, 3}, [dy] = dyv}))
    assert.matches("out_backprop has shape", H.error_of(run, bad, {[sizes] = {5, 8, 8, 3}, [dy] = dyv}))
    assert.same({5, 3, 4, 3}, run(bad, {[sizes] = {5, 3, 4, 3}, [dy] = dyv}):shape())
  end)
end)

describe("gradients of convolutions", function()
  before_each(function() tf.reset_default_graph() end)

  local configs = {
    {{1, 4, 4, 2}, {2, 2, 2, 3}, {1, 1}, {1, 1}, "VALID"},
    {{2, 4, 3, 2}, {3, 3, 2, 2}, {1, 1}, {1, 1}, "SAME"},
    {{1, 5, 5, 1}, {3, 2, 1, 2}, {2, 2}, {1, 1}, "SAME"},
    {{1, 5, 6, 2}, {2, 2, 2, 1}, {1, 2}, {2, 2}, "SAME"},
    {{1, 3, 3, 3}, {1, 1, 3, 2}, {1, 1}, {1, 1}, "VALID"},
  }

  it("pass finite-difference checks for input and filter", function()
    for ci, c in ipairs(configs) do
      local xs, fs, s, d, padding = unpack(c)
      local _, ys = ref_conv(H.uniform(numel(xs)), xs, H.uniform(numel(fs)), fs, s, d, padding)
      local x = tf.placeholder(tf.float64, xs)
      H.check_grad(x, xs, tf.nn.conv2d(x, const(H.uniform(numel(fs), ci), fs), s, padding, {dilations = d}), ys)
      local f = tf.placeholder(tf.float64, fs)
      H.check_grad(f, fs, tf.nn.conv2d(const(H.uniform(numel(xs), ci), xs), f, s, padding, {dilations = d}), ys)
    end
  end)

  it("pass checks through the backprops (second order)", function()
    for ci, c in ipairs(configs) do
      local xs, fs, s, d, padding = unpack(c)
      local _, ys = ref_conv(H.uniform(numel(xs)), xs, H.uniform(numel(fs)), fs, s, d, padding)
      local o = {dilations = d}
      local xc, fc, dyc = const(H.uniform(numel(xs), ci), xs), const(H.uniform(numel(fs), 10 + ci), fs),
                          const(H.uniform(numel(ys), 20 + ci), ys)
      -- Conv2DBackpropInput(sizes, filter, dy) in filter and in dy
      local f, dy = tf.placeholder(tf.float64, fs), tf.placeholder(tf.float64, ys)
      H.check_grad(f, fs, tf.nn.conv2d_backprop_input(xs, f, dyc, s, padding, o), xs)
      H.check_grad(dy, ys, tf.nn.conv2d_backprop_input(xs, fc, dy, s, padding, o), xs)
      -- Conv2DBackpropFilter(x, sizes, dy) in x and in dy
      local x = tf.placeholder(tf.float64, xs)
      H.check_grad(x, xs, tf.nn.conv2d_backprop_filter(x, fs, dyc, s, padding, o), fs)
      H.check_grad(dy, ys, tf.nn.conv2d_backprop_filter(xc, fs, dy, s, padding, o), fs)
    end
  end)

  it("gives second derivatives of a loss", function()
    -- L = sum(conv(x, f)^2): d/dx (dL/df) is checked against finite differences of dL/df
    local xs, fs = {1, 4, 4, 2}, {2, 2, 2, 2}
    local x = tf.placeholder(tf.float64, xs)
    local f = const(H.uniform(numel(fs), 3), fs)
    local loss = tf.reduce_sum(tf.square(tf.nn.conv2d(x, f, 1, "SAME")))
    local df = tf.gradients(loss, f)[1]
    H.check_grad(x, xs, df, fs, nil, 1e-7)
    local hx = tf.gradients(tf.gradients(loss, x)[1], x)[1]
    assert.same(xs, hx:get_shape():as_list())
  end)
end)

-- Pooling -----------------------------------------------------------------------
describe("tf.nn.max_pool and tf.nn.avg_pool", function()
  before_each(function() tf.reset_default_graph() end)

  it("compute hand-checkable values", function()
    local x = image3()
    assert.same({{5, 6}, {8, 9}}, plane(run(tf.nn.max_pool(x, 2, 1, "VALID"))))
    assert.same({{5, 6}, {8, 9}}, plane(run(tf.nn.max_pool(x, {2, 2}, {2, 2}, "SAME"))))
    assert.same({{5}}, plane(run(tf.nn.max_pool(x, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"))))
    assert.same({{3, 4.5}, {7.5, 9}}, plane(run(tf.nn.avg_pool(x, 2, 2, "SAME"))))
    -- padding is not counted: corners average 4 values, edges 6
    assert.same({{3, 3.5, 4}, {4.5, 5, 5.5}, {6, 6.5, 7}}, plane(run(tf.nn.avg_pool(x, 3, 1, "SAME"))))
    assert.same({{3, 4}, {6, 7}}, plane(run(tf.nn.avg_pool(x, 2, 1, "VALID"))))
    -- non-square windows and strides
    assert.same({{2, 3}, {5, 6}, {8, 9}}, plane(run(tf.nn.max_pool(x, {1, 2}, 1, "VALID"))))
    assert.same({1, 3, 1, 1}, run(tf.nn.avg_pool(x, {1, 3}, {1, 2}, "VALID")):shape())
    -- channels pool independently
    local c2 = const({1, -1, 2, -2, 3, -3, 4, -4}, {1, 2, 2, 2})
    assert.same({{{{4, -1}}}}, run(tf.nn.max_pool(c2, 2, 2, "VALID")):totable())
    assert.same({{{{2.5, -2.5}}}}, run(tf.nn.avg_pool(c2, 2, 2, "VALID")):totable())
    assert.equal(tf.nn.max_pool, tf.nn.max_pool2d)
  end)

  it("match a reference on random inputs", function()
    local configs = {
      {{2, 5, 5, 3}, {2, 2}, {2, 2}, "SAME"},
      {{2, 5, 5, 3}, {2, 2}, {2, 2}, "VALID"},
      {{1, 7, 6, 2}, {3, 3}, {1, 1}, "SAME"},
      {{1, 7, 6, 70}, {3, 2}, {2, 1}, "SAME"},  -- more channels than one argmax block
      {{3, 4, 9, 1}, {2, 4}, {1, 3}, "VALID"},
      {{1, 3, 3, 2}, {5, 5}, {1, 1}, "SAME"},
      {{1, 8, 8, 4}, {1, 1}, {3, 3}, "SAME"},
    }
    for ci, c in ipairs(configs) do
      local xs, k, s, padding = unpack(c)
      local xv = H.uniform(numel(xs), ci)
      for _, kind in ipairs({"max", "avg"}) do
        local _, ys = ref_pool(kind, xv, xs, k, s, padding)
        local dyv = H.uniform(numel(ys), 40 + ci)
        local want, _, want_dx = ref_pool(kind, xv, xs, k, s, padding, dyv)
        for _, dtype in ipairs({tf.float64, tf.float32}) do
          local x = const(xv, xs, dtype)
          local y = tf.nn[kind .. "_pool"](x, k, s, padding)
          assert.same(ys, y:get_shape():as_list())
          local r = run({y, tf.gradients(y, x, const(dyv, ys, dtype))[1]})
          local tol = dtype == tf.float64 and 1e-14 or 1e-6
          assert_near_all(want, r[1], tol, kind .. " config " .. ci)
          if kind == "max" then assert_near_all(want_dx, r[2], tol, "max grad config " .. ci) end
        end
      end
    end
  end)

  it("route max_pool's gradient to the first maximum of each window", function()
    local x = image3()
    assert.same({{0, 0, 0}, {0, 1, 1}, {0, 1, 1}}, plane(run(tf.gradients(tf.nn.max_pool(x, 2, 1, "VALID"), x)[1])))
    -- overlapping SAME windows add up at shared maxima
    assert.same({{0, 0, 0}, {0, 1, 2}, {0, 2, 4}}, plane(run(tf.gradients(tf.nn.max_pool(x, 3, 1, "SAME"), x)[1])))
    -- ties: the first in row-major order takes it all
    local z = const({0, 0, 0, 0}, {1, 2, 2, 1})
    assert.same({{1, 0}, {0, 0}}, plane(run(tf.gradients(tf.nn.max_pool(z, 2, 2, "VALID"), z)[1])))
    -- avg_pool spreads each window's gradient over the values it averaged
    local a = tf.gradients(tf.nn.avg_pool(x, 2, 2, "SAME"), x)[1]
    assert.same({{0.25, 0.25, 0.5}, {0.25, 0.25, 0.5}, {0.5, 0.5, 1}}, plane(run(a)))
  end)

  it("pass finite-difference checks, first and second order", function()
    local configs = {
      {{1, 4, 4, 2}, {2, 2}, {2, 2}, "VALID"},
      {{2, 3, 5, 1}, {3, 3}, {1, 2}, "SAME"},
      {{1, 5, 4, 2}, {2, 3}, {2, 1}, "SAME"},
    }
    for ci, c in ipairs(configs) do
      local xs, k, s, padding = unpack(c)
      local xv = distinct(numel(xs), ci)
      local _, ys = ref_pool("max", xv, xs, k, s, padding)
      for _, kind in ipairs({"max", "avg"}) do
        local pool = tf.nn[kind .. "_pool"]
        local x = tf.placeholder(tf.float64, xs)
        H.check_grad(x, xs, pool(x, k, s, padding), ys, {x_init_value = xv})
        -- the gradient op, in its incoming gradient (MaxPoolGrad / AvgPoolGrad's rules)
        local xc = const(xv, xs)
        local dy = tf.placeholder(tf.float64, ys)
        local dx = tf.gradients(pool(xc, k, s, padding), xc, dy)[1]
        H.check_grad(dy, ys, dx, xs)
        -- and once more (MaxPoolGradGrad's rule; AvgPool's again for avg)
        local v = tf.placeholder(tf.float64, xs)
        H.check_grad(v, xs, tf.gradients(dx, dy, v)[1], ys)
      end
    end
  end)

  it("pass MaxPoolGradGrad values through the argmax", function()
    local x = image3()
    local dy = tf.placeholder(tf.float64, {1, 2, 2, 1})
    local dx = tf.gradients(tf.nn.max_pool(x, 2, 1, "VALID"), x, dy)[1]
    local v = const({10, 20, 30, 40, 50, 60, 70, 80, 90}, {1, 3, 3, 1})
    local gg = tf.gradients(dx, dy, v)[1]
    assert.equal("MaxPoolGradGrad", gg.op.type)
    assert.same({{50, 60}, {80, 90}}, plane(run(gg)))
    -- no gradient flows back into the pooled input through the argmax
    local x2 = tf.placeholder(tf.float64, {1, 3, 3, 1})
    local d2 = tf.gradients(tf.gradients(tf.nn.max_pool(x2, 2, 1, "VALID"), x2)[1], x2)
    assert.is_nil(d2[1])
  end)

  it("infer shapes with unknown dimensions", function()
    local x = tf.placeholder(tf.float32, {-1, 7, 7, 3})
    assert.same({-1, 4, 4, 3}, tf.nn.max_pool(x, 2, 2, "SAME"):get_shape():as_list())
    assert.same({-1, 3, 3, 3}, tf.nn.avg_pool(x, 2, 2, "VALID"):get_shape():as_list())
    local u = tf.placeholder(tf.float32)
    assert.same({-1, -1, -1, -1}, tf.nn.max_pool(u, 2, 2, "SAME"):get_shape():as_list())
    local dx = tf.gradients(tf.nn.avg_pool(x, 2, 2, "SAME"), x)[1]
    assert.same({-1, 7, 7, 3}, dx:get_shape():as_list())
    local r = run({tf.nn.max_pool(x, 2, 2, "SAME"), dx}, {[x] = tf.Array.new(tf.float32, {2, 7, 7, 3})})
    assert.same({2, 4, 4, 3}, r[1]:shape())
    assert.same({2, 7, 7, 3}, r[2]:shape())
    assert.same({0, 4, 4, 3}, run(tf.nn.max_pool(x, 2, 2, "SAME"), {[x] = tf.Array.new(tf.float32, {0, 7, 7, 3})}):shape())
  end)

  it("report bad arguments clearly", function()
    local x = image3()
    local function err(...) return H.error_of(tf.nn.max_pool, ...) end
    assert.matches("ksize is required", err(x, nil, 1, "SAME"))
    assert.matches("ksize .* batch and depth", err(x, {2, 2, 2, 1}, 1, "SAME"))
    assert.matches("ksize must be positive", err(x, 0, 1, "SAME"))
    assert.matches('data_format "NCHW" is not supported', err(x, 2, 2, "SAME", "NCHW"))
    assert.matches("value must be 4%-D", err(const({1, 2}, {1, 2}), 2, 2, "SAME"))
    assert.matches("Negative dimension size caused by subtracting 5 from 3 for '{{node MaxPool[_%d]*}}'", err(x, 5, 1, "VALID"))
    -- a window one larger than the input: once an empty (1, 0, 0, 1) output
    assert.matches("Negative dimension size caused by subtracting 4 from 3 for '{{node pool}}'",
                   H.error_of(tf.nn.avg_pool, x, 4, 1, "VALID", {name = "pool"}), 1, true)
    assert.matches("Negative dimension size caused by subtracting 4 from 3", err(x, 4, 2, "VALID"))
    assert.matches("int32.*tf%.cast", H.error_of(tf.nn.avg_pool, tf.constant({{{{1}}}}, tf.int32), 1, 1, "SAME"))
    assert.same({{5, 6}, {8, 9}}, plane(run(tf.nn.max_pool(x, 2, 1, "VALID"))))
  end)
end)

-- BiasAdd -------------------------------------------------------------------------
describe("tf.nn.bias_add", function()
  before_each(function() tf.reset_default_graph() end)

  it("adds one bias per channel along the last axis", function()
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      local v = tf.constant({{1, 2, 3}, {4, 5, 6}}, dtype)
      assert.same({{11, 22, 33}, {14, 25, 36}}, run(tf.nn.bias_add(v, {10, 20, 30})):totable())
      local img = const({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}, dtype)
      assert.same({{{{1.5, 0}, {3.5, 2}}, {{5.5, 4}, {7.5, 6}}}},
                  run(tf.nn.bias_add(img, tf.constant({0.5, -2}, dtype), {name = "b"})):totable())
    end
  end)

  it("sums the gradient over all but the last axis (BiasAddGrad)", function()
    local v = tf.placeholder(tf.float64, {2, 2, 3})
    local b = tf.placeholder(tf.float64, {3})
    local y = tf.nn.bias_add(v, b)
    local dy = const({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3})
    local dv, db = unpack(tf.gradients(y, {v, b}, dy))
    assert.equal("BiasAddGrad", db.op.type)
    local r = run({dv, db})
    assert.same(run(dy):totable(), r[1]:totable())
    assert.same({22, 26, 30}, r[2]:totable())
    H.check_grad(v, {2, 2, 3}, tf.nn.bias_add(v, const({1, 2, 3}, {3})), {2, 2, 3})
    H.check_grad(b, {3}, tf.nn.bias_add(const(H.uniform(12), {2, 2, 3}), b), {2, 2, 3})
    -- BiasAddGrad's own gradient broadcasts back
    local g = tf.placeholder(tf.float64, {2, 2, 3})
    H.check_grad(g, {2, 2, 3}, tf.gradients(tf.nn.bias_add(const(H.uniform(12), {2, 2, 3}), b), b, g)[1], {3})
  end)

  it("infers shapes and reports bad arguments", function()
    local v = tf.placeholder(tf.float32, {-1, 4})
    assert.same({-1, 4}, tf.nn.bias_add(v, tf.placeholder(tf.float32, {-1})):get_shape():as_list())
    local u = tf.placeholder(tf.float32, {-1, -1})
    assert.same({-1, 5}, tf.nn.bias_add(u, tf.placeholder(tf.float32, {5})):get_shape():as_list())
    assert.same({5}, tf.gradients(tf.nn.bias_add(u, tf.zeros({5})), u)[1] and
                     tf.gradients(tf.nn.bias_add(u, tf.placeholder(tf.float32, {5})), {u, v})[1]:get_shape():as_list()[2] and {5})
    local function err(...) return H.error_of(tf.nn.bias_add, ...) end
    assert.matches("bias has 3 elements but the last dimension of value is 4", err(v, {1, 2, 3}))
    assert.matches("value must be at least 2%-D", err(tf.constant({1, 2}), {1, 2}))
    assert.matches("bias must be 1%-D", err(v, {{1, 2, 3, 4}}))
    assert.matches('data_format "NCHW" is not supported', err(v, {1, 2, 3, 4}, "NCHW"))
    assert.matches("int32.*tf%.cast", err(tf.constant({{1}}, tf.int32), tf.constant({1}, tf.int32)))
    assert.matches("float32.*float64", err(v, tf.constant({1, 2, 3, 4}, tf.float64)))
    local p = tf.placeholder(tf.float32, {-1, -1})
    assert.matches("bias has 2 elements", H.error_of(run, tf.nn.bias_add(p, tf.constant({1, 2})), {[p] = {{1, 2, 3}}}))
  end)
end)

describe("VALID windows larger than the input", function()
  before_each(function() tf.reset_default_graph() end)

  it("are TensorFlow's negative-dimension error in tf.nn, tf.layers and conv2d_transpose", function()
    local neg = "Negative dimension size caused by subtracting 3 from 2 for '{{node %s}}': the window's height is 3"
    local x = tf.placeholder(tf.float32, {1, 2, 2, 1})
    local function refused(node, fn, ...)
      assert.matches(neg:format(node), H.error_of(fn, ...), 1, true)
    end
    refused("conv", tf.nn.conv2d, x, tf.zeros({3, 3, 1, 1}), 1, "VALID", {name = "conv"})
    refused("mp", tf.nn.max_pool, x, 3, 1, "VALID", {name = "mp"})
    refused("ap", tf.nn.avg_pool, x, 3, 1, "VALID", {name = "ap"})
    refused("conv2d/Conv2D", tf.layers.conv2d, x, 3, 3)
    refused("max_pooling2d/MaxPool", tf.layers.max_pooling2d, x, 3, 1)
    refused("average_pooling2d/AvgPool", tf.layers.average_pooling2d, x, 3, 1)
    -- a transposed convolution to an output smaller than its filter
    refused("up", tf.nn.conv2d_transpose, tf.zeros({1, 1, 1, 1}), tf.zeros({3, 3, 1, 1}), {1, 2, 2, 1}, 1, "VALID",
            {name = "up"})
    -- the width is checked as well, and SAME still pads a small input
    assert.matches("subtracting 3 from 2 for '{{node w}}': the window's width is 3",
                   H.error_of(tf.nn.max_pool, tf.zeros({1, 5, 2, 1}), {3, 3}, 1, "VALID", {name = "w"}), 1, true)
    assert.same({1, 2, 2, 1}, tf.nn.max_pool(x, 3, 1, "SAME"):get_shape():as_list())
    -- a window exactly the input's size still gives one output
    assert.same({{{{10}}}}, tf.Session():run(tf.nn.conv2d(x, tf.ones({2, 2, 1, 1}), 1, "VALID"),
                                              {[x] = {{{{1}, {2}}, {{3}, {4}}}}}):totable())
    -- shapes known only when the graph runs are checked then
    local p = tf.placeholder(tf.float32, {1, -1, -1, 1})
    local y = tf.layers.max_pooling2d(p, 3, 1)
    assert.matches(neg:format("max_pooling2d_1/MaxPool"),
                   H.error_of(tf.Session().run, tf.Session(), y, {[p] = {{{{1}, {2}}, {{3}, {4}}}}}), 1, true)
  end)
end)
