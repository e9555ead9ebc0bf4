-- The op registry as Lua sees it (TensorFlow's op_def_registry):
--   tf.registered_ops()      sorted list of op type names
--   tf.op_info("MatMul")     what the registration provides, or nil
local core = require("moonflow.core")
local ffi = require("ffi")
local C = core.C
local bit = require("bit")

local M = {}

function M.registered_ops()
  local names = {}
  for i = 0, C.mf_registry_num_ops() - 1 do names[#names + 1] = ffi.string(C.mf_registry_op_name(i)) end
  table.sort(names)
  return names
end

local info = ffi.new("mf_op_info")

-- The names of the dtypes of a mask (bit 1 << enum), in enum order.
local function dtype_names(mask)
  local names = {}
  for enum = 0, 31 do
    if bit.band(bit.rshift(mask, enum), 1) == 1 and core.by_enum[enum] then names[#names + 1] = core.by_enum[enum].name end
  end
  return names
end

-- The 1-based positions of the set bits of an input mask.
local function positions(mask)
  local list = {}
  for k = 0, 31 do if bit.band(bit.rshift(mask, k), 1) == 1 then list[#list + 1] = k + 1 end end
  return list
end

function M.op_info(op_type)
  if type(op_type) ~= "string" then
    core.fail("tf.op_info(op_type): op_type must be a string, got " .. type(op_type))
  end
  if not C.mf_registry_op_info(op_type, info) then return nil end
  return {
    name = op_type,
    num_inputs = info.num_inputs,
    num_outputs = info.num_outputs >= 0 and info.num_outputs or nil,
    variadic_inputs = info.variadic_inputs,
    stateful = info.stateful,
    has_shape_fn = info.has_shape_fn,
    kernels = {CPU = info.has_kernel[C.MF_CPU], GPU = info.has_kernel[C.MF_CUDA]},
    has_gradient = info.has_gradient,
    not_differentiable = info.not_differentiable,
    constant = info.constant,
    variable = info.variable,
    internal = info.internal,
    -- 1-based input positions: inputs that reference variables, inputs whose
    -- values shape inference reads, inputs kept in host memory
    ref_inputs = positions(info.ref_inputs),
    value_inputs = positions(info.value_inputs),
    host_memory_inputs = positions(info.host_memory_inputs),
    elementwise = info.elementwise,
    -- the dtypes its GPU kernel takes, by name ({} with a GPU kernel: any but strings and complex)
    gpu_dtypes = dtype_names(info.gpu_dtypes),
  }
end

return function(tf)
  tf.registered_ops = M.registered_ops
  tf.op_info = M.op_info
end
