-- Helpers shared by the spec files: reproducible values, element counts,
-- gradient checks and error capture. require("spec.helpers").
local tf = require("moonflow")
local assert = require("luassert")

local H = {}

-- n reproducible values in [-1, 1) from a small LCG.
function H.uniform(n, seed)
  local out, s = {}, seed or 5
  for i = 1, n do
    s = (s * 1103515245 + 12345) % 2147483648
    out[i] = s / 1073741824 - 1
  end
  return out
end

-- n reproducible values in [-1, 1), none of them zero (and distinct in practice).
function H.values(n, seed)
  local out = H.uniform(n, seed or 7)
  for i = 1, n do out[i] = out[i] * 0.9 + (i % 2 == 0 and 0.05 or -0.05) end
  return out
end

function H.numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- Asserts that the symbolic and numeric Jacobians agree to tol (1e-8).
function H.check_grad(x, x_shape, y, y_shape, opts, tol)
  local err = tf.test.compute_gradient_error(x, x_shape, y, y_shape, opts)
  assert.is_true(err < (tol or 1e-8), "gradient error " .. tostring(err))
end

-- The error message of fn(...), which must fail.
function H.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- A fresh temporary directory's path.
function H.tmpdir()
  local p = io.popen("mktemp -d")
  local d = p:read("*l")
  p:close()
  return d
end

-- Runs `luajit script args` in a process of its own (the environment, the
-- library path included, is inherited); returns its output, stdout and
-- stderr together, and its exit status.
function H.run_script(script, args)
  local p = io.popen("luajit " .. script .. " " .. args .. " 2>&1; echo \"exit=$?\"")
  local out = p:read("*a")
  p:close()
  return out, tonumber(out:match("exit=(%d+)%s*$"))
end

return H
