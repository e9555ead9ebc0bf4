-- gpu_helpers.lua — what the GPU specs (spec/gpu_*_spec.lua) share: whether
-- this process has a GPU and why not, `gpu_it` (a case that is pending with
-- the reason when there is none: reported as skipped, never as passed), and
-- `compare`, which runs one graph builder under /cpu:0 and under /gpu:0 and
-- checks that the results agree and that the ops really ran on the GPU.
local tf = require("moonflow")
local assert = require("luassert")

local M = {}

function M.has_gpu() return tf.test.is_gpu_available() end
-- Why there is no GPU ("" when there is one).
function M.reason() return tf.config.gpu_status() end

-- it(name, fn) when this process has a GPU; else a pending case saying why.
-- (busted's it and pending live in the calling spec file's environment.)
function M.gpu_it(name, fn)
  local spec = getfenv(2)
  spec.it(name, function()
    if not M.has_gpu() then
      spec.pending("no GPU: " .. M.reason())
      return
    end
    fn()
  end)
end

-- Runs build() (which returns fetches and optionally feeds) in a graph of its
-- own, every op under tf.device(device); returns the results and the lines
-- log_device_placement printed.
function M.run_on(device, build, session_options)
  local g = tf.Graph()
  local fetches, feeds = g:as_default(function() return tf.device(device, build) end)
  local options = {graph = g, log_device_placement = true}
  for k, v in pairs(session_options or {}) do options[k] = v end
  local log = {}
  local saved = tf.set_print_sink(function(text) log[#log + 1] = text end)
  local ok, results = pcall(function() return tf.Session(options):run(fetches, feeds) end)
  tf.set_print_sink(saved)
  if not ok then error(results, 0) end
  return results, log
end

-- The device each op type ran on, by the placement log: {[type] = {device, ...}}.
function M.placements(log)
  local out = {}
  for _, line in ipairs(log) do
    local op_type, device = line:match("^[^:]+: %(([%w_]+)%): (.*)$")
    if op_type then
      out[op_type] = out[op_type] or {}
      table.insert(out[op_type], device)
    end
  end
  return out
end

-- Asserts that every op of type op_type in the log ran on GPU:0 (and that there was one).
function M.assert_on_gpu(log, op_type)
  local devices = M.placements(log)[op_type]
  assert(devices and #devices > 0, "no " .. op_type .. " op in the placement log:\n" .. table.concat(log, "\n"))
  for _, d in ipairs(devices) do
    assert(d:match("/device:GPU:0$"), op_type .. " ran on " .. d .. ", not GPU:0:\n" .. table.concat(log, "\n"))
  end
end

-- Element i (0-based) of a result as a Lua value, and its count.
local function elements(v)
  if tf.Array.is(v) then
    local data, dtype = v:data(), v.dtype.name
    return function(i)
      local x = data[i]
      if dtype == "bool" then return x end
      return tonumber(x)
    end, v:size(), dtype, v:shape()
  end
  return function() return v end, 1, type(v) == "boolean" and "bool" or "number", {}
end

-- Whether a GPU value g matches the CPU's c: exactly for integers and
-- bools, else to the relative tolerance rtol (absolute near 0), NaN matching
-- NaN and infinities matching only themselves.
local function close(c, g, exact, rtol)
  if exact or type(c) ~= "number" then return c == g end
  if c ~= c then return g ~= g end
  if c == math.huge or c == -math.huge then return c == g end
  return math.abs(c - g) <= rtol * math.max(1, math.abs(c))
end

-- Runs build under /cpu:0 and /gpu:0 and asserts that the results agree
-- (float32 to rtol 1e-5 unless opts.rtol, float64 to 1e-12, integers and
-- bools exactly) and that every op of the types in opts.on_gpu ran on the
-- GPU. Returns the GPU's results, or nil and the error both gave.
-- Placeholders have no GPU kernel: soft placement keeps them (and any other
-- op without one) on the CPU, and the values are copied. A run that fails on
-- the CPU must fail on the GPU with the same message.
function M.compare(build, opts)
  opts = opts or {}
  local soft = {allow_soft_placement = true}
  local cpu_ok, cpu = pcall(M.run_on, "/cpu:0", build, soft)
  local gpu_ok, gpu, log = pcall(M.run_on, "/gpu:0", build, soft)
  if not cpu_ok then
    assert.is_false(gpu_ok, "the CPU failed (" .. tostring(cpu) .. ") but the GPU did not")
    assert.equal(cpu, gpu)
    return nil, cpu
  end
  assert(gpu_ok, gpu)
  for _, op_type in ipairs(opts.on_gpu or {}) do M.assert_on_gpu(log, op_type) end
  local many = type(cpu) == "table" and not tf.Array.is(cpu)
  local cpus, gpus = many and cpu or {cpu}, many and gpu or {gpu}
  for k = 1, #cpus do
    local cget, n, dtype, shape = elements(cpus[k])
    local gget, gn, gdtype, gshape = elements(gpus[k])
    assert.equal(dtype, gdtype, "result " .. k .. "'s dtype")
    assert.same(shape, gshape, "result " .. k .. "'s shape")
    assert.equal(n, gn)
    local exact = dtype ~= "float32" and dtype ~= "float64"
    local rtol = opts.rtol or (dtype == "float64" and 1e-12 or 1e-5)
    for i = 0, n - 1 do
      local c, g = cget(i), gget(i)
      if not close(c, g, exact, rtol) then
        error(string.format("result %d element %d: CPU %s, GPU %s (%s)", k, i, tostring(c), tostring(g), dtype), 2)
      end
    end
  end
  return gpu
end

return M
