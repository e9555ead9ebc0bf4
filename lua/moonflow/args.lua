-- args.lua — argument handling shared by the op modules (DESIGN §3):
-- required arguments are positional; optional ones either follow positionally
-- in TensorFlow's order or come as one trailing table of named options. A
-- table with an array part is a list; a table with only string keys is an
-- options table.
local core = require("moonflow.core")
local G = require("moonflow.graph")

local M = {}

-- A plain Lua table: no metatable (not a tensor, array, dtype, ...).
function M.is_plain(x) return type(x) == "table" and getmetatable(x) == nil end

-- A plain table with string keys only is an options table; an empty table is
-- an empty list, or with `empty_too` an empty options table.
function M.is_options(x, empty_too)
  return M.is_plain(x) and x[1] == nil and (empty_too or next(x) ~= nil)
end

-- Raises msg with the user's line (the first frame outside moonflow).
function M.fail(msg) error(msg .. " (at " .. core.user_location() .. ")", 0) end

-- An op name from a trailing argument: a string or an options table {name=}.
function M.name_of(opt)
  if type(opt) == "table" then return opt.name end
  return opt
end

-- A value for an error message: lists as {1, 2}.
function M.show(v)
  if not M.is_plain(v) then return tostring(v) end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = M.show(x) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

function M.is_integer(v) return type(v) == "number" and v % 1 == 0 end

-- The checks below raise at the caller of the function that calls them.
function M.int_arg(v, fname, what)
  if not M.is_integer(v) then
    error(string.format("%s: %s must be an integer, got %s", fname, what, tostring(v)), 3)
  end
  return v
end

-- A Lua list of integers, checked, for an ints attribute; with `scalar_ok` a
-- single number counts as a one-element list.
function M.int_list(v, fname, what, scalar_ok)
  if scalar_ok and type(v) == "number" then v = {v} end
  if not M.is_plain(v) then
    error(string.format("%s: %s must be %s, got %s", fname, what,
                        scalar_ok and "an integer or a Lua list of integers" or "a Lua list of integers",
                        tostring(v)), 3)
  end
  for i, x in ipairs(v) do
    if not M.is_integer(x) then
      error(string.format("%s: %s[%d] must be an integer, got %s", fname, what, i, tostring(x)), 3)
    end
  end
  return v
end

-- nil or a boolean.
function M.check_bool(v, fname, what)
  if v ~= nil and type(v) ~= "boolean" then
    error(string.format("%s: %s must be a boolean, got %s", fname, what, tostring(v)), 3)
  end
  return v
end

-- parser(how) returns options(fname, names, ...): the optional arguments of
-- `fname`, given positionally in TensorFlow's order (`names`; names.positional,
-- when set, is how many of them may come positionally) and/or as one trailing
-- options table, returned by name. What a module's functions differ in, `how`
-- says:
--   at_user    errors carry the user's line (M.fail); otherwise they are
--              raised at the caller of the function that called options
--   unknown    the message format (fname, key, expected names) for a key not
--              in `names`; default "%s: unknown option '%s' (expected one of: %s)"
--   too_many   the message format (fname, count, limit) for too many
--              positional arguments; default "%s: too many arguments"
--   both       an option given both positionally and by name is an error
--   empty      an empty trailing table is an (empty) options table
--   trim       trailing nils are not arguments
--   rest       unknown keys are returned in a second table instead of refused
function M.parser(how)
  local unknown = how.unknown or "%s: unknown option '%s' (expected one of: %s)"
  local too_many = how.too_many or "%s: too many arguments"
  local function raise(msg)
    if how.at_user then M.fail(msg) end
    error(msg, 4)
  end
  return function(fname, names, ...)
    local n = select("#", ...)
    if how.trim then
      while n > 0 and select(n, ...) == nil do n = n - 1 end
    end
    local opts, rest = {}, {}
    local last = n > 0 and select(n, ...) or nil
    if M.is_options(last, how.empty) then
      local valid = {}
      for _, k in ipairs(names) do valid[k] = true end
      for k, v in pairs(last) do
        if valid[k] then opts[k] = v
        elseif how.rest then rest[k] = v
        else raise(string.format(unknown, fname, tostring(k), table.concat(names, ", "))) end
      end
      n = n - 1
    end
    local positional = names.positional or #names
    if n > positional then raise(string.format(too_many, fname, n, positional)) end
    for i = 1, n do
      local v = select(i, ...)
      if v ~= nil then
        if how.both and opts[names[i]] ~= nil then
          raise(fname .. ": '" .. names[i] .. "' is given both positionally and as an option")
        end
        opts[names[i]] = v
      end
    end
    if how.rest then return opts, rest end
    return opts
  end
end

-- x as a tensor (a Lua value becomes a constant).
function M.tensor_arg(fname, what, x)
  local ok, t = pcall(G.convert, x)
  if not ok or not G.is_tensor(t) then
    M.fail(fname .. ": " .. what .. " must be a Tensor or a Lua value, got " .. tostring(x))
  end
  return t
end

-- The graph of the tensors among the arguments, looking one level into lists.
function M.graph_of(...)
  local found = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if G.is_tensor(v) then found[#found + 1] = v
    elseif M.is_plain(v) then
      for _, x in ipairs(v) do if G.is_tensor(x) then found[#found + 1] = x end end
    end
  end
  return G.graph_of(found)
end

return M
