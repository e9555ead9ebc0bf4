-- devices.lua — tf.device, tf.DeviceSpec and tf.list_devices (DESIGN §2, §3).
-- The engine parses device strings and places ops (src/device/placement.c);
-- sessions take the options allow_soft_placement, log_device_placement and
-- device_count (session.lua).
local ffi = require("ffi")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local session = require("moonflow.session")
local C = core.C

local NAME_MAX = 256
local buffer = ffi.new("char[?]", NAME_MAX)

-- Device types as the engine numbers them, with TensorFlow's names.
local TYPES = {{enum = C.MF_CPU, name = "CPU"}, {enum = C.MF_CUDA, name = "GPU"}}

-- The normal form of a device string (mf_device_merge), or an error naming fname.
local function normal_form(fname, outer, str)
  if C.mf_device_merge(outer, str, buffer, NAME_MAX, core.status) ~= 0 then
    core.fail(fname .. ": " .. ffi.string(C.mf_status_message(core.status)))
  end
  return ffi.string(buffer)
end

-- tf.DeviceSpec: a device string's fields (job, replica, task, device_type,
-- device_index; nil when unset), as TensorFlow's DeviceSpec.
local DeviceSpec = {}
DeviceSpec.__index = DeviceSpec
local SPEC_FIELDS = {"job", "replica", "task", "device_type", "device_index"}

local function check_field(fname, key, v)
  if v == nil then return nil end
  if key == "job" or key == "device_type" then
    if type(v) ~= "string" or not v:match("^%a[%w_]*$") then
      core.fail(string.format("%s: %s must be a name (a letter, then letters, digits or _), got %s", fname, key,
                              tostring(v)))
    end
    return key == "device_type" and v:upper() or v
  end
  if type(v) ~= "number" or v < 0 or v % 1 ~= 0 then
    core.fail(string.format("%s: %s must be a non-negative integer, got %s", fname, key, tostring(v)))
  end
  return v
end

local function new_spec(fields) return setmetatable(fields, DeviceSpec) end

-- The fields of a device string in normal form ("/job:x/replica:0/task:0/device:CPU:1").
local function parse_normal(str)
  local d = {}
  for field in str:gmatch("/([^/]+)") do
    local key, value = field:match("^(%a+):(.*)$")
    if key == "job" then d.job = value
    elseif key == "replica" or key == "task" then d[key] = tonumber(value)
    else  -- device:TYPE:INDEX, either may be "*"
      local kind, index = value:match("^([^:]+):(.+)$")
      d.device_type = kind ~= "*" and kind or nil
      d.device_index = tonumber(index)
    end
  end
  return d
end

