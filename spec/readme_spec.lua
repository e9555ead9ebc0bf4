-- Keeps README.md true: every ```lua block runs as tour.lua in a fresh LuaJIT,
-- and what it prints must match the block's `--> ` comments, in order (a
-- comment ending in "…" matches any line with that prefix).
local core = require("moonflow.core")
local H = require("spec.helpers")
local read = H.read

local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  return (os.getenv("PWD") or ".") .. "/" .. path
end

local function expected_lines(block)
  local out = {}
  for line in block:gmatch("[^\n]*") do
    local e = line:match("%-%->%s?(.*)$")
    if e then out[#out + 1] = e end
  end
  return out
end

local root = absolute(".")
local lib = absolute(core.library_path)
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'") == 0)

local function run_block(block)
  local f = assert(io.open(dir .. "/tour.lua", "wb"))
  f:write(block)
  f:close()
  local cmd = string.format("cd '%s' && LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' MOONFLOW_LIB='%s' luajit tour.lua 2>&1",
                            dir, root, root, lib)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  local lines = {}
  for line in out:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  return lines, out
end

describe("README.md", function()
  local readme = read(root .. "/README.md")
  local n = 0
  for block in readme:gmatch("```lua\n(.-)```") do
    n = n + 1
    it("runs lua block " .. n .. " with the printed results", function()
      local want = expected_lines(block)
      local got, raw = run_block(block)
      assert(#got == #want, "block " .. n .. " printed:\n" .. raw)
      for i, e in ipairs(want) do
        if e:sub(-3) == "…" then
          local prefix = e:sub(1, -4):gsub("%s+$", "")
          assert.equal(prefix, got[i]:sub(1, #prefix))
        else
          assert.equal(e, got[i])
        end
      end
    end)
  end
  it("has lua blocks to check", function() assert.is_true(n >= 5) end)
end)
