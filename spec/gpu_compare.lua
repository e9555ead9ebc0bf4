-- Helpers of the GPU specs that compare a GPU kernel with the CPU's
-- (spec/gpu_dnn_spec.lua, spec/gpu_random_spec.lua): build one subgraph per
-- device from the same values, run it, compare the results and check from
-- the placement log where the ops ran. require("spec.gpu_compare").
local tf = require("moonflow")
local assert = require("luassert")

local GH = {}

-- Why the GPU cases cannot run here (nil when this process has a GPU): the
-- cases report it with busted's pending and return.
function GH.no_gpu()
  if tf.test.is_gpu_available() then return nil end
  return "no GPU: " .. tf.config.gpu_status()
end

-- Builds a subgraph in a graph of its own under tf.device(dev):
-- build() returns the fetches (a list) and the feeds ({[placeholder] =
-- Array}); runs it `runs` times (default 1) in a session with config (plus
-- log_device_placement) and returns {values = {run -> {Arrays}}, placed =
-- {the placement log's lines}}.
function GH.run_on(dev, build, config, runs)
  local g = tf.Graph()
  local fetches, feeds = g:as_default(function() return tf.device(dev, build) end)
  local placed = {}
  local saved = tf.set_print_sink(function(text) placed[#placed + 1] = text end)
  local cfg = {graph = g, log_device_placement = true}
  for k, v in pairs(config or {}) do cfg[k] = v end
  local ok, out = pcall(function()
    local sess = tf.Session(cfg)
    local values = {}
    for r = 1, runs or 1 do values[r] = sess:run(fetches, feeds) end
    sess:close()
    return values
  end)
  tf.set_print_sink(saved)
  if not ok then error(out, 0) end
  return {values = out, placed = placed}
end

-- Asserts that two run_on results hold the same values: same dtypes and
-- shapes, elements within tol relative to the largest magnitude of the
-- fetch (at least 1): sums of many terms in another order differ by
-- rounding that scales with the terms, not with the sum (a filter
-- gradient's element near 0 is a sum of thousands of terms). tol 0:
-- exactly, NaN equal to NaN. spare (optional) lets a few elements of a
-- fetch differ beyond tol: at most spare.most(n) of its n elements, each
-- with spare.fits(cpu_value, gpu_value) true.
function GH.assert_close(want, got, tol, spare)
  assert.equal(#want.values, #got.values)
  for r, row in ipairs(want.values) do
    for i, a in ipairs(row) do
      local b = got.values[r][i]
      assert.equal(a.dtype, b.dtype, ("fetch %d"):format(i))
      assert.same(a:shape(), b:shape(), ("fetch %d"):format(i))
      local da, db, n = a:data(), b:data(), 1
      for _, d in ipairs(a:shape()) do n = n * d end
      local scale = 1
      for k = 0, tol > 0 and n - 1 or -1 do scale = math.max(scale, math.abs(tonumber(da[k]))) end
      local spared, most = 0, spare and spare.most(n) or 0
      for k = 0, n - 1 do
        if da[k] ~= db[k] then  -- 64-bit integers compare exactly as cdata
          local x, y = tonumber(da[k]), tonumber(db[k])
          if not (x ~= x and y ~= y) and not (math.abs(x - y) <= tol * scale) then
            if spared < most and spare.fits(x, y) then
              spared = spared + 1
            else
              local spared_text = spare and (", %d of at most %d elements spared before"):format(spared, most) or ""
              error(("run %d, fetch %d, element %d: CPU %.17g, GPU %.17g (tolerance %g%s)"):format(r, i, k, x, y, tol,
                                                                                                 spared_text), 2)
            end
          end
        end
      end
    end
  end
end

-- Asserts from a run_on result's placement log that every op of the types
-- on_gpu ran on GPU:0 and every op of the types on_cpu on CPU:0.
function GH.assert_placed(result, on_gpu, on_cpu)
  local function check(types, device)
    for _, t in ipairs(types or {}) do
      local seen = false
      for _, line in ipairs(result.placed) do
        local ty, dev = line:match("^[^:]+: %(([^)]+)%): (.*)$")
        if ty == t then
          seen = true
          assert(dev:find(device, 1, true), ("%s ran on %s, not %s"):format(line, dev, device))
        end
      end
      assert(seen, ("no %s op in the placement log:\n%s"):format(t, table.concat(result.placed, "\n")))
    end
  end
  check(on_gpu, "/device:GPU:0")
  check(on_cpu, "/device:CPU:0")
end

return GH
