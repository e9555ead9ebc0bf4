-- Devices: tf.device (TensorFlow device strings, normalized and nested),
-- tf.list_devices, and placement in the session (explicit devices that are
-- not present are errors, soft placement falls back to the CPU, and
-- log_device_placement prints each op's device through the print sink).
local tf = require("moonflow")
local ffi = require("ffi")
local C = require("moonflow.core").C

local function line() return debug.getinfo(2, "l").currentline end
local here = debug.getinfo(1, "S").short_src
local CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"

local NO_GPU = "Could not satisfy explicit device specification '/device:GPU:0' because no devices " ..
               "matching that specification are registered in this process; available devices: /device:CPU:0"

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
    assert.equal("tf.device: expected a device string such as \"/cpu:0\" or nil, got 7 (at " .. here .. ":" .. l .. ")",
                 err)
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
