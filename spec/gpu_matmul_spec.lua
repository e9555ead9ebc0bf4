-- MatMul on the GPU (cuBLAS, src/cuda/matmul.cu, glue src/ops/gpu/gpu_matmul.c)
-- against the CPU: transposes, batches (strided and broadcast), edge sizes,
-- float32 and float64, gradients; int32 stays on the CPU. Pending without a GPU.
local tf = require("moonflow")
local G = require("spec.gpu_blas_helpers")

describe("MatMul on the GPU", function()
  it("registers GPU kernels (also where no GPU is present)", function()
    local ops = {"MatMul"}
    for _, op in ipairs(ops) do assert.is_true(tf.op_info(op).kernels.GPU, op) end
  end)

  for _, dt in ipairs({tf.float32, tf.float64}) do
    local function case(sa, sb, ta, tb)
      G.compare({"MatMul"}, function()
        return {tf.matmul(G.input(sa, dt, 3), G.input(sb, dt, 5), {transpose_a = ta, transpose_b = tb})}
      end)
    end
    G.it(dt.name .. ": every transpose combination, odd and one-element sizes", function()
      case({3, 4}, {4, 5}, false, false)
      case({4, 3}, {4, 5}, true, false)
      case({3, 4}, {5, 4}, false, true)
      case({4, 3}, {5, 4}, true, true)
      case({1, 1}, {1, 1}, false, false)
      case({33, 17}, {17, 65}, false, false)
      case({129, 300}, {300, 257}, false, true)
    end)
    G.it(dt.name .. ": empty products (zero rows, and k = 0 giving zeros)", function()
      case({0, 4}, {4, 3}, false, false)
      case({3, 0}, {0, 2}, false, false)
    end)
    G.it(dt.name .. ": batches, strided and broadcast like the CPU's", function()
      case({2, 3, 4}, {2, 4, 5}, false, false)
      case({2, 3, 4}, {4, 5}, false, false)    -- b shared
      case({4, 3}, {2, 4, 5}, true, false)      -- a shared, transposed
      case({2, 1, 3, 4}, {5, 4, 6}, false, false)  -- broadcast both ways
      case({2, 4, 3}, {1, 5, 4}, true, true)
    end)
    G.it(dt.name .. ": gradients", function()
      G.compare({"MatMul"}, function()
        local a, b = G.input({3, 4}, dt, 3), G.input({2, 4, 5}, dt, 5)
        local y = tf.reduce_sum(tf.matmul(a, b) * G.input({2, 3, 5}, dt, 7))
        return tf.gradients(y, {a, b})
      end)
    end)
  end

  G.it("leaves int32 products on the CPU (cuda_dtypes: float32, float64)", function()
    local function build() return {tf.matmul(G.input({2, 3}, tf.int32), G.input({3, 2}, tf.int32))} end
    local cpu = G.run_on("/cpu:0", build, {allow_soft_placement = true})
    local gpu, log = G.run_on("/gpu:0", build, {allow_soft_placement = true})
    assert.same(cpu[1]:totable(), gpu[1]:totable())
    for _, d in ipairs(G.placements(log).MatMul) do assert.truthy(d:match("/device:CPU:0$"), d) end
  end)
end)
