-- The elementwise ops on the GPU (src/cuda/elementwise.cu, generated from the
-- op table kernels/element_ops.h that ops/math.c's CPU loops come from) and
-- Cast: every op the registry lists as elementwise with a GPU kernel, for
-- every dtype its GPU kernel takes, gives the CPU's results (float32 to 1e-5
-- relative, float64 to 1e-12, integers and bools exactly, errors with the
-- same message), over shapes of 0, 1 and many elements, broadcast NumPy's
-- way, and really runs on the GPU. Without a GPU every case is pending.
local tf = require("moonflow")
local G = require("moonflow.graph")
local gpu = require("spec.gpu_helpers")
local gpu_it = gpu.gpu_it

-- The ops under test, from the registry (not a list of our own). BiasAdd,
-- whose bias runs along the last axis only, is spec/gpu_nn_spec.lua's.
local unary, binary = {}, {}
for _, name in ipairs(tf.registered_ops()) do
  local info = tf.op_info(name)
  if info.elementwise and info.kernels.GPU and name ~= "Cast" and name ~= "BiasAdd" then
    if info.num_inputs == 1 then unary[#unary + 1] = {name = name, dtypes = info.gpu_dtypes}
    elseif info.num_inputs == 2 then binary[#binary + 1] = {name = name, dtypes = info.gpu_dtypes} end
  end
end

-- Deterministic inputs per dtype: `set` 1 mixes signs (integer divisors
-- nonzero), 2 keeps integers' second operand in [0, 6] (powers) and floats
-- positive (logarithms, roots), 3 puts zeros among integer divisors.
local function value(dtype, i, operand, set)
  local k = operand == 1 and (i * 37 + 11) or (i * 53 + 5)
  if dtype == "bool" then return k % (operand + 1) == 0 end
  if dtype == "float32" or dtype == "float64" then
    if set == 2 then return 0.05 + (k % 101) / 40 end
    return ((k % 101) - 50) / 17
  end
  if operand == 2 then
    if set == 2 then return k % 7 end
    if set == 3 then return k % 5 - 2 end
    local b = k % 15 - 7
    if dtype == "uint8" then b = k % 255 end
    return b ~= 0 and b or 3
  end
  if dtype == "uint8" then return k % 256 end
  if i % 7 == 3 then  -- large values, which wrap when added or multiplied
    return dtype == "int32" and 2147483647 - (k % 1000) or 2 ^ 52 - k
  end
  return (k % 2001) - 1000
end

local function array(dtype, shape, operand, set)
  local a = tf.Array.new(tf[dtype], shape)
  local data = a:data()
  for i = 0, a:size() - 1 do data[i] = value(dtype, i, operand, set) end
  return a
end

-- A builder of op_type over placeholders of these shapes, fed deterministic values.
local function builder(op_type, dtype, shapes, set)
  return function()
    local inputs, feeds = {}, {}
    for k, shape in ipairs(shapes) do
      inputs[k] = tf.placeholder(tf[dtype], shape, "in" .. k)
      feeds[inputs[k]] = array(dtype, shape, k, set)
    end
    return G.op{op_type, inputs = inputs}, feeds
  end
end

-- Whether the CPU builds op_type for dtype (the registry's GPU dtypes include output dtypes).
local function builds(op_type, dtype, arity)
  local g = tf.Graph()
  return pcall(function()
    g:as_default(function()
      local inputs = {}
      for k = 1, arity do inputs[k] = tf.placeholder(tf[dtype], {}, "in" .. k) end
      G.op{op_type, inputs = inputs}
    end)
  end)
end

-- The cases of one op: every dtype of its GPU kernel that the CPU builds,
-- over these input shapes (one list per case) and input sets.
local SHAPES = {
  {{{3, 5}}, {{}}, {{0}}, {{2, 0, 3}}},
  {{{3, 5}, {3, 5}}, {{}, {2, 3}}, {{2, 3}, {}}, {{2, 3}, {3}}, {{4, 1, 3}, {5, 1}},
   {{2, 1, 3, 1, 2, 1}, {1, 2, 1, 3, 1, 2}}, {{0, 3}, {3}}, {{}, {}}},
}
local function check_op(op, arity)
  local tested = 0
  for _, dtype in ipairs(op.dtypes) do
    if builds(op.name, dtype, arity) then
      tested = tested + 1
      for _, shapes in ipairs(SHAPES[arity]) do
        for set = 1, arity + 1 do gpu.compare(builder(op.name, dtype, shapes, set), {on_gpu = {op.name}}) end
      end
    end
  end
  assert(tested > 0, op.name .. ": no dtype of its GPU kernel builds")
end

describe("elementwise ops on the GPU", function()
  for _, op in ipairs(unary) do
    gpu_it(op.name .. " gives the CPU's results for every dtype, at 0, 1 and 15 elements", function()
      check_op(op, 1)
    end)
  end
  for _, op in ipairs(binary) do
    gpu_it(op.name .. " gives the CPU's results for every dtype, broadcast NumPy's way", function()
      check_op(op, 2)
    end)
  end

  gpu_it("Cast converts between every pair of dtypes as the CPU does", function()
    local dtypes = tf.op_info("Cast").gpu_dtypes
    for _, from in ipairs(dtypes) do
      for _, to in ipairs(dtypes) do
        for set = 1, from ~= to and 2 or 0 do  -- a cast to the same dtype makes no op
          gpu.compare(function()
            local x = tf.placeholder(tf[from], {4, 7}, "x")
            -- Floats far outside the integers' range saturate, NaN gives 0.
            local feed = array(from, {4, 7}, 1, set)
            if from == "float32" or from == "float64" then
              feed:data()[0], feed:data()[1], feed:data()[2] = 1e30, -1e30, 0 / 0
              feed:data()[3] = 300.75
            end
            return tf.cast(x, tf[to]), {[x] = feed}
          end, {on_gpu = {"Cast"}})
        end
      end
    end
  end)

  gpu_it("runs over more than a million elements", function()
    local n = 1000003
    for _, case in ipairs({{"Add", "float32"}, {"Mul", "float64"}, {"FloorDiv", "int32"}, {"Sigmoid", "float32"},
                           {"Maximum", "int64"}, {"Less", "float32"}}) do
      local info = tf.op_info(case[1])
      local shapes = info.num_inputs == 1 and {{n}} or {{n}, {n}}
      gpu.compare(builder(case[1], case[2], shapes, 1), {on_gpu = {case[1]}})
    end
    gpu.compare(builder("Add", "float32", {{n}, {}}, 1), {on_gpu = {"Add"}})
    gpu.compare(function()
      local x = tf.placeholder(tf.float32, {n}, "x")
      return tf.cast(x, tf.int32), {[x] = array("float32", {n}, 1, 1)}
    end, {on_gpu = {"Cast"}})
  end)

  gpu_it("reports integer division by zero as the CPU does", function()
    for _, name in ipairs({"FloorDiv", "Mod", "TruncateDiv", "TruncateMod"}) do
      for _, dtype in ipairs({"int32", "int64", "uint8"}) do
        if builds(name, dtype, 2) then
          local result, err = gpu.compare(function()
            local a = tf.placeholder(tf[dtype], {3}, "a")
            local b = tf.placeholder(tf[dtype], {3}, "b")
            return G.op{name, inputs = {a, b}, name = "div"},
                   {[a] = tf.array({7, 8, 9}, tf[dtype]), [b] = tf.array({2, 0, 3}, tf[dtype])}
          end)
          assert.is_nil(result)
          assert.matches("div: Integer division by zero", err, 1, true)
        end
      end
    end
    -- A float division by zero is no error: inf, as on the CPU.
    local result = gpu.compare(function()
      local a = tf.placeholder(tf.float32, {2}, "a")
      return tf.floordiv(a, 0), {[a] = tf.array({1, -1}, tf.float32)}
    end, {on_gpu = {"FloorDiv"}})
    assert.same({math.huge, -math.huge}, result:totable())
  end)

  gpu_it("places ops without a device on the GPU, and keeps a chain's values there", function()
    local g = tf.Graph()
    local y, x = g:as_default(function()
      local x = tf.placeholder(tf.float32, {1000}, "x")
      return x * 2 + 1, x
    end)
    local log = {}
    local saved = tf.set_print_sink(function(text) log[#log + 1] = text end)
    local sess = tf.Session({graph = g, log_device_placement = true})
    local ok, result = pcall(sess.run, sess, y, {[x] = array("float32", {1000}, 1, 1)})
    tf.set_print_sink(saved)
    assert(ok, result)
    gpu.assert_on_gpu(log, "Mul")
    gpu.assert_on_gpu(log, "Add")
    local feed = array("float32", {1000}, 1, 1)
    for i = 0, 999 do assert.near(feed:data()[i] * 2 + 1, result:data()[i], 1e-5) end
    -- The product stays on the GPU: only the feed goes there, only the sum comes back.
    local stats = sess:device_stats()
    assert.equal("/job:localhost/replica:0/task:0/device:GPU:0", stats[2].name)
    assert.equal(1, stats[2].copies_from)
  end)

  gpu_it("lists the GPU with its name and memory", function()
    local listed = tf.list_devices()
    local found
    for _, d in ipairs(listed) do if d.device_type == "GPU" then found = d end end
    assert.is_truthy(found)
    assert.equal("/device:GPU:0", found.name)
    assert.is_true(found.memory_limit > 2 ^ 30)
    assert.matches("^device: 0, name: .+", found.physical_device_desc)
    assert.same({name = "/physical_device:GPU:0", device_type = "GPU"}, tf.config.list_physical_devices("GPU")[1])
    assert.is_true(tf.test.is_built_with_cuda())
  end)
end)
