-- devices.lua — tf.device and tf.list_devices (DESIGN §2, §3). The engine
-- parses device strings and places ops (src/device/placement.c); sessions take the
-- options allow_soft_placement and log_device_placement (session.lua).
local ffi = require("ffi")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local C = core.C

local NAME_MAX = 256
local buffer = ffi.new("char[?]", NAME_MAX)

-- Device types as the engine numbers them, with TensorFlow's names.
local TYPES = {{enum = C.MF_CPU, name = "CPU"}, {enum = C.MF_CUDA, name = "GPU"}}

return function(tf)
  -- tf.device(spec, fn, ...): ops built in fn(...) record the device spec
  -- names, merged over that of an enclosing tf.device as TensorFlow nests them
  -- (fields spec names override the outer ones); nil or "" clears it. Returns
  -- what fn returns.
  function tf.device(spec, fn, ...)
    if type(fn) ~= "function" then
      core.fail("tf.device(spec, fn): fn must be a function, got " .. type(fn))
    end
    local g = G.get_default_graph()
    local device = ""
    if spec ~= nil and spec ~= "" then
      if type(spec) ~= "string" then
        core.fail("tf.device: expected a device string such as \"/cpu:0\" or nil, got " .. tostring(spec))
      end
      if C.mf_device_merge(G.current_device(g) or "", spec, buffer, NAME_MAX, core.status) ~= 0 then
        core.fail("tf.device: " .. ffi.string(C.mf_status_message(core.status)))
      end
      device = ffi.string(buffer)
    end
    return G.with_pushed(g._devices, device, fn, ...)
  end

  -- The devices of this process: {{name = "/device:CPU:0", device_type = "CPU",
  -- memory_limit = bytes}, ...}; GPUs only when a CUDA backend is compiled in.
  function tf.list_devices()
    local out = {}
    for _, t in ipairs(TYPES) do
      for i = 0, C.mf_num_devices(t.enum) - 1 do
        out[#out + 1] = {name = "/device:" .. t.name .. ":" .. i, device_type = t.name,
                         memory_limit = tonumber(C.mf_device_memory_limit(t.enum, i))}
      end
    end
    return out
  end
end
