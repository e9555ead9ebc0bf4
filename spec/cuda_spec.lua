-- The CUDA backend as every machine sees it (issue 14): the build makes
-- libmoonflow_cuda.so where nvcc exists, the core loads it on first use, and
-- without a GPU (this machine, CI) the process lists only CPUs, soft
-- placement moves /gpu:0 ops to the CPU and, without it, /gpu:0 is an error
-- naming the op, its Lua line and why there is no GPU. The GPU kernels
-- themselves are checked by spec/gpu_*_spec.lua where a GPU exists.
local tf = require("moonflow")
local core = require("moonflow.core")
local gpu = require("spec.gpu_helpers")

local function line() return debug.getinfo(2, "l").currentline end
local here = debug.getinfo(1, "S").short_src

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end
local backend_path = (core.library_path:match("^(.*/)") or "./") .. "libmoonflow_cuda.so"
local have_nvcc = os.execute("command -v nvcc >/dev/null 2>&1 || test -x \"${CUDA_HOME:-/nonexistent}/bin/nvcc\"") == 0

describe("the CUDA backend", function()
  it("is built beside the library where nvcc exists", function()
    if not have_nvcc then pending("nvcc not found: the build skips the CUDA backend") return end
    if not core.library_path:match("/build[^/]*/libmoonflow%.so[.%d]*$") then
      pending("the suite's library " .. core.library_path .. " is not a checkout's build") return
    end
    assert.is_true(exists(backend_path), backend_path)
  end)

  it("is found when built, unless MOONFLOW_CUDA=0", function()
    local expected = exists(backend_path) and os.getenv("MOONFLOW_CUDA") ~= "0"
    assert.equal(expected, tf.test.is_built_with_cuda())
    if os.getenv("MOONFLOW_CUDA") == "0" then
      assert.equal("the CUDA backend is disabled (MOONFLOW_CUDA=0)", tf.config.gpu_status())
    elseif not exists(backend_path) then
      assert.matches("moonflow was built without nvcc", tf.config.gpu_status())
    end
  end)

  it("registers GPU kernels with the dtypes they take", function()
    local add = tf.op_info("Add")
    assert.is_true(add.kernels.GPU)
    assert.is_true(add.elementwise)
    assert.same({"float32", "float64", "int32", "int64", "uint8"}, add.gpu_dtypes)
    assert.same({"float32", "float64", "int32", "int64", "bool", "uint8"}, tf.op_info("Less").gpu_dtypes)
    assert.same({"float32", "float64", "int32", "int64", "bool", "uint8"}, tf.op_info("Cast").gpu_dtypes)
    assert.same({"float32", "float64"}, tf.op_info("Tanh").gpu_dtypes)
    -- Complex-only ops have none; ops that never read their data take any dtype.
    assert.is_false(tf.op_info("Conj").kernels.GPU)
    assert.is_false(tf.op_info("Complex").kernels.GPU)
    assert.is_false(tf.op_info("Real").kernels.GPU)
    for _, name in ipairs({"Identity", "StopGradient", "NoOp", "Const", "Reshape", "Squeeze", "ExpandDims"}) do
      assert.is_true(tf.op_info(name).kernels.GPU, name)
      assert.same({}, tf.op_info(name).gpu_dtypes, name)
    end
    assert.is_false(tf.op_info("MatMul").elementwise)
  end)
end)

describe("a process without a GPU", function()
  local printed, saved_sink
  before_each(function()
    tf.reset_default_graph()
    printed = {}
    saved_sink = tf.set_print_sink(function(text) printed[#printed + 1] = text end)
  end)
  after_each(function() tf.set_print_sink(saved_sink) end)

  local function without_gpu()
    if gpu.has_gpu() then pending("this machine has a GPU") return false end
    return true
  end

  it("lists only CPUs and says why", function()
    if not without_gpu() then return end
    assert.is_false(tf.test.is_gpu_available())
    assert.not_equal("", tf.config.gpu_status())
    assert.same({}, tf.config.list_physical_devices("GPU"))
    assert.same({{name = "/physical_device:CPU:0", device_type = "CPU"}}, tf.config.list_physical_devices())
    assert.same({{name = "/device:CPU:0", device_type = "CPU"}}, tf.config.list_logical_devices("cpu"))
    assert.same({}, tf.config.list_logical_devices("GPU"))
    for _, d in ipairs(tf.list_devices()) do assert.equal("CPU", d.device_type) end
    for _, d in ipairs(tf.Session():list_devices()) do assert.equal("CPU", d.device_type) end
  end)

  it("rejects device types it does not know, naming the function", function()
    local ok, err = pcall(tf.config.list_physical_devices, "TPU")
    assert.is_false(ok)
    assert.matches("tf.config.list_physical_devices: expected a device type \"CPU\" or \"GPU\" %(or nil for all%), " ..
                   "got TPU", err)
  end)

  it("runs /gpu:0 ops on the CPU under allow_soft_placement", function()
    if not without_gpu() then return end
    local x = tf.placeholder(tf.float32, {3}, "x")
    local y = tf.device("/gpu:0", function() return tf.floordiv(x * 2 + 1, tf.constant(2, tf.float32)) end)
    local sess = tf.Session({allow_soft_placement = true, log_device_placement = true})
    assert.same({1, 2, -2}, sess:run(y, {[x] = {0.5, 1.5, -2}}):totable())
    local placed = gpu.placements(printed)
    assert.is_truthy(placed.FloorDiv)
    for _, devices in pairs(placed) do
      for _, d in ipairs(devices) do assert.matches("device:CPU:0$", d) end
    end
  end)

  it("is an error for /gpu:0 without soft placement, naming the op, its line and the reason", function()
    if not without_gpu() then return end
    local x = tf.constant(1, tf.int32, nil, "x")
    local l = line() + 1
    local y = tf.device("/gpu:0", function() return tf.add(x, x, "y") end)
    local sess = tf.Session()
    local ok, err = pcall(sess.run, sess, y)
    assert.is_false(ok)
    assert.equal("Cannot assign a device for operation 'y': Could not satisfy explicit device specification " ..
                 "'/device:GPU:0' because no devices matching that specification are registered in this " ..
                 "process; available devices: /device:CPU:0; no GPU in this process: " .. tf.config.gpu_status() ..
                 " (op 'y' created at " .. here .. ":" .. l .. ")", err)
    assert.equal(2, sess:run(x + x))  -- the session stays usable
  end)

  it("places ops without a device on the CPU", function()
    if not without_gpu() then return end
    local a = tf.add(tf.constant(1, nil, nil, "one"), 2, "a")
    local sess = tf.Session({log_device_placement = true})
    assert.equal(3, sess:run(a))
    for _, text in ipairs(printed) do assert.matches("device:CPU:0$", text) end
  end)
end)
