-- Helpers shared by the spec files: reproducible values, element counts,
-- comparisons, sessions, gradient checks, error capture and files.
-- require("spec.helpers").
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

-- The numbers of a number, a nested Lua list or a tf.Array, in order.
function H.flat(v)
  if type(v) == "number" then return {v} end
  local out = {}
  local function walk(t) for _, e in ipairs(t) do if type(e) == "table" then walk(e) else out[#out + 1] = e end end end
  walk(tf.Array.is(v) and v:totable() or v)
  return out
end

-- Complex values written as {re, im} pairs (spec/fixtures/complex_values.lua):
-- H.complex gives the nested list of complex numbers tf.constant takes;
-- H.pairs gives a complex tf.Array (or fetched number) back as such pairs.
function H.complex(v)
  if type(v[1]) == "number" then return tf.complex_number(v[1], v[2]) end
  local out = {}
  for i, e in ipairs(v) do out[i] = H.complex(e) end
  return out
end
function H.pairs(v)
  local function walk(e)
    if type(e) ~= "table" then return {e.re, e.im} end
    local out = {}
    for i, x in ipairs(e) do out[i] = walk(x) end
    return out
  end
  return walk(tf.Array.is(v) and v:totable() or v)
end

-- Asserts that actual has expected's numbers to a relative tolerance tol.
function H.assert_near_all(expected, actual, tol, what)
  local e, a = H.flat(expected), H.flat(actual)
  assert.equal(#e, #a, what)
  for i = 1, #e do
    assert(math.abs(e[i] - a[i]) <= tol * math.max(1, math.abs(e[i])),
           ("%s element %d: expected %.17g, got %.17g"):format(what or "", i, e[i], a[i]))
  end
end

-- Deep comparison of nested lists; numbers within a relative tolerance tol
-- (0 = exact), NaN equal to NaN.
function H.same(want, got, tol)
  if type(want) == "table" then
    if type(got) ~= "table" or #got ~= #want then return false end
    for i = 1, #want do if not H.same(want[i], got[i], tol) then return false end end
    return true
  end
  if type(want) == "number" and type(got) == "number" then
    if want ~= want then return got ~= got end
    if want == got then return true end
    return math.abs(want - got) <= tol * math.max(1, math.abs(want))
  end
  return want == got
end

-- Asserts H.same(want, got, tol or 0), showing both when they differ.
function H.assert_values(want, got, tol)
  local pretty = require("pl.pretty")
  assert(H.same(want, got, tol or 0), string.format("expected %s, got %s", pretty.write(want, ""),
                                                    pretty.write(got, "")))
end

-- The value of t (or of a list or table of fetches) in a session of its own.
function H.run(t, feeds)
  local sess = tf.Session()
  local r = sess:run(t, feeds)
  sess:close()
  return r
end

-- The value of t in a session of its own: a number (or boolean) as it is,
-- an Array as nested Lua tables.
function H.value(t, feeds)
  local r = H.run(t, feeds)
  return type(r) == "table" and r:totable() or r
end

-- The line of the spec that calls it.
-- Every outcome of running a dataset's get_next tensors until the end of
-- the sequence: a value (Arrays as tables), or {error = message} for a run
-- that failed (iteration goes on after it).
function H.outcomes(sess, nxt, limit)
  local out = {}
  for _ = 1, limit or 1000 do
    local ok, v = pcall(sess.run, sess, nxt)
    if not ok then
      if tostring(v):find("End of sequence", 1, true) then return out end
      v = {error = tostring(v)}
    elseif type(v) == "table" then
      local t = {}
      for k, x in pairs(v) do t[k] = tf.Array.is(x) and x:totable() or x end
      v = tf.Array.is(v) and v:totable() or t
    end
    out[#out + 1] = v
  end
  return out
end

-- An n x width float32 array of small integers (times scale), row i column j
-- ((7i + 3j) mod 11) - 5 counting from 1.
function H.rows(n, width, scale)
  local t = {}
  for i = 1, n do
    t[i] = {}
    for j = 1, width do t[i][j] = ((i * 7 + j * 3) % 11 - 5) * (scale or 1) end
  end
  return tf.array(t)
end

function H.this_line() return debug.getinfo(2, "l").currentline end

-- setup(H.growth_off) and teardown(H.growth_restore) in a spec file: no
-- graph-growth warnings while its tests run.
local growth_warnings
function H.growth_off() growth_warnings, tf.hygiene.graph_growth = tf.hygiene.graph_growth, false end
function H.growth_restore() tf.hygiene.graph_growth = growth_warnings end

-- Asserts that the symbolic and numeric Jacobians agree to tol (1e-8).
function H.check_grad(x, x_shape, y, y_shape, opts, tol)
  local err = tf.test.compute_gradient_error(x, x_shape, y, y_shape, opts)
  assert.is_true(err < (tol or 1e-8), "gradient error " .. tostring(err))
end

-- The gradient of dy . dy/dx (x's gradient for an incoming dy) checked with
-- respect to dy, i.e. the gradient of the gradient.
function H.check_grad_of_grad(x, x_shape, y, y_shape)
  local dy = tf.placeholder(tf.float64, y_shape, "dy")
  local dx = tf.gradients(y, x, dy)[1]
  H.check_grad(dy, y_shape, dx, x_shape)
end

-- The error message of fn(...), which must fail.
function H.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- An error message less the line it names at its end (" (at file:line)",
-- which core.fail adds), for comparing the words alone.
function H.without_line(err) return (tostring(err):gsub(" %(at [^()]*%)$", "")) end

-- A fresh temporary directory's path.
function H.tmpdir()
  local p = io.popen("mktemp -d")
  local d = p:read("*l")
  p:close()
  return d
end

-- A file's bytes.
function H.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- The names in a directory, sorted (ls).
function H.files_in(dir)
  local p = io.popen("ls -1 '" .. dir .. "'")
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

function H.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- Runs shell command `cmd`; returns its output, stdout and stderr together
-- (without the exit line), and its exit status.
function H.shell(cmd)
  local p = io.popen("{ " .. cmd .. "\n} 2>&1; echo \"exit=$?\"")
  local out = p:read("*a")
  p:close()
  local status = tonumber(out:match("exit=(%d+)%s*$"))
  return out:gsub("exit=%d+%s*$", ""), status
end

-- Runs `luajit script args` in a process of its own (the environment, the
-- library path included, is inherited); returns its output, stdout and
-- stderr together, and its exit status.
function H.run_script(script, args) return H.shell("luajit " .. script .. " " .. args) end

-- A terminal for specs of what a program shows on one: tmux runs a shell
-- command in a 100x40 pane (session `name`) of a private server; keys go in
-- with send-keys and the screen comes back with capture-pane. H.has_tmux
-- says whether tmux is there (Debian package tmux; .ci/run installs it).
H.has_tmux = os.execute("command -v tmux > /dev/null 2>&1") == 0

local Terminal = {}
Terminal.__index = Terminal

-- The server's socket is named after a fresh temporary file: suites running
-- at once (make test beside make test-asan) must not share a server, as one
-- named by the time and an unseeded math.random did (one suite's kill-server
-- ended the other's: "no server running").
function H.terminal(name)
  local unique = os.tmpname()
  os.remove(unique)
  return setmetatable({name = name, socket = "moonflow-spec-" .. unique:match("[^/]+$")}, Terminal)
end

function Terminal:tmux(args)
  local p = io.popen("tmux -L " .. self.socket .. " " .. args .. " 2>&1")
  local out = p:read("*a")
  p:close()
  return out
end

-- Starts `cmd` in the checkout (the working directory) with the
-- environment that finds the library and the modules, and TERM=xterm.
function Terminal:start(cmd)
  local env = {}
  for _, name in ipairs({"LUA_PATH", "MOONFLOW_LIB", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS"}) do
    local v = os.getenv(name)
    if v then env[#env + 1] = name .. "='" .. v .. "'" end
  end
  cmd = string.format("cd '%s' && env %s TERM=xterm %s", os.getenv("PWD") or ".", table.concat(env, " "), cmd)
  self:tmux("new-session -d -s " .. self.name .. " -x 100 -y 40 \"" .. cmd:gsub('"', '\\"') .. "\"")
end

function Terminal:screen() return self:tmux("capture-pane -p -t " .. self.name) end

-- Waits up to 20 s for the screen to show `text` (plain; capture-pane drops
-- the spaces that end a line, so text's are dropped too); returns the screen.
function Terminal:wait_for(text)
  text = text:gsub(" +$", "")
  local shown
  for _ = 1, 200 do
    shown = self:screen()
    if shown:find(text, 1, true) then return shown end
    os.execute("sleep 0.1")
  end
  error("the screen never showed " .. text .. "; it shows:\n" .. shown)
end

function Terminal:keys(...) self:tmux("send-keys -t " .. self.name .. " " .. table.concat({...}, " ")) end
function Terminal:line(s) self:keys("-l", "'" .. s:gsub("'", "'\\''") .. "'"); self:keys("Enter") end
function Terminal:kill() self:tmux("kill-server") end

-- The libraries a program linking libmoonflow.a statically needs: the
-- Makefile's LIBS line, so that specs linking it name them in one place.
function H.static_libs()
  for line in io.lines("Makefile") do
    local libs = line:match("^LIBS :=%s*(.-)%s*$")
    if libs then return libs end
  end
  error("Makefile has no LIBS line")
end

return H
