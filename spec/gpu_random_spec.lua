-- The random ops on the GPU (src/ops/gpu/random.c, src/cuda/random.cu;
-- issue 14) against the CPU kernels of src/ops/random.c, for the same seeds
-- and runs: both sides run kernels/philox.h's generator and conversions, so
-- RandomUniform (float32, float64) and RandomUniformInt (int32, int64) give
-- the same numbers to the bit. RandomNormal and TruncatedNormal go through
-- the math library of each side (glibc's logf/sinf/cosf on the CPU, CUDA's
-- on the GPU), whose results differ in the last bit for some arguments
-- (glibc's logf itself is not correctly rounded), so they agree to 1e-6
-- (float32; 1e-14 float64) of the largest value rather than to the bit; a
-- truncated normal within an ulp of +-2 can even be kept on one side and
-- drawn again on the other (odds about 2.6e-8 per value), which shifts the
-- rest of its group of 4 (float32; 2 float64): TruncatedNormal may differ in
-- a few elements (1e-5 of them, at least 4), each still within two standard
-- deviations of the mean on both sides.
-- Without a GPU every case is pending (skipped), never passed.
local tf = require("moonflow")
local H = require("spec.helpers")
local GH = require("spec.gpu_compare")
setup(H.growth_off)
teardown(H.growth_restore)

-- Element counts: empty, one, not a multiple of a block's values, large.
local sizes = {{0}, {1}, {3}, {5, 7}, {2, 3, 5}, {1000003}}

-- The op made by make(shape) with the same seeds on the CPU and on the GPU,
-- three runs each (each run draws new numbers), compared with tol (and
-- spare, GH.assert_close's).
local function compare(make, tol, op_type, spare)
  local results = {}
  for _, dev in ipairs({"/cpu:0", "/gpu:0"}) do
    results[dev] = GH.run_on(dev, function() return {make()}, {} end, nil, 3)
  end
  GH.assert_close(results["/cpu:0"], results["/gpu:0"], tol, spare)
  GH.assert_placed(results["/gpu:0"], {op_type})
end

describe("GPU random ops", function()
  it("are registered with GPU kernels (checked with or without a GPU); shuffle and multinomial are not", function()
    for _, op in ipairs({"RandomUniform", "RandomUniformInt", "RandomNormal", "TruncatedNormal"}) do
      assert.same({CPU = true, GPU = true}, tf.op_info(op).kernels, op)
    end
    for _, op in ipairs({"RandomShuffle", "Multinomial"}) do
      assert.same({CPU = true, GPU = false}, tf.op_info(op).kernels, op)
    end
  end)

  it("give the CPU's numbers under /gpu:0 with soft placement, with a GPU or without (the CPU then)", function()
    local function draw(dev)
      return GH.run_on(dev, function() return {tf.random_uniform({9}, {seed = 4, name = "r"})}, {} end,
                       {allow_soft_placement = true}, 2)
    end
    local on_gpu = draw("/gpu:0")
    GH.assert_close(draw("/cpu:0"), on_gpu, 0)
    local gpu = tf.test.is_gpu_available()
    GH.assert_placed(on_gpu, gpu and {"RandomUniform"} or {}, gpu and {} or {"RandomUniform"})
  end)

  for _, shape in ipairs(sizes) do
    local shown = table.concat(shape, "x")
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      it(string.format("RandomUniform %s %s: the CPU's numbers to the bit", dtype.name, shown), function()
        if GH.no_gpu() then return pending(GH.no_gpu()) end
        compare(function() return tf.random_uniform(shape, {dtype = dtype, seed = 7, name = "r"}) end, 0,
                "RandomUniform")
      end)
      it(string.format("RandomNormal %s %s: the CPU's numbers", dtype.name, shown), function()
        if GH.no_gpu() then return pending(GH.no_gpu()) end
        compare(function() return tf.random_normal(shape, {dtype = dtype, seed = 8, name = "r"}) end,
                dtype == tf.float32 and 1e-6 or 1e-14, "RandomNormal")
      end)
      it(string.format("TruncatedNormal %s %s: the CPU's numbers but a few near the cut", dtype.name, shown),
         function()
        if GH.no_gpu() then return pending(GH.no_gpu()) end
        local mean, stddev = 0, 1
        local function within(v) return v >= mean - 2 * stddev and v <= mean + 2 * stddev end
        local spare = {most = function(n) return math.max(4, math.floor(1e-5 * n)) end,
                       fits = function(cpu, gpu) return within(cpu) and within(gpu) end}
        compare(function()
          return tf.truncated_normal(shape, {mean = mean, stddev = stddev, dtype = dtype, seed = 9, name = "r"})
        end, dtype == tf.float32 and 1e-6 or 1e-14, "TruncatedNormal", spare)
      end)
    end
    for _, dtype in ipairs({tf.int32, tf.int64}) do
      it(string.format("RandomUniformInt %s %s: the CPU's numbers exactly", dtype.name, shown), function()
        if GH.no_gpu() then return pending(GH.no_gpu()) end
        compare(function()
          return tf.random_uniform(shape, {minval = -5, maxval = 1000, dtype = dtype, seed = 10, name = "r"})
        end, 0, "RandomUniformInt")
        -- a range that rejects draws (2^64 mod range is large for int64)
        local lo, hi = -3, dtype == tf.int64 and 6148914691236517205 or 2147483647
        compare(function()
          return tf.random_uniform(shape, {minval = lo, maxval = hi, dtype = dtype, seed = 11, name = "r"})
        end, 0, "RandomUniformInt")
      end)
    end
  end

  it("keep the seeds' key: wide seeds and a graph seed", function()
    if GH.no_gpu() then return pending(GH.no_gpu()) end
    compare(function()
      tf.set_random_seed(123)
      return tf.random_uniform({1001}, {seed = 2147483647, name = "r"})
    end, 0, "RandomUniform")
  end)

  it("report minval >= maxval fed at run time, naming the op", function()
    if GH.no_gpu() then return pending(GH.no_gpu()) end
    local lo = tf.placeholder(tf.int32, {}, "lo")
    local r = tf.device("/gpu:0", function()
      return tf.random_uniform({4}, {minval = lo, maxval = 3, dtype = tf.int32, seed = 1, name = "r"})
    end)
    local sess = tf.Session()
    local ok, err = pcall(sess.run, sess, r, {[lo] = 5})
    assert.is_false(ok)
    assert.matches("r: need minval < maxval, got minval 5, maxval 3", err, 1, true)
    assert.equal(4, #sess:run(r, {[lo] = 0}):totable())
  end)
end)
