-- Reductions on the GPU (src/cuda/reduce.cu, glue src/ops/gpu/gpu_reduce.c)
-- against the CPU: Sum, Mean, Prod, Max, Min over any axes with keepdims,
-- every GPU dtype, both kernel layouts (a thread per output, a block per
-- output with split slices), empty inputs, NaN, ArgMax/ArgMin, and the
-- gradients (SumToShape, BiasAddGrad-like sums). Pending without a GPU.
local tf = require("moonflow")
local G = require("spec.gpu_blas_helpers")

local REDUCE = {Sum = tf.reduce_sum, Mean = tf.reduce_mean, Prod = tf.reduce_prod, Max = tf.reduce_max,
                Min = tf.reduce_min}
local DTYPES = {tf.float32, tf.float64, tf.int32, tf.int64}

describe("reductions on the GPU", function()
  it("registers GPU kernels (also where no GPU is present)", function()
    local ops = {"Sum", "Mean", "Prod", "Max", "Min", "ArgMax", "ArgMin", "SumToShape"}
    for _, op in ipairs(ops) do assert.is_true(tf.op_info(op).kernels.GPU, op) end
  end)

  local function case(op, dt, shape, axis, keepdims, scale)
    G.compare({op}, function()
      return {REDUCE[op](G.input(shape, dt, 13, scale), {axis = axis, keepdims = keepdims})}
    end)
  end

  for _, op in ipairs({"Sum", "Mean", "Prod", "Max", "Min"}) do
    for _, dt in ipairs(DTYPES) do
      G.it(op .. " " .. dt.name .. ": any axes, keepdims, one element", function()
        case(op, dt, {5}, nil)
        case(op, dt, {1})
        case(op, dt, {3, 4})
        case(op, dt, {3, 4}, 1, true)
        case(op, dt, {3, 4}, {0, 1})
        case(op, dt, {2, 3, 4}, {0, 2}, true)
        case(op, dt, {2, 3, 4}, 1)
        case(op, dt, {2, 1, 3, 1, 5}, {-1, 1})
      end)
      if op ~= "Prod" then  -- a product of a million elements says nothing
        G.it(op .. " " .. dt.name .. ": large inputs in both layouts", function()
          case(op, dt, {1100000}, nil)     -- one output, split into slices
          case(op, dt, {2000, 600})     -- many outputs, last axis kept: a thread each
          case(op, dt, {600, 2000}, 1)     -- a block per output
          case(op, dt, {3, 70001, 2}, {0, 2})
        end)
      end
      G.it(op .. " " .. dt.name .. ": empty inputs", function()
        case(op, dt, {0, 3})  -- no elements per output: the op's identity (Mean: NaN or 0)
        case(op, dt, {0, 3}, 1)  -- no outputs
      end)
    end
  end

  G.it("Max and Min propagate NaN as the CPU does", function()
    G.compare({"Max", "Min"}, function()
      local x = tf.constant({1, 0 / 0, 3, -2, 5, 0 / 0, 7, 8}, tf.float32, {2, 4})
      return {tf.reduce_max(x, {axis = 1}), tf.reduce_min(x, {axis = 0}), tf.reduce_max(x)}
    end)
  end)

  for _, dt in ipairs(DTYPES) do
    G.it("ArgMax and ArgMin " .. dt.name .. ": axes, ties keep the first, int32 output", function()
      G.compare({"ArgMax", "ArgMin"}, function()
        local x = G.input({4, 5, 3}, dt, 17)
        return {tf.argmax(x), tf.argmax(x, 1), tf.argmin(x, 2), tf.argmin(x, {axis = 1, output_type = tf.int32}),
                tf.argmax(tf.constant({2, 7, 7, 1}, dt)), tf.argmax(G.input({3, 100003}, dt, 19), 1)}
      end)
    end)
  end

  G.it("ArgMax and ArgMin pick the first NaN", function()
    G.compare({"ArgMax", "ArgMin"}, function()
      local x = tf.constant({1, 0 / 0, 3, 0 / 0, 9, 2}, tf.float64, {2, 3})
      return {tf.argmax(x, 1), tf.argmin(x, 1), tf.argmax(x)}
    end)
  end)

  G.it("gradients of Sum, Mean and Max, with broadcast sums (SumToShape)", function()
    G.compare({"Sum", "SumToShape"}, function()
      local x, b = G.input({4, 6}, tf.float32, 23), G.input({6}, tf.float32, 29)
      local y = tf.reduce_sum((x + b) * 3) + tf.reduce_sum(tf.reduce_mean(x, {axis = 0})) +
                tf.reduce_sum(tf.reduce_max(x, {axis = 1}))
      return tf.gradients(y, {x, b})
    end)
  end)
end)
