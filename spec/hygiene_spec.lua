-- Graph hygiene (beyond TensorFlow): the pitfalls of
-- how-not-to-program-the-tensorflow-graph.txt are reported once per cause,
-- with the Lua line, and can be silenced; g:finalize() errors name the line.
local tf = require("moonflow")
local core = require("moonflow.core")

local function line() return debug.getinfo(2, "l").currentline end

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

-- Runs a Lua script in a fresh LuaJIT with `env` prepended; returns what it
-- wrote to stdout and to stderr.
local function run_script(source, env)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'") == 0)
  local f = assert(io.open(dir .. "/script.lua", "wb"))
  f:write(source)
  f:close()
  local root = os.getenv("PWD") or "."
  local lib = core.library_path:sub(1, 1) == "/" and core.library_path or root .. "/" .. core.library_path
  local cmd = string.format("cd '%s' && %s LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' MOONFLOW_LIB='%s' " ..
                            "luajit script.lua 2>stderr.txt", dir, env or "", root, root, lib)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  local e = assert(io.open(dir .. "/stderr.txt", "rb"))
  local err = e:read("*a")
  e:close()
  os.execute("rm -rf '" .. dir .. "'")
  return out, err
end

describe("graph hygiene warnings", function()
  local warnings, saved
  before_each(function()
    tf.reset_default_graph()
    saved = {}
    for k, v in pairs(tf.hygiene) do saved[k] = v end
    warnings = {}
    tf.hygiene.enabled, tf.hygiene.graph_growth, tf.hygiene.large_constants = true, true, true
    tf.hygiene.output = function(message) warnings[#warnings + 1] = message end
  end)
  after_each(function()
    for k, v in pairs(saved) do tf.hygiene[k] = v end
  end)

  it("reports once, with the line, a loop that builds an op at every run", function()
    local x = tf.Variable(0, {name = "x"})
    local at = line() + 4
    local function count_to_30()
      local sess = tf.Session()
      sess:run(x.initializer)
      for _ = 1, 30 do sess:run(tf.assign(x, x + 1)) end
      return sess:run(x)
    end
    assert.equal(30, count_to_30())
    assert.equal(1, #warnings)
    local w = warnings[1]
    assert.matches("^moonflow warning: spec/hygiene_spec.lua:" .. at .. ": ", w)
    assert.matches("new ops (such as 'Assign_9', a Assign) were created here between 10 runs of a session", w, 1, true)
    assert.matches("Build the op once, before the loop, and run it many times", w, 1, true)
    assert.matches("silence with tf.hygiene.graph_growth = false", w, 1, true)
    -- Once per cause: that line again, in another session, says nothing more.
    assert.equal(30, count_to_30())
    assert.equal(1, #warnings)
  end)

  it("says nothing when the op is built once and run many times", function()
    local x = tf.Variable(0, {name = "x"})
    local increment_x = tf.assign(x, x + 1)
    local sess = tf.Session()
    sess:run(x.initializer)
    for _ = 1, 1000 do sess:run(increment_x) end
    assert.equal(1000, sess:run(x))
    assert.same({}, warnings)
  end)

  it("says nothing about a few ops built between a few runs", function()
    local x = tf.placeholder(tf.float32, {})
    local sess = tf.Session()
    for i = 1, 5 do assert.equal(i * 2, sess:run(x * 2, {[x] = i})) end
    assert.same({}, warnings)
  end)

  it("the growth warning can be silenced by kind or altogether", function()
    local sess = tf.Session()
    tf.hygiene.graph_growth = false
    for i = 1, 20 do sess:run(tf.constant(i)) end
    tf.hygiene.graph_growth, tf.hygiene.enabled = true, false
    for i = 1, 20 do sess:run(tf.constant(i)) end
    assert.same({}, warnings)
  end)

  it("reports a constant over 1 MB built from data, suggesting a placeholder and a feed", function()
    local many_ones = tf.Array.new(tf.float64, {1000, 1000})
    for i = 0, 999999 do many_ones:data()[i] = 1 end
    local session = tf.Session()
    local at = line() + 1
    assert.equal(1000000, session:run(tf.reduce_sum(many_ones)))
    assert.equal(1, #warnings)
    local w = warnings[1]
    assert.matches("^moonflow warning: spec/hygiene_spec.lua:" .. at .. ": ", w)
    assert.matches("a constant of 7.6 MB ('Const', float64, shape {1000, 1000}) is embedded in the graph", w, 1, true)
    assert.matches("local x = tf.placeholder(tf.float64, {1000, 1000}), then sess:run(y, {[x] = value})", w, 1, true)
    -- The feed way embeds nothing.
    local many_things = tf.placeholder(tf.float64)
    local adder = tf.reduce_sum(many_things)
    assert.equal(1000000, session:run(adder, {[many_things] = many_ones}))
    assert.equal(1, #warnings)
  end)

  it("small constants are fine; the limit and the kind are settings", function()
    tf.constant({1, 2, 3})
    tf.Variable(tf.Array.new(tf.float32, {1000}))
    assert.same({}, warnings)
    tf.hygiene.large_constant_bytes = 100
    local at = line() + 1
    local v = tf.Variable(tf.Array.new(tf.float32, {50}), {name = "v"})
    assert.equal(1, #warnings)
    assert.matches("spec/hygiene_spec.lua:" .. at .. ": a constant of 0.0 MB ('v/initial_value', float32, shape {50})",
                   warnings[1], 1, true)
    tf.hygiene.large_constants = false
    tf.constant(tf.Array.new(tf.float32, {60}))
    assert.equal(1, #warnings)
    assert.equal(tf.float32, v.dtype)
  end)

  it("writes to stderr by default; MOONFLOW_HYGIENE=0 silences it", function()
    local script = [[
local tf = require("moonflow")
local sess = tf.Session()
for i = 1, 12 do sess:run(tf.constant(i)) end
print("done")
]]
    local out, err = run_script(script)
    assert.equal("done\n", out)
    assert.matches("^moonflow warning: script.lua:3: new ops %(such as 'Const_10', a Const%) were created here between 10 runs", err)
    out, err = run_script(script, "MOONFLOW_HYGIENE=0")
    assert.equal("done\n", out)
    assert.equal("", err)
  end)
end)

describe("g:finalize()", function()
  before_each(function() tf.reset_default_graph() end)

  it("makes creating an op an error that names the call site; running still works", function()
    local g = tf.Graph()
    local x = g:as_default(function() return tf.constant(1, {name = "x"}) end)
    g:finalize()
    local at
    local err = err_of(g.as_default, g, function() at = line(); local y = x * 2; return y end)
    assert.matches("Graph is finalized and cannot be modified", err, 1, true)
    assert.matches("(at spec/hygiene_spec.lua:" .. at .. ")", err, 1, true)
    assert.equal(1, tf.Session(g):run(x))
    err = err_of(g.as_default, g, function() at = line(); local v = tf.get_variable("v", {}); return v end)
    assert.matches("Graph is finalized and cannot be modified (creating VariableV2 op 'v')", err, 1, true)
    assert.matches("(at spec/hygiene_spec.lua:" .. at .. ")", err, 1, true)
    err = err_of(g.as_default, g, function() local i = tf.global_variables_initializer(); return i end)
    assert.matches("Graph is finalized", err, 1, true)
  end)
end)
