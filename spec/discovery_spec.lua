-- How require("moonflow") finds the engine (docs/building.md, "Finding the
-- library"), each case in a new process started in another directory:
-- package.cpath, MOONFLOW_LIB, the host program's own symbols, and LÖVE
-- (examples/love/) from the checkout and packed as a .love archive.
local core = require("moonflow.core")
local H = require("spec.helpers")

local root = os.getenv("PWD") or "."
local function absolute(p) return p:sub(1, 1) == "/" and p or root .. "/" .. p end
local lib = absolute(core.library_path)
local lua_path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua"
local probe = 'local tf = require("moonflow"); print(tf.Session():run(tf.constant(2) + 1)); ' ..
              'print(require("moonflow.core").library_path)'

-- Runs `cmd` from / with MOONFLOW_LIB unset and the given environment settings.
local function run_elsewhere(env, cmd)
  return H.shell("cd / && env -u MOONFLOW_LIB -u LUA_CPATH " .. env .. " " .. cmd)
end

describe("finding the library", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("takes moonflow/libmoonflow.so from a package.cpath directory", function()
    os.execute(string.format("mkdir -p '%s/moonflow' && cp '%s' '%s/moonflow/libmoonflow.so'", dir, lib, dir))
    local out, status = run_elsewhere(string.format("LUA_PATH='%s' LUA_CPATH='%s/?.so'", lua_path, dir),
                                      "luajit -e '" .. probe .. "'")
    assert.equal(0, status, out)
    assert.equal("3\n" .. dir .. "/moonflow/libmoonflow.so\n", out)
  end)

  it("loads only the file MOONFLOW_LIB names, and says so when it is missing", function()
    local out, status = run_elsewhere(string.format("LUA_PATH='%s' MOONFLOW_LIB='%s/none.so'", lua_path, dir),
                                      "luajit -e '" .. probe .. "'")
    assert.equal(1, status, out)
    assert.truthy(out:find("moonflow: cannot load the library MOONFLOW_LIB names: " .. dir .. "/none.so: not found",
                           1, true), out)
  end)

  it("uses the engine linked into the host program (ffi.C)", function()
    local archive = lib:gsub("%.so$", ".a")
    local exe = dir .. "/host"
    local out, status = H.shell(string.format(
      "%s -std=c11 $(pkg-config --cflags luajit) '%s/spec/lua_host.c' -rdynamic -Wl,--whole-archive '%s' " ..
      "-Wl,--no-whole-archive $(pkg-config --libs luajit) %s %s -o '%s'",
      os.getenv("CC") or "cc", root, archive, H.static_libs(), os.getenv("MOONFLOW_LINK_FLAGS") or "", exe))
    assert.equal(0, status, out)
    out, status = run_elsewhere("LUA_PATH='" .. lua_path .. "'", "'" .. exe .. "' '" .. probe .. "'")
    assert.equal(0, status, out)
    assert.equal("3\n(the host program)\n", out)
  end)
end)

-- The example's net in plain Lua: its outputs at frame n.
local function policy_at(frame)
  local function layer(x, nout, w, b, act)
    local y = {}
    for j = 1, nout do
      local s = b(j)
      for i = 1, #x do s = s + x[i] * w(i, j) end
      y[j] = act(s)
    end
    return y
  end
  local relu = function(v) return math.max(v, 0) end
  local tanh = function(v) return (math.exp(v) - math.exp(-v)) / (math.exp(v) + math.exp(-v)) end
  local x = {}
  for i = 1, 8 do x[i] = math.sin(0.05 * frame + i) end
  local h1 = layer(x, 64, function(i, j) return math.sin(7 * i + 3 * j) * 0.5 end, function(j) return 0.01 * j end, relu)
  local h2 = layer(h1, 64, function(i, j) return math.cos(5 * i + 2 * j) * 0.2 end, function() return 0 end, relu)
  return layer(h2, 4, function(i, j) return math.sin(i + 11 * j) * 0.3 end, function() return 0 end, tanh)
end

describe("LÖVE (examples/love)", function()
  local function have(cmd) return select(2, H.shell("command -v " .. cmd)) == 0 end
  local function runnable()
    if have("love") and have("xvfb-run") and have("zip") then return true end
    pending("needs LÖVE 11, Xvfb and zip (apt-get install love xvfb zip)")
  end
  -- Runs the game at `path` for 30 frames; returns its figures and library path.
  local function play(path, env)
    local out, status = run_elsewhere(env .. " MOONFLOW_LOVE_FRAMES=30",
                                      "timeout 120 xvfb-run -a love '" .. path .. "'")
    assert.equal(0, status, out)
    local a, b, c, d = out:match("frame 30: (%S+) (%S+) (%S+) (%S+)\n")
    assert.truthy(a, out)
    local want = policy_at(30)
    for i, got in ipairs({a, b, c, d}) do
      assert.is_true(math.abs(tonumber(got) - want[i]) < 2e-5, "output " .. i .. ": " .. got .. ", want " .. want[i])
    end
    return out:match("library: ([^\n]+)")
  end

  it("runs the net each frame, from the checkout, with the library of its build/", function()
    if not runnable() then return end
    assert.equal(root .. "/examples/love/../../lua/moonflow/../../build/libmoonflow.so",
                 play(root .. "/examples/love", ""))
  end)

  it("runs packed as a .love archive with the library beside it", function()
    if not runnable() then return end
    local dir = H.tmpdir()
    local out, status = H.shell(string.format(
      "mkdir -p '%s/game' && cp '%s'/examples/love/*.lua '%s/game/' && cp -r '%s/lua/moonflow' '%s/game/' && " ..
      "cd '%s/game' && zip -qr ../game.love . && cp '%s' '%s/libmoonflow.so'", dir, root, dir, root, dir, dir, lib, dir))
    assert.equal(0, status, out)
    assert.equal(dir .. "/libmoonflow.so", play(dir .. "/game.love", ""))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
