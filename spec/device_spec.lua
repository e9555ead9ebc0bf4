-- Devices: tf.device (TensorFlow device strings, normalized and nested),
-- tf.list_devices, and placement in the session (explicit devices that are
-- not present are errors, soft placement falls back to the CPU, and
-- log_device_placement prints each op's device through the print sink).
local tf = require("moonflow")
local ffi = require("ffi")
local C = require("moonflow.core").C

local function line() return debug.getinfo(2, "l").currentline end
local here = debug.getinfo(1, "S").short_src
pcall(ffi.cdef, "int memcmp(const void *a, const void *b, size_t n);")
local CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"

local NO_GPU = "Could not satisfy explicit device specification '/device:GPU:0' because no devices " ..
               "matching that specification are registered in this process; available devices: /device:CPU:0; " ..
               "no GPU in this process: " .. tf.config.gpu_status()

describe("tf.device", function()
  before_each(function() tf.reset_default_graph() end)

  local function device_of(spec)
    return tf.device(spec, function() return tf.constant(1).device end)
  end

  it("normalizes TensorFlow device strings to the /device:TYPE:N form", function()
    assert.equal("/device:CPU:0", device_of("/cpu:0"))
    assert.equal("/device:GPU:1", device_of("/gpu:1"))
    assert.equal("/device:CPU:0", device_of("/device:CPU:0"))
    assert.equal("/device:GPU:0", device_of("/device:GPU:0"))
    assert.equal("/device:GPU:0", device_of("/device:gpu:0"))
    assert.equal("/job:localhost/replica:0/task:0/device:CPU:0",
                 device_of("/job:localhost/replica:0/task:0/device:CPU:0"))
    assert.equal("/device:CPU:0", device_of("CPU:0"))
    assert.equal("/device:GPU:*", device_of("/device:GPU"))
    assert.equal("/device:GPU:*", device_of("/gpu:*"))
    assert.equal("/job:worker/task:3", device_of("/job:worker/task:3"))
  end)

  it("returns what fn returns, and ops and tensors record the device", function()
    local a, b = tf.device("/cpu:0", function()
      local x = tf.constant(2, nil, nil, "x")
      return x, x * 3
    end)
    assert.equal("/device:CPU:0", a.device)
    assert.equal("/device:CPU:0", a.op.device)
    assert.equal("/device:CPU:0", b.op.device)
    assert.equal("", tf.constant(1).device)
    assert.equal(6, tf.Session():run(b))
  end)

  it("nests like TensorFlow: the inner spec's fields override the outer ones", function()
    local t = tf.device("/job:localhost/gpu:1", function()
      return tf.device("/device:CPU:0", function() return tf.constant(1) end)
    end)
    assert.equal("/job:localhost/device:CPU:0", t.device)
    local u = tf.device("/job:localhost/replica:0/task:0", function()
      return tf.device("/gpu:1", function() return tf.constant(1) end)
    end)
    assert.equal("/job:localhost/replica:0/task:0/device:GPU:1", u.device)
    -- A spec naming only the task keeps the outer device.
    local v = tf.device("/gpu:0", function()
      return tf.device("/task:0", function() return tf.constant(1) end)
    end)
    assert.equal("/task:0/device:GPU:0", v.device)
  end)

  it("clears the device with nil or \"\", and restores it after fn (also when fn fails)", function()
    tf.device("/gpu:0", function()
      assert.equal("", tf.device(nil, function() return tf.constant(1).device end))
      assert.equal("", tf.device("", function() return tf.constant(1).device end))
      assert.equal("/device:GPU:0", tf.constant(1).device)
      assert.has_error(function() tf.device("/cpu:0", function() error("inside", 0) end) end, "inside")
      assert.equal("/device:GPU:0", tf.constant(1).device)
    end)
    assert.equal("", tf.constant(1).device)
  end)

  it("reaches ops built in tf.cond branches", function()
    local p = tf.placeholder(tf.bool, {})
    local r = tf.device("/cpu:0", function()
      return tf.cond(p, function() return tf.constant(1) + 1 end, function() return tf.constant(5) end)
    end)
    assert.equal("/device:CPU:0", r.device)
    local sess = tf.Session()
    assert.equal(2, sess:run(r, {[p] = true}))
    assert.equal(5, sess:run(r, {[p] = false}))
  end)

  it("rejects a malformed spec, naming it and the Lua line", function()
    for _, bad in ipairs({"/gpu:x", "//cpu:0", "/cpu:-1", "/device:", "nonsense", "/job:1a", "/replica:two",
                          "/cpu:0/"}) do
      local l = line() + 1
      local ok, err = pcall(tf.device, bad, function() return tf.constant(1) end)
      assert.is_false(ok)
      assert.equal(string.format("tf.device: Malformed device specification '%s': expected a " ..
                                 "TensorFlow device string such as '/cpu:0', '/device:GPU:1' or " ..
                                 "'/job:localhost/replica:0/task:0/device:CPU:0' (at %s:%d)", bad, here, l), err)
    end
    assert.equal(0, #tf.get_default_graph():get_operations())
    local l = line() + 1
    local ok, err = pcall(tf.device, 7, function() end)
    assert.is_false(ok)
    assert.equal("tf.device: expected a device string such as \"/cpu:0\", a tf.DeviceSpec or nil, got 7 (at " .. here ..
                 ":" .. l .. ")", err)
    l = line() + 1
    ok, err = pcall(tf.device, "/cpu:0")
    assert.equal("tf.device(spec, fn): fn must be a function, got nil (at " .. here .. ":" .. l .. ")", err)
  end)
end)

describe("mf_device_merge", function()
  local status = require("moonflow.core").status
  local function merge(outer, spec, cap)
    local buf = ffi.new("char[?]", cap or 256)
    if C.mf_device_merge(outer, spec, buf, cap or 256, status) ~= 0 then
      return nil, ffi.string(C.mf_status_message(status))
    end
    return ffi.string(buf)
  end

  it("merges field by field, as TensorFlow's DeviceSpec.merge_from", function()
    assert.equal("/device:CPU:1", merge("/gpu:1", "/device:CPU"))
    assert.equal("/job:ps/replica:2/task:1/device:GPU:0", merge("/job:ps/replica:2/task:7/cpu:0", "/task:1/gpu:0"))
    assert.equal("", merge(nil, ""))
    assert.equal("/device:CPU:0", merge("", "/cpu:0"))
    assert.equal("/device:CPU:0", merge("/cpu:0", nil))
  end)

  it("reports a malformed outer or inner spec, and a buffer too small", function()
    local _, err = merge("/cpu:0", "/gpu:0/bad")
    assert.matches("^Malformed device specification '/gpu:0/bad'", err)
    _, err = merge("cpu", "/gpu:0")
    assert.matches("^Malformed device specification 'cpu'", err)
    _, err = merge(nil, "/device:GPU:0", 8)
    assert.equal("the normal form of device specification '/device:GPU:0' needs 14 bytes, more than the 8 given", err)
    assert.equal("/device:CPU:0", merge(nil, "/cpu:0", 14))
  end)
end)

describe("tf.list_devices", function()
  it("lists the CPU with its memory, and GPUs only when a CUDA backend reports them", function()
    local devices = tf.list_devices()
    assert.equal("/device:CPU:0", devices[1].name)
    assert.equal("CPU", devices[1].device_type)
    assert.is_true(devices[1].memory_limit > 0)
    assert.equal(1, C.mf_num_devices(C.MF_CPU))
    assert.equal(1 + C.mf_num_devices(C.MF_CUDA), #devices)
    for i = 2, #devices do
      assert.equal("GPU", devices[i].device_type)
      assert.equal("/device:GPU:" .. (i - 2), devices[i].name)
    end
    -- The CPU's memory is the machine's RAM (MemTotal in /proc/meminfo, when there is one).
    local f = io.open("/proc/meminfo")
    if f then
      local kb = tonumber(f:read("*a"):match("MemTotal:%s*(%d+) kB"))
      f:close()
      assert.is_true(math.abs(devices[1].memory_limit - kb * 1024) < 0.05 * kb * 1024)
    end
  end)

  it("has no CUDA backend in this build", function()
    assert.equal(0, C.mf_num_devices(C.MF_CUDA))
    assert.equal(-1, tonumber(C.mf_device_memory_limit(C.MF_CUDA, 0)))
    assert.equal(-1, tonumber(C.mf_device_memory_limit(C.MF_CPU, 1)))
  end)
end)

describe("placement", function()
  local printed, saved_sink
  before_each(function()
    tf.reset_default_graph()
    printed = {}
    saved_sink = tf.set_print_sink(function(text) printed[#printed + 1] = text end)
  end)
  after_each(function() tf.set_print_sink(saved_sink) end)

  it("runs ops on the CPU they name", function()
    local c = tf.device("/job:localhost/replica:0/task:0/device:CPU:0", function()
      return tf.add(tf.constant(1), tf.constant(2))
    end)
    assert.equal(3, tf.Session():run(c))
    local d = tf.device("/device:CPU:*", function() return c * 2 end)
    assert.equal(6, tf.Session():run(d))
  end)

  it("is an error for a device not present, in TensorFlow's words with the op's line", function()
    local x = tf.constant(1, nil, nil, "x")
    local l = line() + 1
    local a = tf.device("/gpu:0", function() return tf.add(x, x, "a") end)
    local sess = tf.Session()
    local ok, err = pcall(sess.run, sess, a)
    assert.is_false(ok)
    assert.equal("Cannot assign a device for operation 'a': " .. NO_GPU ..
                 " (op 'a' created at " .. here .. ":" .. l .. ")", err)
    -- The session stays usable, and other plans run.
    assert.equal(2, sess:run(x + x))
    assert.same({}, printed)
    -- Other devices that are not present.
    for spec, shown in pairs({["/cpu:1"] = "/device:CPU:1", ["/device:TPU:0"] = "/device:TPU:0",
                              ["/job:worker"] = "/job:worker", ["/replica:1/cpu:0"] = "/replica:1/device:CPU:0",
                              ["/gpu:*"] = "/device:GPU:*"}) do
      local b = tf.device(spec, function() return tf.identity(x, "b") end)
      local ok2, err2 = pcall(sess.run, sess, b)
      assert.is_false(ok2)
      assert.matches("Cannot assign a device for operation '" .. b.op.name .. "': Could not satisfy explicit " ..
                     "device specification '" .. shown:gsub("%p", "%%%0") .. "' because no devices matching",
                     err2)
    end
  end)

  it("is checked when the plan is built: make_callable fails too", function()
    local a = tf.device("/gpu:0", function() return tf.constant(1, nil, nil, "a") end)
    local sess = tf.Session()
    assert.has_error(function() sess:make_callable(a) end)
    local ok, err = pcall(sess.make_callable, sess, a)
    assert.is_false(ok)
    assert.matches("Cannot assign a device for operation 'a': " .. NO_GPU:gsub("%p", "%%%0"), err)
    assert.equal(0, sess:num_plans())
  end)

  it("falls back to the CPU with allow_soft_placement", function()
    local a = tf.device("/gpu:0", function() return tf.constant(3) * 2 end)
    local sess = tf.Session({allow_soft_placement = true})
    assert.equal(6, sess:run(a))
    assert.equal(6, sess:make_callable(a)())
    assert.same({}, printed)  -- logs nothing unless asked
    local g = tf.Graph()
    local b = g:as_default(function() return tf.device("/device:TPU:3", function() return tf.constant(4) end) end)
    assert.equal(4, tf.Session({graph = g, allow_soft_placement = true}):run(b))
  end)

  it("reports each op's placement once per plan through the print sink with log_device_placement", function()
    local x = tf.placeholder(tf.float32, {}, "x")
    local a = tf.add(x, tf.constant(1, tf.float32, nil, "one"), "a")
    local sess = tf.Session({log_device_placement = true})
    assert.equal(3, sess:run(a, {[x] = 2}))
    -- The ops the plan runs (the fed placeholder does not run).
    assert.same({"one: (Const): " .. CPU0, "a: (Add): " .. CPU0}, printed)
    printed = {}
    assert.equal(4, sess:run(a, {[x] = 3}))  -- the cached plan: nothing new
    assert.same({}, printed)
    local f = sess:make_callable(a, {x})
    assert.same({}, printed)  -- same signature, same plan
    assert.equal(5, f(4))
    local b = tf.multiply(a, tf.constant(2, tf.float32, nil, "two"), "b")
    local g = sess:make_callable(b, {x})
    assert.same({"one: (Const): " .. CPU0, "a: (Add): " .. CPU0,
                 "two: (Const): " .. CPU0, "b: (Mul): " .. CPU0}, printed)
    assert.equal(10, g(4))
    printed = {}
    assert.equal(3, sess:run(tf.constant(3, nil, nil, "three")))
    assert.same({"three: (Const): " .. CPU0}, printed)
  end)

  it("logs what soft placement moved", function()
    local a = tf.device("/gpu:0", function() return tf.identity(tf.constant(1, nil, nil, "c"), "a") end)
    local sess = tf.Session({allow_soft_placement = true, log_device_placement = true})
    assert.equal(1, sess:run(a))
    assert.same({
      "Soft placement: operation 'c' (Const) asked for '/device:GPU:0', which is not available in this process; " ..
      "placed on " .. CPU0,
      "c: (Const): " .. CPU0,
      "Soft placement: operation 'a' (Identity) asked for '/device:GPU:0', which is not available in this " ..
      "process; placed on " .. CPU0,
      "a: (Identity): " .. CPU0}, printed)
  end)

  it("logs the placement of ops in functions when a run builds their plans", function()
    local p = tf.placeholder(tf.bool, {}, "p")
    local r = tf.cond(p, function() return tf.constant(1, nil, nil, "yes") end,
                      function() return tf.constant(2, nil, nil, "no") end)
    local sess = tf.Session({log_device_placement = true})
    assert.equal(1, sess:run(r, {[p] = true}))
    assert.same({"cond: (If): " .. CPU0, "yes: (Const): " .. CPU0}, printed)
    printed = {}
    assert.equal(2, sess:run(r, {[p] = false}))
    assert.same({"no: (Const): " .. CPU0}, printed)
    printed = {}
    assert.equal(1, sess:run(r, {[p] = true}))
    assert.same({}, printed)
    -- A branch's ops have the device of the tf.device around the tf.cond.
    local q = tf.device("/gpu:0", function()
      return tf.cond(p, function() return tf.identity(p, "inner") end, function() return p end)
    end)
    local soft = tf.Session({allow_soft_placement = true, log_device_placement = true})
    printed = {}
    assert.equal(true, soft:run(q, {[p] = true}))
    assert.same({"Soft placement: operation 'cond_1' (If) asked for '/device:GPU:0', which is not available in " ..
                 "this process; placed on " .. CPU0, "cond_1: (If): " .. CPU0,
                 "Soft placement: operation 'inner' (Identity) asked for '/device:GPU:0', which is not available " ..
                 "in this process; placed on " .. CPU0, "inner: (Identity): " .. CPU0}, printed)
  end)

  it("prints nothing for a plan that failed, and prints before raising a run's error", function()
    local x = tf.placeholder(tf.float32, {}, "x")
    local bad = tf.device("/gpu:0", function() return tf.identity(x, "bad") end)
    local sess = tf.Session({log_device_placement = true})
    assert.has_error(function() sess:run(bad, {[x] = 1}) end)
    assert.same({}, printed)
    local ok, err = pcall(sess.run, sess, tf.multiply(x, tf.constant(2, tf.float32, nil, "two"), "m"))
    assert.is_false(ok)  -- x is not fed: its kernel fails after placement
    assert.matches("x", err)
    assert.same({"x: (Placeholder): " .. CPU0, "two: (Const): " .. CPU0, "m: (Mul): " .. CPU0},
                printed)
  end)

  it("checks the options", function()
    local l = line() + 1
    local ok, err = pcall(tf.Session, {log_device_placement = "yes"})
    assert.is_false(ok)
    assert.equal("tf.Session: log_device_placement must be a boolean, got yes (at " .. here .. ":" .. l .. ")", err)
    local s = ffi.gc(C.mf_session_new_with_options(tf.get_default_graph().ptr, 4, require("moonflow.core").status),
                     C.mf_session_free)
    assert.is_true(s == nil)
    assert.equal("unknown session options 0x4", ffi.string(C.mf_status_message(require("moonflow.core").status)))
  end)

  it("keeps devices in saved graphs", function()
    local path = os.tmpname()
    local g = tf.Graph()
    g:as_default(function()
      tf.device("/gpu:0", function() return tf.constant(1, nil, nil, "c") end)
    end)
    tf.train.write_graph(g, path)
    local g2 = tf.train.import_graph(path)
    os.remove(path)
    local c = g2:get_tensor_by_name("c:0")
    assert.equal("/device:GPU:0", c.device)
    local ok, err = pcall(function() return tf.Session(g2):run(c) end)
    assert.is_false(ok)
    assert.matches("Cannot assign a device for operation 'c': " .. NO_GPU:gsub("%p", "%%%0"), err)
    assert.equal(1, tf.Session({graph = g2, allow_soft_placement = true}):run(c))
  end)
end)

describe("tf.DeviceSpec", function()
  before_each(function() tf.reset_default_graph() end)

  it("builds, prints and parses device strings as TensorFlow's DeviceSpec", function()
    local d = tf.DeviceSpec({job = "localhost", replica = 0, task = 0, device_type = "cpu", device_index = 1})
    assert.equal("/job:localhost/replica:0/task:0/device:CPU:1", d:to_string())
    assert.equal("/job:localhost/replica:0/task:0/device:CPU:1", tostring(d))
    assert.equal("/job:ps/task:2", tf.DeviceSpec("ps", nil, 2):to_string())
    assert.equal("/device:GPU:*", tf.DeviceSpec({device_type = "GPU"}):to_string())
    assert.equal("", tf.DeviceSpec():to_string())
    local p = tf.DeviceSpec.from_string("/job:worker/replica:2/task:1/gpu:3")
    assert.same({"worker", 2, 1, "GPU", 3}, {p.job, p.replica, p.task, p.device_type, p.device_index})
    local q = tf.DeviceSpec.from_string("/cpu:*")
    assert.same({"CPU", nil}, {q.device_type, q.device_index})
    -- parse_from_string sets only the fields the string names.
    local r = tf.DeviceSpec({job = "ps", device_type = "CPU", device_index = 0})
    assert.equal(r, r:parse_from_string("/device:GPU:1"))
    assert.equal("/job:ps/device:GPU:1", r:to_string())
  end)

  it("merges as merge_from does: the fields the other names win", function()
    local a = tf.DeviceSpec.from_string("/job:ps/replica:2/task:7/cpu:0")
    a:merge_from(tf.DeviceSpec.from_string("/task:1/gpu:0"))
    assert.equal("/job:ps/replica:2/task:1/device:GPU:0", a:to_string())
    a:merge_from("/device:CPU:1")
    assert.equal("/job:ps/replica:2/task:1/device:CPU:1", a:to_string())
    local b = tf.DeviceSpec({device_index = 3})
    local merged = a:make_merged_spec(b)
    assert.equal("/job:ps/replica:2/task:1/device:CPU:3", merged:to_string())
    assert.equal("/job:ps/replica:2/task:1/device:CPU:1", a:to_string())  -- unchanged
  end)

  it("is accepted by tf.device, and places ops on the device it names", function()
    local spec = tf.DeviceSpec({device_type = "CPU", device_index = 1})
    local y = tf.device(spec, function() return tf.constant(3) * 2 end)
    assert.equal("/device:CPU:1", y.device)
    assert.equal(6, tf.Session({device_count = {CPU = 2}}):run(y))
  end)

  it("rejects bad fields and strings, naming the call and the Lua line", function()
    local l = line() + 1
    local ok, err = pcall(tf.DeviceSpec, {device_index = -1})
    assert.is_false(ok)
    assert.equal("tf.DeviceSpec: device_index must be a non-negative integer, got -1 (at " .. here .. ":" .. l .. ")",
                 err)
    l = line() + 1
    ok, err = pcall(tf.DeviceSpec, {job = "1a"})
    assert.equal("tf.DeviceSpec: job must be a name (a letter, then letters, digits or _), got 1a (at " .. here ..
                 ":" .. l .. ")", err)
    l = line() + 1
    ok, err = pcall(tf.DeviceSpec, {kind = "CPU"})
    assert.equal("tf.DeviceSpec: unknown option 'kind' (expected one of: job, replica, task, device_type, " ..
                 "device_index) (at " .. here .. ":" .. l .. ")", err)
    l = line() + 1
    ok, err = pcall(tf.DeviceSpec.from_string, "/gpu:x")
    assert.equal("DeviceSpec:parse_from_string: Malformed device specification '/gpu:x': expected a TensorFlow " ..
                 "device string such as '/cpu:0', '/device:GPU:1' or '/job:localhost/replica:0/task:0/device:CPU:0' " ..
                 "(at " .. here .. ":" .. l .. ")", err)
    l = line() + 1
    ok, err = pcall(function() tf.DeviceSpec():merge_from(42) end)
    assert.equal("DeviceSpec:merge_from: expected a tf.DeviceSpec or a device string, got 42 (at " .. here .. ":" ..
                 l .. ")", err)
  end)
end)

-- Two CPU devices: CPU:1 is treated as a GPU would be (the host reads its
-- memory only through copies), so placement, copies and gradients across
-- devices are tested on any machine.
describe("a session with device_count = {CPU = 2}", function()
  local printed, saved_sink
  before_each(function()
    tf.reset_default_graph()
    printed = {}
    saved_sink = tf.set_print_sink(function(text) printed[#printed + 1] = text end)
  end)
  after_each(function() tf.set_print_sink(saved_sink) end)

  local function two_cpus(options)
    options = options or {}
    options.device_count = {CPU = 2}
    return tf.Session(options)
  end
  -- Copies onto each device since the last call (CPU:0 first).
  local function copies(sess, last)
    local now = {}
    for i, d in ipairs(sess:device_stats()) do now[i] = d.copies_to end
    local delta = {}
    for i = 1, #now do delta[i] = now[i] - (last and last[i] or 0) end
    return delta, now
  end
  -- Whether two values are equal bit for bit (same dtype, shape and bytes).
  local function same_bits(a, b)
    if type(a) ~= "cdata" and type(a) ~= "table" then return a == b end
    if a.dtype ~= b.dtype then return false end
    local sa, sb = a:shape(), b:shape()
    if #sa ~= #sb then return false end
    for i = 1, #sa do
      if sa[i] ~= sb[i] then return false end
    end
    return ffi.C.memcmp(a:data(), b:data(), C.mf_tensor_nbytes(a.ptr)) == 0
  end

  it("lists its devices, in the session and through tf.list_devices(options)", function()
    local sess = two_cpus()
    local devices = sess:list_devices()
    assert.equal(2, #devices)
    assert.equal(CPU0, devices[1].name)
    assert.equal("/job:localhost/replica:0/task:0/device:CPU:1", devices[2].name)
    assert.equal("CPU", devices[2].device_type)
    assert.equal(devices[1].memory_limit, devices[2].memory_limit)
    local listed = tf.list_devices({device_count = {CPU = 3}})
    assert.same({"/device:CPU:0", "/device:CPU:1", "/device:CPU:2"},
                {listed[1].name, listed[2].name, listed[3].name})
    assert.equal(1, #tf.Session():list_devices())
    assert.equal(1, #tf.list_devices({device_count = {GPU = 0}}))
  end)

  it("checks device_count, in Lua and in C", function()
    local l = line() + 1
    local ok, err = pcall(tf.Session, {device_count = {TPU = 1}})
    assert.is_false(ok)
    assert.equal("tf.Session: device_count: unknown device type 'TPU' (expected CPU or GPU) (at " .. here .. ":" ..
                 l .. ")", err)
    l = line() + 1
    ok, err = pcall(tf.Session, {device_count = {CPU = 1.5}})
    assert.equal("tf.Session: device_count.CPU must be a non-negative integer, got 1.5 (at " .. here .. ":" .. l ..
                 ")", err)
    l = line() + 1
    ok, err = pcall(tf.Session, {device_count = {CPU = 9}})
    assert.equal("device_count: CPU must be 0 (the default: 1) to 8, got 9 (at " .. here .. ":" .. l .. ")", err)
    -- A GPU count is a most, as TensorFlow's: the session takes the GPUs present, up to it.
    local gpus = #tf.config.list_physical_devices("GPU")
    assert.equal(1 + math.min(1, gpus), #tf.Session({device_count = {GPU = 1}}):list_devices())
    assert.equal(1 + gpus, #tf.Session({device_count = {GPU = 1000}}):list_devices())
    ok, err = pcall(tf.Session, {device_count = 2})
    assert.matches("^tf.Session: device_count must be a table such as {CPU = 2}, got 2", err)
  end)

  it("places ops where tf.device says, runs them there and logs each placement", function()
    local x = tf.placeholder(tf.float32, {3}, "x")
    local y = tf.device("/job:localhost/replica:0/task:0/device:CPU:1", function()
      return tf.multiply(x, tf.constant(2, tf.float32, nil, "two"), "y")
    end)
    local z = tf.add(y, 1, "z")
    local sess = two_cpus({log_device_placement = true})
    assert.equal("[3., 5., 7.]", tostring(sess:run(z, {[x] = {1, 2, 3}})))
    assert.same({"two: (Const): /job:localhost/replica:0/task:0/device:CPU:1",
                 "y: (Mul): /job:localhost/replica:0/task:0/device:CPU:1",
                 "Const: (Const): " .. CPU0, "z: (Add): " .. CPU0}, printed)
  end)

  it("copies a value crossing devices once per run, however many ops read it, and only there", function()
    local x = tf.placeholder(tf.float32, {4}, "x")
    local y = tf.device("/cpu:1", function() return x * 2 end)   -- x: CPU:0 -> CPU:1
    local a, b, c = y + 1, y * 3, tf.square(y)                  -- y: CPU:1 -> CPU:0, once
    local total = tf.add_n({a, b, c})
    local z = tf.device("/cpu:1", function() return y - 1 end)  -- read where it is: no copy
    local sess = two_cpus()
    local feed = {[x] = {1, 2, 3, 4}}
    local last
    local ys = {2, 4, 6, 8}
    for _ = 1, 3 do
      local r = sess:run({total, z}, feed)
      for i = 1, 4 do
        assert.equal((ys[i] + 1) + ys[i] * 3 + ys[i] ^ 2, r[1]:get(i - 1))
        assert.equal(ys[i] - 1, r[2]:get(i - 1))
      end
      local delta
      delta, last = copies(sess, last)
      -- Onto CPU:1: x. Onto CPU:0: y (for a, b, c) and z (the fetch leaves from CPU:0).
      assert.same({2, 1}, delta)
    end
    -- Fetching y itself shares the copy its CPU:0 readers use.
    sess:run({y, total}, feed)
    local delta = copies(sess, last)
    assert.same({1, 1}, delta)
    -- The bytes: 4 floats each way per copy.
    local stats = sess:device_stats()
    assert.equal(16 * stats[2].copies_to, stats[2].bytes_to)
    assert.equal(stats[1].copies_to, stats[2].copies_from)
    assert.equal(stats[2].copies_to, stats[1].copies_from)
  end)

  it("never copies values placed on CPU:0, with one device or two", function()
    local x = tf.placeholder(tf.float32, {2}, "x")
    local y = tf.reduce_sum(tf.exp(x) * 2 + x)
    for _, sess in ipairs({tf.Session(), two_cpus()}) do
      for _ = 1, 2 do
        assert.near(math.exp(1) * 2 + 1 + math.exp(2) * 2 + 2, sess:run(y, {[x] = {1, 2}}), 1e-5)
      end
      for _, d in ipairs(sess:device_stats()) do
        assert.equal(0, d.copies_to)
        assert.equal(0, d.copies_from)
      end
    end
  end)

  it("reads host-memory inputs on the host: a shape computed on CPU:1 crosses to CPU:0", function()
    local x = tf.placeholder(tf.float32, {2, 3}, "x")
    local shape = tf.constant({3, 2}, tf.int32, nil, "shape")  -- CPU:0: read there directly
    local r, s2 = tf.device("/cpu:1", function()
      local s = tf.shape(x)                                       -- computed on CPU:1
      return tf.reshape(x, shape), tf.reshape(x * 1, tf.reverse(s, {0}))
    end)
    local sess = two_cpus()
    local v = {{1, 2, 3}, {4, 5, 6}}
    sess:run({r, s2}, {[x] = v})
    local delta, last = copies(sess)
    local out = sess:run({r, s2}, {[x] = v})
    delta = copies(sess, last)
    assert.same({{1, 2}, {3, 4}, {5, 6}}, out[1]:totable())
    assert.same({{1, 2}, {3, 4}, {5, 6}}, out[2]:totable())
    -- Onto CPU:1: x. Onto CPU:0: the reversed shape (Reshape reads it on the
    -- host), and the two results. The constant shape is never copied.
    assert.same({3, 1}, delta)
  end)

  it("feeds arrive on CPU:0 and cross once to a device reading them", function()
    local x = tf.placeholder(tf.float32, {}, "x")
    local y = tf.device("/cpu:1", function() return x + x + x * x end)
    local sess = two_cpus()
    local call = sess:make_callable(y, {x})
    assert.equal(15, call(3))
    local _, last = copies(sess)
    assert.equal(8, call(2))
    assert.same({1, 1}, (copies(sess, last)))
  end)

  it("fetches into a caller's buffer through the copy off the device", function()
    local x = tf.placeholder(tf.float32, {3}, "x")
    local y = tf.device("/cpu:1", function() return x * 10 end)
    local sess = two_cpus()
    local call = sess:make_callable(y, {x})
    local out = tf.array({0, 0, 0})
    call(tf.array({1, 2, 3}), {out = out})
    assert.same({10, 20, 30}, out:totable())
    local before = sess:memory_stats().num_allocations
    for i = 1, 5 do
      call(tf.array({i, i, i}), {out = out})
      assert.same({10 * i, 10 * i, 10 * i}, out:totable())
    end
    assert.equal(before, sess:memory_stats().num_allocations)  -- steady state: nothing new on either device
    local stats = sess:device_stats()
    assert.is_true(stats[2].num_allocations > 0)  -- CPU:1's buffers come from its own allocator
  end)

  it("colocates Assign and the optimizers' updates with their variable, wherever they are built", function()
    local v = tf.device("/cpu:1", function() return tf.Variable(1.5, {name = "v"}) end)
    local bump = tf.device("/cpu:0", function() return tf.assign_add(v, 2, {name = "bump"}) end)
    local sess = two_cpus({log_device_placement = true})
    sess:run(v.initializer)
    printed = {}
    assert.equal(3.5, sess:run(bump))
    assert.same({"Const: (Const): " .. CPU0, "bump: (AssignAdd): /job:localhost/replica:0/task:0/device:CPU:1"},
                printed)
  end)

  it("gives bit-identical forward results and gradients to the single-device run", function()
    local function build(dev)
      tf.reset_default_graph()
      local x = tf.placeholder(tf.float32, {-1, 5}, "x")
      local w = tf.constant({{0.1, -0.2}, {0.3, 0.4}, {-0.5, 0.6}, {0.7, -0.8}, {0.9, 1.0}})
      local h = tf.device(dev, function() return tf.tanh(tf.matmul(x, w)) end)
      local p = tf.nn.softmax(h * 3)
      local y = tf.device(dev, function() return tf.reduce_sum(tf.log(p + 1) * tf.sigmoid(h)) end)
      local gx, gw = table.unpack(tf.gradients(y, {x, w}))
      return x, {h, p, y, gx, gw}
    end
    local v = {{1, 2, 3, 4, 5}, {-1, 0.5, 0.25, 2, -3}, {0.1, 0.2, 0.3, 0.4, 0.5}}
    local x1, f1 = build("")
    local one = tf.Session():run(f1, {[x1] = v})
    local x2, f2 = build("/cpu:1")
    local sess = two_cpus()
    local two = sess:run(f2, {[x2] = v})
    for i = 1, #one do assert.is_true(same_bits(one[i], two[i]), "fetch " .. i) end
    assert.is_true(sess:device_stats()[2].copies_to > 0)
  end)

  it("trains an MLP with variables on CPU:1 and the loss on CPU:0, bit for bit as on one device", function()
    local xs = {{1, 2, 3, 4}, {0.5, -1, 2, 0}, {3, 1, -2, 1}, {-1, -1, 0.5, 2}, {0, 0.2, 0.1, -0.3}}
    local ys = {0, 1, 2, 1, 0}
    local function train(var_device, session)
      tf.reset_default_graph()
      tf.set_random_seed(7)
      local x = tf.placeholder(tf.float32, {-1, 4}, "x")
      local y = tf.placeholder(tf.int32, {-1}, "y")
      local logits, vars = tf.device(var_device, function()
        local w1, b1 = tf.get_variable("w1", {4, 8}), tf.get_variable("b1", {8}, {initializer = tf.zeros_initializer()})
        local w2, b2 = tf.get_variable("w2", {8, 3}), tf.get_variable("b2", {3}, {initializer = tf.zeros_initializer()})
        local h = tf.nn.relu(tf.matmul(x, w1) + b1)
        return tf.matmul(h, w2) + b2, {w1, b1, w2, b2}
      end)
      local loss = tf.device("/cpu:0", function()
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = y, logits = logits}))
      end)
      local step = tf.train.AdamOptimizer(0.05):minimize(loss)
      local sess = session()
      sess:run(tf.global_variables_initializer())
      local losses = {}
      for i = 1, 4 do losses[i] = sess:run({loss, step}, {[x] = xs, [y] = ys})[1] end
      return losses, sess:run(vars), sess
    end
    local l1, v1 = train("", tf.Session)
    local l2, v2, sess = train("/device:CPU:1", two_cpus)
    assert.same(l1, l2)
    assert.is_true(l2[4] < l2[1])
    for i = 1, #v1 do assert.is_true(same_bits(v1[i], v2[i]), "variable " .. i) end
    -- The variables' values live on CPU:1: each step's gradients cross to it.
    local stats = sess:device_stats()
    assert.is_true(stats[2].copies_to > 0 and stats[1].copies_to > 0)
  end)

  it("runs control flow whose branches and bodies run on CPU:1", function()
    local p = tf.placeholder(tf.bool, {}, "p")
    local x = tf.placeholder(tf.float32, {2}, "x")
    local r, n = tf.device("/cpu:1", function()
      local c = tf.cond(p, function() return x * 2 end, function() return x - 1 end)
      local _, acc = tf.while_loop(function(i) return tf.less(i, 3) end,
                                   function(i, a) return i + 1, a * 2 end, {tf.constant(0), x})
      return c, acc
    end)
    local g = tf.gradients(tf.reduce_sum(n * r), {x})[1]
    local sess = two_cpus()
    local out = sess:run({r, n, g}, {[p] = true, [x] = {1, 2}})
    assert.same({2, 4}, out[1]:totable())
    assert.same({8, 16}, out[2]:totable())
    -- d/dx sum(8x * 2x) = 32x
    assert.same({32, 64}, out[3]:totable())
    local single = tf.Session({allow_soft_placement = true}):run({r, n, g}, {[p] = false, [x] = {1, 2}})
    local split = sess:run({r, n, g}, {[p] = false, [x] = {1, 2}})
    for i = 1, 3 do assert.is_true(same_bits(single[i], split[i])) end
  end)

  it("runs loops on CPU:0 that read and update a variable living on CPU:1", function()
    local v = tf.device("/cpu:1", function() return tf.Variable({1, 2}, {name = "v"}) end)
    local function loop(body)
      return select(2, tf.while_loop(function(i) return tf.less(i, 3) end, function(i, a) return i + 1, body(a) end,
                                     {tf.constant(0), tf.zeros({2})}))
    end
    local reads = loop(function(a) return a + v end)
    local updates = loop(function(a) return a + tf.assign_add(v, {1, 1}) end)
    local sess = two_cpus({log_device_placement = true})
    sess:run(v.initializer)
    printed = {}
    assert.same({3, 6}, sess:run(reads):totable())
    -- v goes 1,2 -> 2,3 -> 3,4 -> 4,5; each iteration adds the updated value.
    assert.same({9, 12}, sess:run(updates):totable())
    assert.same({4, 5}, sess:run(v):totable())
    local placed = {}
    for _, text in ipairs(printed) do
      local name, dev = text:match("^(%S+): %(%a+%): (%S+)$")
      if name then placed[name] = dev end
    end
    -- The update inside the loop body runs where the variable is.
    local update
    for name, dev in pairs(placed) do if name:match("AssignAdd$") then update = dev end end
    assert.equal("/job:localhost/replica:0/task:0/device:CPU:1", update)
  end)

  it("is an error for a device the session lacks, naming the op, the devices and its line", function()
    local x = tf.constant(1, nil, nil, "x")
    local l = line() + 1
    local a = tf.device("/cpu:2", function() return tf.identity(x, "a") end)
    local sess = two_cpus()
    local ok, err = pcall(sess.run, sess, a)
    assert.is_false(ok)
    assert.equal("Cannot assign a device for operation 'a': Could not satisfy explicit device specification " ..
                 "'/device:CPU:2' because no devices matching that specification are registered in this process; " ..
                 "available devices: /device:CPU:0, /device:CPU:1 (op 'a' created at " .. here .. ":" .. l .. ")",
                 err)
    -- A one-CPU session has no CPU:1.
    local b = tf.device("/cpu:1", function() return tf.identity(x, "b") end)
    ok, err = pcall(tf.Session().run, tf.Session(), b)
    assert.matches("'/device:CPU:1' because no devices matching that specification are registered in this " ..
                   "process; available devices: /device:CPU:0 %(op 'b' created at", err)
  end)

  it("puts ops on a missing device on CPU:0 with allow_soft_placement, with a log line", function()
    local x = tf.constant(2, nil, nil, "x")
    local a = tf.device("/cpu:5", function() return tf.multiply(x, 3, "a") end)
    local sess = two_cpus({allow_soft_placement = true, log_device_placement = true})
    assert.equal(6, sess:run(a))
    assert.same({"x: (Const): " .. CPU0,
                 "Soft placement: operation 'Const' (Const) asked for '/device:CPU:5', which is not available in " ..
                 "this process; placed on " .. CPU0, "Const: (Const): " .. CPU0,
                 "Soft placement: operation 'a' (Mul) asked for '/device:CPU:5', which is not available in this " ..
                 "process; placed on " .. CPU0, "a: (Mul): " .. CPU0}, printed)
  end)

  it("answers through the C API: devices, names and statistics", function()
    local status = require("moonflow.core").status
    local x = tf.placeholder(tf.float32, {2}, "x")
    local y = tf.device("/cpu:1", function() return x + 1 end)
    local config = ffi.new("mf_session_config")
    config.device_count[C.MF_CPU] = 2
    local s = ffi.gc(C.mf_session_new_with_config(tf.get_default_graph().ptr, config, status), C.mf_session_free)
    assert.equal(2, C.mf_session_num_devices(s))
    assert.equal(CPU0, ffi.string(C.mf_session_device_name(s, 0)))
    assert.is_true(C.mf_session_device_name(s, 2) == nil)
    assert.is_true(C.mf_session_device_name(s, -1) == nil)
    local fetch = ffi.new("mf_output[1]", {{y.op.ptr, 0}})
    local feed = ffi.new("mf_output[1]", {{x.op.ptr, 0}})
    local value = ffi.new("mf_tensor*[1]", tf.array({1, 2}).ptr)
    local out = ffi.new("mf_tensor*[1]")
    for _ = 1, 3 do
      assert.equal(0, C.mf_session_run(s, feed, value, 1, fetch, out, 1, nil, 0, status))
      C.mf_tensor_release(out[0])
    end
    local st = ffi.new("mf_device_stats")
    assert.is_true(C.mf_session_device_stats(s, 1, st))
    assert.equal(3, tonumber(st.copies_to))
    assert.equal(3, tonumber(st.copies_from))
    assert.equal(24, tonumber(st.bytes_to))
    assert.is_true(tonumber(st.memory.num_allocations) > 0)
    assert.is_false(C.mf_session_device_stats(s, 2, st))
    config.device_count[C.MF_CPU] = 9
    assert.is_true(C.mf_session_new_with_config(tf.get_default_graph().ptr, config, status) == nil)
    assert.equal("device_count: CPU must be 0 (the default: 1) to 8, got 9", ffi.string(C.mf_status_message(status)))
  end)
end)
