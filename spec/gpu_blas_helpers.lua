-- What the GPU specs of matmul, reductions and nn share (cuda-blas): a case
-- runs only when a GPU is present and is reported pending otherwise; a
-- comparison builds one subgraph twice, under /cpu:0 and under /gpu:0, runs
-- both in one session, checks from log_device_placement that the ops under
-- test ran on the GPU, and compares the results (floats to a relative
-- tolerance, integers exactly, NaN equal to NaN).
-- require("spec.gpu_blas_helpers").
local tf = require("moonflow")
local H = require("spec.helpers")
local assert = require("luassert")

local G = {}
G.available = tf.test.is_gpu_available()
local GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

-- it(name, fn) with a GPU, else pending with the reason; busted's it and
-- pending live in the calling spec's environment.
function G.it(name, fn)
  local env = getfenv(2)
  if G.available then env.it(name, fn)
  else env.pending("no GPU (" .. tf.config.gpu_status() .. "): " .. name) end
end

-- build() returns a list of tensors; types lists op types of which every one
-- built under /gpu:0 must run there. Returns the CPU's and the GPU's values
-- and the placement log's lines.
function G.both(types, build)
  tf.reset_default_graph()
  local cpu = tf.device("/cpu:0", build)
  local gpu = tf.device("/gpu:0", build)
  local printed = {}
  local saved = tf.set_print_sink(function(text) printed[#printed + 1] = text end)
  local sess = tf.Session({log_device_placement = true, allow_soft_placement = true})
  local ok, rc, rg = pcall(function() return sess:run(cpu), sess:run(gpu) end)
  tf.set_print_sink(saved)
  sess:close()
  if not ok then error(rc, 0) end
  for _, t in ipairs(types) do
    local on_gpu, elsewhere = 0, {}
    for _, line in ipairs(printed) do
      if line:find(": (" .. t .. "): ", 1, true) then
        if line:sub(-#GPU0) == GPU0 then on_gpu = on_gpu + 1 else elsewhere[#elsewhere + 1] = line end
      end
    end
    assert(on_gpu > 0, "no " .. t .. " ran on " .. GPU0)
    -- The CPU copy's ops run on CPU:0: as many of them as ran on the GPU.
    assert(#elsewhere == on_gpu, t .. " placed off the GPU: " .. table.concat(elsewhere, "; "))
  end
  return rc, rg, printed
end

-- G.both, then each GPU value equals the CPU's (tol: relative, 0 = exact).
function G.compare(types, build, tol)
  local rc, rg = G.both(types, build)
  assert.equal(#rc, #rg)
  for i = 1, #rc do
    local c, g = H.flat(rc[i]), H.flat(rg[i])
    assert.equal(#c, #g, "result " .. i .. ": element count")
    for j = 1, #c do
      assert(H.same(c[j], g[j], tol),
             ("result %d element %d: CPU %.17g, GPU %.17g"):format(i, j, c[j], g[j]))
    end
  end
  return rc, rg
end

-- A constant of shape and dtype with reproducible values: in [-scale, scale)
-- for floats, small integers for integer dtypes.
function G.input(shape, dtype, seed, scale)
  local v = H.uniform(H.numel(shape), seed or 11)
  local int = dtype == tf.int32 or dtype == tf.int64
  for i = 1, #v do v[i] = int and math.floor(v[i] * 5) or v[i] * (scale or 1) end
  return tf.constant(v, dtype, shape)
end

-- The float tolerance of a dtype: 1e-5 for float32 (the issue's), 1e-12 for float64, exact for integers.
function G.tol(dtype) return dtype == tf.float32 and 1e-5 or dtype == tf.float64 and 1e-12 or 0 end

return G
