-- data/component.lua — one component of an element, as a value: a tf.Array,
-- a Lua number or boolean (scalars), or a Row (a row of a sliced array, not
-- copied yet); shapes, checks and conversion to a value a run can be fed.
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local new_array = require("moonflow.data.recycler").new_array

local fail = core.fail

local M = {}

-- A row of a sliced array, not copied yet: batch copies it straight from
-- the source into the batch, anything else copies it into its own Array
-- first (materialize). _data points into the source, which _keep holds.
local Row = {}
M.Row = Row

-- The rows of arrays sliced along their first axis (equal first
-- dimensions): returns row(i), element i (0-based) as a flat list with a Row
-- per component of rank >= 2 (pointing into the array, which it keeps) and a
-- Lua number (boolean for bool) per component of rank 1.
function M.row_reader(arrays)
  local n = #arrays
  local rows = arrays[1]._dims[1]
  local row_dims, row_size, row_bytes, ptrs = {}, {}, {}, {}
  for c, x in ipairs(arrays) do
    row_dims[c] = {unpack(x._dims, 2)}
    row_size[c] = x._size / math.max(rows, 1)
    row_bytes[c] = row_size[c] * x.dtype.size
    ptrs[c] = ffi.cast("uint8_t*", x._data)
  end
  return function(i)
    local elem = {}
    for c = 1, n do
      local x = arrays[c]
      if x.dtype.name == "string" then  -- offsets, not bytes: rows go through Lua strings
        local row = #row_dims[c] == 0 and x:totable()[i + 1] or Array.from(x:totable()[i + 1], x.dtype)
        elem[c] = row
      elseif #row_dims[c] == 0 then
        local v = x._data[i]
        if x.dtype.name ~= "bool" then v = tonumber(v) end
        elem[c] = v
      else
        elem[c] = setmetatable({dtype = x.dtype, _dims = row_dims[c], _size = row_size[c],
                                _bytes = row_bytes[c], _data = ptrs[c] + i * row_bytes[c], _keep = x}, Row)
      end
    end
    return elem
  end
end

-- v as a value that can be fed: a Row copied into its own Array, else v.
function M.materialize(v)
  if getmetatable(v) ~= Row then return v end
  local a = new_array(v.dtype, v._dims, v._size)
  ffi.copy(a._data, v._data, v._bytes)
  return a
end

function M.shape_of(v)
  if Array.is(v) or getmetatable(v) == Row then return v._dims end
  return {}
end

-- A static shape (a Lua list, -1 unknown; nil unknown rank) as text.
function M.shape_str(shape)
  if shape == nil then return "<unknown>" end
  return "[" .. table.concat(shape, ",") .. "]"
end

-- Whether a concrete shape fits a static one (-1 / nil unknown).
function M.shape_fits(static, dims)
  if static == nil then return true end
  if #static ~= #dims then return false end
  for i, d in ipairs(static) do if d >= 0 and d ~= dims[i] then return false end end
  return true
end

-- A tensor's static shape as a Lua list, or nil for an unknown rank.
function M.static_shape(t)
  local s = t:get_shape()
  return s.dims and s:as_list() or nil
end

-- A fetched or generated component as a feedable value of `dtype`.
function M.component(v, dtype, what)
  if Array.is(v) then
    if v.dtype ~= dtype then
      fail(what .. ": got a " .. v.dtype.name .. " value where the dataset declares " .. dtype.name ..
           "; convert it (tf.array(x, tf." .. dtype.name .. "))")
    end
    return v
  end
  if type(v) == "number" then
    if dtype.name == "bool" then fail(what .. ": got a number for a bool component") end
    return v
  end
  if type(v) == "boolean" then
    if dtype.name ~= "bool" then return v and 1 or 0 end
    return v
  end
  if type(v) == "table" or (type(v) == "string" and dtype.name == "string") then return Array.from(v, dtype) end
  fail(what .. ": cannot use a " .. type(v) .. " as a " .. dtype.name .. " value (use numbers, booleans, " ..
       "strings, nested tables or tf.Array)")
end

return M