-- "/job:x/replica:0/task:0/device:CPU:1": the fields that are set.
function DeviceSpec:to_string()
  local parts = {}
  if self.job then parts[#parts + 1] = "/job:" .. self.job end
  if self.replica then parts[#parts + 1] = "/replica:" .. self.replica end
  if self.task then parts[#parts + 1] = "/task:" .. self.task end
  if self.device_type or self.device_index then
    parts[#parts + 1] = "/device:" .. (self.device_type or "*") .. ":" .. (self.device_index or "*")
  end
  return table.concat(parts)
end
DeviceSpec.__tostring = DeviceSpec.to_string

-- Sets the fields str names (the others stay); returns self.
function DeviceSpec:parse_from_string(str)
  if type(str) ~= "string" then
    core.fail("DeviceSpec:parse_from_string: expected a device string, got " .. tostring(str))
  end
  for k, v in pairs(parse_normal(normal_form("DeviceSpec:parse_from_string", nil, str))) do self[k] = v end
  return self
end

-- Sets the fields dev (a DeviceSpec or a device string) names; returns self.
function DeviceSpec:merge_from(dev)
  if type(dev) == "string" then dev = new_spec({}):parse_from_string(dev) end
  if getmetatable(dev) ~= DeviceSpec then
    core.fail("DeviceSpec:merge_from: expected a tf.DeviceSpec or a device string, got " .. tostring(dev))
  end
  for _, k in ipairs(SPEC_FIELDS) do
    if dev[k] ~= nil then self[k] = dev[k] end
  end
  return self
end

-- A new spec with other's fields merged over this one's.
function DeviceSpec:make_merged_spec(other) return new_spec({}):merge_from(self):merge_from(other) end

return function(tf)
  -- tf.DeviceSpec({job=, replica=, task=, device_type=, device_index=}) or
  -- positionally in that order; tf.DeviceSpec.from_string(str).
  tf.DeviceSpec = setmetatable({from_string = function(str) return new_spec({}):parse_from_string(str) end},
    {__call = function(_, ...)
      local o = args.options("tf.DeviceSpec", SPEC_FIELDS, ...)
      local spec = new_spec({})
      for _, k in ipairs(SPEC_FIELDS) do spec[k] = check_field("tf.DeviceSpec", k, o[k]) end
      return spec
    end})

  -- tf.device(spec, fn, ...): ops built in fn(...) record the device spec
  -- (a string or a tf.DeviceSpec) names, merged over that of an enclosing
  -- tf.device as TensorFlow nests them (fields spec names override the outer
  -- ones); nil or "" clears it. Returns what fn returns.
  function tf.device(spec, fn, ...)
    if type(fn) ~= "function" then
      core.fail("tf.device(spec, fn): fn must be a function, got " .. type(fn))
    end
    local g = G.get_default_graph()
    local device = ""
    if getmetatable(spec) == DeviceSpec then spec = spec:to_string() end
    if spec ~= nil and spec ~= "" then
      if type(spec) ~= "string" then
        core.fail("tf.device: expected a device string such as \"/cpu:0\", a tf.DeviceSpec or nil, got " ..
                  tostring(spec))
      end
      device = normal_form("tf.device", G.current_device(g) or "", spec)
    end
    return G.with_pushed(g._devices, device, fn, ...)
  end

  -- The devices of this process: {{name = "/device:CPU:0", device_type = "CPU",
  -- memory_limit = bytes}, {name = "/device:GPU:0", device_type = "GPU",
  -- memory_limit = bytes, physical_device_desc = "device: 0, name: NVIDIA ..."}, ...};
  -- GPUs only when the CUDA backend is loaded and sees them.
  -- With session options ({device_count = {CPU = 2}}, as TensorFlow's
  -- list_local_devices(session_config)), the devices such a session has.
  function tf.list_devices(options)
    if options ~= nil then
      if not args.is_options(options, true) then
        core.fail("tf.list_devices: expected session options such as {device_count = {CPU = 2}}, got " ..
                  tostring(options))
      end
      local copy = {graph = G.Graph.new()}
      for k, v in pairs(options) do copy[k] = v end
      local out = session.new(copy):list_devices()
      for _, d in ipairs(out) do d.name = d.name:match("/device:.*$") end
      return out
    end
    local out = {}
    for _, t in ipairs(TYPES) do
      for i = 0, C.mf_num_devices(t.enum) - 1 do
        out[#out + 1] = {name = "/device:" .. t.name .. ":" .. i, device_type = t.name,
                         memory_limit = tonumber(C.mf_device_memory_limit(t.enum, i)),
                         physical_device_desc = t.name == "GPU" and
                           "device: " .. i .. ", name: " .. ffi.string(C.mf_device_description(t.enum, i)) or nil}
      end
    end
    return out
  end

  -- The devices of this process of a type ("CPU", "GPU"; nil: every type),
  -- prefixed `prefix` ("/physical_device:", "/device:").
  local function devices_of(fname, device_type, prefix)
    if device_type ~= nil and (type(device_type) ~= "string" or
                               (device_type:upper() ~= "CPU" and device_type:upper() ~= "GPU")) then
      core.fail(fname .. ": expected a device type \"CPU\" or \"GPU\" (or nil for all), got " .. tostring(device_type))
    end
    local out = {}
    for _, t in ipairs(TYPES) do
      if device_type == nil or device_type:upper() == t.name then
        for i = 0, C.mf_num_devices(t.enum) - 1 do
          out[#out + 1] = {name = prefix .. t.name .. ":" .. i, device_type = t.name}
        end
      end
    end
    return out
  end

  -- tf.config (TensorFlow 1.15's device listing): the physical devices
  -- ({name = "/physical_device:GPU:0", device_type = "GPU"}) and the logical
  -- ones, which sessions place ops on ({name = "/device:GPU:0", ...}). GPUs
  -- appear when the CUDA backend is loaded and sees them; gpu_status() says
  -- why not ("" when there are GPUs).
  tf.config = tf.config or {}
  function tf.config.list_physical_devices(device_type)
    return devices_of("tf.config.list_physical_devices", device_type, "/physical_device:")
  end
  function tf.config.list_logical_devices(device_type)
    return devices_of("tf.config.list_logical_devices", device_type, "/device:")
  end
  function tf.config.gpu_status() return ffi.string(C.mf_gpu_status()) end

  -- tf.test's device questions: whether a GPU can run ops here, and whether
  -- moonflow has its CUDA backend (built with nvcc, found, loaded).
  tf.test = tf.test or {}
  function tf.test.is_gpu_available() return C.mf_num_devices(C.MF_CUDA) > 0 end
  function tf.test.is_built_with_cuda() return C.mf_cuda_backend_loaded() end
end
