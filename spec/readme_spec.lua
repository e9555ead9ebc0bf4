-- Keeps the documentation true: every ```lua block of README.md and of every
-- Markdown file under docs/ (the tour, docs/tour.md, holds most of them) runs
-- as tour.lua in a fresh LuaJIT, and what it prints must match the block's
-- `--> ` comments, in order (a comment ending in "…" matches any line with
-- that prefix). Relative links between these files must point at a file that
-- exists and, with a #fragment, at one of its headings.
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

-- README.md, then docs/**/*.md in a stable order, as paths relative to root.
local function doc_files()
  local files = {"README.md"}
  local p = assert(io.popen("cd '" .. root .. "' && find docs -name '*.md' -type f 2>/dev/null | LC_ALL=C sort"))
  for path in p:lines() do files[#files + 1] = path end
  p:close()
  return files
end

-- The lua blocks of a Markdown text, each with the line its fence opens on.
local function lua_blocks(text)
  local blocks = {}
  for start, block in text:gmatch("()```lua\n(.-)```") do
    local _, newlines = text:sub(1, start):gsub("\n", "")
    blocks[#blocks + 1] = {line = newlines + 1, code = block}
  end
  return blocks
end

-- The least number of lua blocks a file must hold (a file that is required
-- here must exist).
local minimum_blocks = {["README.md"] = 1, ["docs/tour.md"] = 20}

local files = doc_files()
local total = 0
describe("the documentation's lua blocks", function()
  for _, file in ipairs(files) do
    local blocks = lua_blocks(read(root .. "/" .. file))
    total = total + #blocks
    for n, b in ipairs(blocks) do
      it(file .. ": block " .. n .. " (line " .. b.line .. ") runs and prints its --> lines", function()
        local want = expected_lines(b.code)
        local got, raw = run_block(b.code)
        assert(#got == #want, file .. " block " .. n .. " (line " .. b.line .. ") printed:\n" .. raw)
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
  end
end)

-- GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes.
local function slug(heading)
  local s = heading:lower():gsub("`", ""):gsub("[^%w%- _]", ""):gsub(" ", "-")
  return s
end

local function anchors(text)
  local set = {}
  local in_fence = false
  for line in text:gmatch("[^\n]*") do
    if line:match("^```") then in_fence = not in_fence end
    local h = not in_fence and line:match("^#+%s+(.-)%s*$")
    if h then set[slug(h)] = true end
  end
  return set
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return os.execute("test -d '" .. path .. "'") == 0
end

describe("the documentation", function()
  it("has lua blocks to check", function()
    assert.is_true(total >= 5)
    local present = {}
    for _, file in ipairs(files) do present[file] = true end
    for file, least in pairs(minimum_blocks) do
      assert(present[file], file .. " is missing")
      local n = #lua_blocks(read(root .. "/" .. file))
      assert(n >= least, file .. " has " .. n .. " lua blocks, fewer than " .. least)
    end
  end)

  for _, file in ipairs(files) do
    it(file .. ": relative links point at files and headings that exist", function()
      local text = read(root .. "/" .. file)
      local base = file:match("^(.*)/[^/]*$") or "."
      local bad = {}
      for target in text:gmatch("%]%(([^)%s]+)%)") do
        if not target:match("^%a[%w+.-]*:") then       -- not http:, mailto:, ...
          local path, fragment = target:match("^([^#]*)#?(.*)$")
          local full = path == "" and (root .. "/" .. file) or (root .. "/" .. base .. "/" .. path)
          if not exists(full) then
            bad[#bad + 1] = target .. " (no such file)"
          elseif fragment ~= "" and not anchors(read(full))[fragment] then
            bad[#bad + 1] = target .. " (no such heading)"
          end
        end
      end
      assert(#bad == 0, file .. ": broken links: " .. table.concat(bad, ", "))
    end)
  end
end)
