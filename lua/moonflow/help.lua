-- help.lua — help(x) in the REPL: a function's documentation, read from the
-- API reference (docs/api/*.md), the one place it is written. The reference
-- is installed beside the modules (LUADIR/moonflow/doc/, `make install-lua`)
-- and read from the checkout's docs/api/ otherwise.
--   help(tf.matmul), help("tf.matmul")   the paragraphs and table rows naming it
--   help(tf.nn)                          the functions of a table
--   help(x)                              what x is (its repr and kind)
local core = require("moonflow.core")
local args = require("moonflow.args")
local printing = require("moonflow.printing")

local M = {}

local function doc_dir()
  for _, dir in ipairs({core.module_dir .. "/doc", core.module_dir .. "/../../docs/api"}) do
    local f = io.open(dir .. "/README.md", "rb")
    if f then f:close(); return dir end
  end
end

-- The reference as units (a table row or a paragraph, with its file and
-- first line), read once.
local units
local function reference()
  if units then return units end
  units = {}
  local dir = doc_dir()
  if not dir then return units end
  local p = io.popen("ls '" .. dir .. "'")
  local files = {}
  for name in p:lines() do  -- README.md holds the conventions, not one function's
    if name:match("%.md$") and name ~= "README.md" then files[#files + 1] = name end
  end
  p:close()
  table.sort(files)
  for _, name in ipairs(files) do
    local n, current, in_code = 0, nil, false
    local function finish() if current then units[#units + 1] = current; current = nil end end
    for line in io.lines(dir .. "/" .. name) do
      n = n + 1
      if line:match("^```") then finish(); in_code = not in_code
      elseif in_code then -- code blocks are examples, not descriptions
      elseif line:match("^|") then
        finish()
        if not line:match("^|%s*%-") then units[#units + 1] = {file = name, line = n, text = line, row = true} end
      elseif line:match("^%s*$") or line:match("^#") then finish()
      elseif current then current.text = current.text .. "\n" .. line
      else current = {file = name, line = n, text = line} end
    end
    finish()
  end
  return units
end

local function escape(s) return (s:gsub("%p", "%%%0")) end

-- The units documenting `name` ("tf.matmul"), best first kind only: table
-- rows whose first cell names it; paragraphs calling it (`tf.matmul(`);
-- paragraphs of its table calling its last part (`tf.layers` … `dense(`);
-- paragraphs naming it.
function M.lookup(name)
  local called, named = "`" .. escape(name) .. "%(", "`" .. escape(name) .. "`"
  local parent, last = name:match("^(.*)%.([^.]+)$")
  local found = {{}, {}, {}, {}}
  for _, u in ipairs(reference()) do
    local kind
    if u.row then
      local first = u.text:match("^|([^|]*)|")
      if first and (first:find(called) or first:find(named)) then kind = 1 end
    elseif u.text:find(called) then kind = 2
    elseif parent and u.text:find("`" .. escape(parent) .. "[`,]") and u.text:find("`" .. escape(last) .. "%(") then
      kind = 3
    elseif u.text:find(named) then kind = 4 end
    if kind then table.insert(found[kind], u) end
  end
  for _, units_of_kind in ipairs(found) do
    if #units_of_kind > 0 then return units_of_kind end
  end
  return {}
end

-- A table row as "call — description" lines; a paragraph as it is.
local function show_unit(u)
  if not u.row then return u.text end
  local cells = {}
  for cell in u.text:gmatch("|([^|]*)") do
    cell = cell:match("^%s*(.-)%s*$")
    if cell ~= "" then cells[#cells + 1] = cell end
  end
  return table.concat(cells, " — ")
end

-- The help text of x (what help(x) prints).
function M.text(x)
  local name = type(x) == "string" and x or (type(x) == "function" and args.api_name(x))
  if name then
    local found = M.lookup(name)
    if #found == 0 then
      return name .. ": no entry in the API reference (docs/api); docs/op_status.md lists what exists"
    end
    local parts = {}
    for _, u in ipairs(found) do
      parts[#parts + 1] = show_unit(u) .. "\n  (docs/api/" .. u.file .. ":" .. u.line .. ")"
    end
    return name .. "\n\n" .. table.concat(parts, "\n\n")
  end
  if type(x) == "function" then return "a function that is not part of moonflow's API (no documentation)" end
  if args.is_plain(x) then
    local fns, others = {}, {}
    for k, v in pairs(x) do
      if type(k) == "string" then
        if type(v) == "function" then fns[#fns + 1] = k else others[#others + 1] = k end
      end
    end
    table.sort(fns)
    table.sort(others)
    local text = "a table of " .. #fns .. " functions"
    if #fns > 0 then text = text .. ": " .. table.concat(fns, ", ") end
    if #others > 0 then text = text .. "\nand other fields: " .. table.concat(others, ", ") end
    return text .. "\nhelp(f) shows a function's documentation"
  end
  return printing.repr(x) .. "\n(help(tf.matmul) shows a function's documentation)"
end

function M.help(x) print(M.text(x)) end

return M
