-- The op registry: listed from C and Lua, and every registration complete.
local tf = require("moonflow")
local core = require("moonflow.core")
local H = require("spec.helpers")

describe("the op registry", function()
  local names = tf.registered_ops()

  it("lists every op type once, sorted, from C and Lua", function()
    assert.equal(tonumber(core.C.mf_registry_num_ops()), #names)
    assert.is_true(#names > 100)
    for i = 2, #names do assert.is_true(names[i - 1] < names[i], names[i]) end
    for _, n in ipairs({"Const", "MatMul", "Relu", "While", "ApplyAdam", "TensorArrayWrite"}) do
      assert.is_not_nil(tf.op_info(n), n)
    end
    assert.is_true(core.C.mf_registry_op_name(-1) == nil)
    assert.is_true(core.C.mf_registry_op_name(#names) == nil)
  end)

  it("describes a registration", function()
    local mm = tf.op_info("MatMul")
    assert.same({name = "MatMul", num_inputs = 2, num_outputs = 1, variadic_inputs = false, stateful = false,
                 has_shape_fn = true, kernels = {CPU = true, GPU = false}, has_gradient = true,
                 not_differentiable = false, constant = false, variable = false, internal = false,
                 ref_inputs = {}, value_inputs = {}, host_memory_inputs = {}}, mm)
    local assign = tf.op_info("Assign")
    assert.same({1}, assign.ref_inputs)
    assert.is_true(assign.stateful)
    assert.is_true(tf.op_info("AddN").variadic_inputs)
    assert.is_true(tf.op_info("Const").constant)
    assert.is_true(tf.op_info("VariableV2").variable)
  end)

  it("says which inputs inference reads the values of, and which stay in host memory", function()
    -- Reshape(tensor, shape): the shape vector is read; the tensor is data.
    assert.same({2}, tf.op_info("Reshape").value_inputs)
    assert.same({2}, tf.op_info("Reshape").host_memory_inputs)
    assert.same({1, 2, 3}, tf.op_info("Range").value_inputs)
    assert.same({1}, tf.op_info("RandomUniform").value_inputs)
    -- If's predicate and a TensorArray write's metadata and index are read by the kernel only.
    assert.same({}, tf.op_info("If").value_inputs)
    assert.same({1}, tf.op_info("If").host_memory_inputs)
    assert.same({2, 3}, tf.op_info("TensorArrayWrite").host_memory_inputs)
    assert.same({}, tf.op_info("Add").host_memory_inputs)
    assert.is_nil(tf.op_info("NoSuchOp"))
    local err = H.error_of(tf.op_info, 5)
    assert.truthy(err:find("tf.op_info(op_type): op_type must be a string, got number", 1, true), err)
    assert.truthy(err:find(" %(at [^()]*%.lua:%d+%)$"), err)
  end)

  -- One op is one registration: shape inference, a CPU kernel, and a gradient
  -- rule or a declaration that it has none (a source op has nothing to differentiate).
  for _, name in ipairs(names) do
    it(name .. " has shape inference, a CPU kernel and a gradient rule or a declared lack of one", function()
      local info = tf.op_info(name)
      assert(info.has_shape_fn, name .. ": no shape inference")
      assert(info.kernels.CPU, name .. ": no CPU kernel")
      local source = info.num_inputs == 0 and not info.variadic_inputs
      assert(info.has_gradient or info.not_differentiable or source,
             name .. ": no gradient rule and not declared MF_OP_NOT_DIFFERENTIABLE")
    end)
  end
end)
