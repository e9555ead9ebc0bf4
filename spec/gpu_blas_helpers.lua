-- What the GPU specs of matmul, reductions and nn add to spec/gpu_helpers.lua
-- (cuda-blas): reproducible inputs, and a comparison naming the op types that
-- must run on the GPU. require("spec.gpu_blas_helpers").
local tf = require("moonflow")
local H = require("spec.helpers")
local M = require("spec.gpu_helpers")

local G = {it = M.gpu_it, run_on = M.run_on, placements = M.placements}

-- gpu_helpers' compare of build (which returns a list of tensors), asserting
-- that every op of the types listed ran on the GPU.
function G.compare(types, build) return M.compare(build, {on_gpu = types}) end

-- A constant of shape and dtype with reproducible values: in [-scale, scale)
-- for floats, small integers for integer dtypes.
function G.input(shape, dtype, seed, scale)
  local v = H.uniform(H.numel(shape), seed or 11)
  local int = dtype == tf.int32 or dtype == tf.int64
  for i = 1, #v do v[i] = int and math.floor(v[i] * 5) or v[i] * (scale or 1) end
  return tf.constant(v, dtype, shape)
end

return G
