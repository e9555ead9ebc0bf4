-- data/sources.lua — the datasets a pipeline starts from:
-- Dataset.from_tensor_slices, Dataset.range and Dataset.from_generator (the
-- CSV reader is data/csv.lua).
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local dataset = require("moonflow.data.dataset")
local slicer = require("moonflow.data.block").slicer
local new_array = require("moonflow.data.recycler").new_array
local structure = require("moonflow.data.structure")
local component_ = require("moonflow.data.component")
local fail = core.fail

local Dataset, new_dataset = dataset.Dataset, dataset.new
local flatten, ordered_keys = structure.flatten, structure.ordered_keys
local row_reader, component, static_shape = component_.row_reader, component_.component, component_.static_shape
local shape_of, shape_fits, shape_str = component_.shape_of, component_.shape_fits, component_.shape_str

-- Dataset.from_tensor_slices(x | {x, y} | {a = x}) -----------------------------
-- Components are tf.Array, nested Lua tables of numbers (float32; bool for
-- booleans) or tensors (evaluated when the iterator starts, with the feeds of
-- that run: feed a placeholder when running it.initializer). Element i is row
-- i of every component.
function Dataset.from_tensor_slices(value)
  if value == nil then fail("Dataset.from_tensor_slices: expected an array or a table of arrays") end
  if value == Dataset then
    fail("Dataset.from_tensor_slices is a function: call it with a dot, not a colon")
  end
  local flat = {}
  local template = flatten(value, flat)
  if #flat == 0 then fail("Dataset.from_tensor_slices: the structure has no components") end
  local spec, rows = {}, nil
  for i, v in ipairs(flat) do
    local dtype, shape
    if G.is_tensor(v) then
      dtype, shape = v.dtype, static_shape(v)
    else
      if not Array.is(v) then
        if type(v) ~= "table" then
          fail("Dataset.from_tensor_slices: component " .. i .. " is a " .. type(v) ..
               "; slicing needs an array of rank >= 1")
        end
        v = Array.from(v, nil, false, "Dataset.from_tensor_slices")
        flat[i] = v
      end
      dtype, shape = v.dtype, v:shape()
    end
    if shape and #shape == 0 then
      fail("Dataset.from_tensor_slices: component " .. i .. " is a scalar; slicing needs rank >= 1")
    end
    if shape and shape[1] >= 0 then
      if rows and rows ~= shape[1] then
        fail(string.format("Dataset.from_tensor_slices: components have different first dimensions " ..
                           "(%d and %d); every component needs one row per element", rows, shape[1]))
      end
      rows = shape[1]
    end
    local elem = nil
    if shape then elem = {unpack(shape, 2)} end
    spec[i] = {dtype = dtype, shape = elem}
  end
  local has_tensors = false
  for _, v in ipairs(flat) do if G.is_tensor(v) then has_tensors = true end end
  -- The arrays sliced, evaluated with the feeds of the run starting the epoch.
  local function values_of(ctx)
    local values = flat
    if has_tensors then
      local fetch = {}
      for i, v in ipairs(flat) do if G.is_tensor(v) then fetch[#fetch + 1] = v end end
      local got = ctx.session:run(fetch, ctx.feeds)
      values = {}
      local k = 0
      for i, v in ipairs(flat) do
        if G.is_tensor(v) then
          k = k + 1
          local x = got[k]
          if not Array.is(x) then
            fail("Dataset.from_tensor_slices: tensor " .. v.name .. " evaluated to a scalar; slicing needs rank >= 1")
          end
          values[i] = x
        else
          values[i] = v
        end
      end
      local n
      for _, x in ipairs(values) do
        local r = x._dims[1]
        if n and r ~= n then
          fail(string.format("Dataset.from_tensor_slices: components have different first dimensions " ..
                             "(%d and %d)", n, r))
        end
        n = r
      end
    end
    return values
  end
  local ds = new_dataset("TensorSliceDataset", template, spec, function(ctx)
    local values = values_of(ctx)
    local n, row = values[1]._dims[1], row_reader(values)
    local i = 0
    return function()
      if i >= n then return nil end
      i = i + 1
      return row(i - 1)
    end
  end)
  -- The arrays whose rows are the elements (for a shuffle to gather by index).
  ds.open_rows = values_of
  -- Blocks: consecutive rows, copied at once.
  ds.open_blocks = function(ctx, _, size)
    local values = values_of(ctx)
    local n, i, slice = values[1]._dims[1], 0, slicer(values)
    return function()
      if i >= n then return nil end
      local m = math.min(size, n - i)
      i = i + m
      return slice(i - m, m)
    end
  end
  return ds
end

-- Dataset.range(stop) / (start, stop[, step]): int64 scalars --------------------
function Dataset.range(a, b, step)
  local start, stop = 0, a
  if b ~= nil then start, stop = a, b end
  step = step or 1
  for _, v in ipairs({start, stop, step}) do
    if type(v) ~= "number" or v % 1 ~= 0 then
      fail("Dataset.range: expected integers (stop) or (start, stop[, step]), got " .. tostring(v))
    end
  end
  if step == 0 then fail("Dataset.range: step must not be 0") end
  local int64 = core.dtypes.int64
  local count = math.max(0, math.ceil((stop - start) / step))
  local ds = new_dataset("RangeDataset", 1, {{dtype = int64, shape = {}}}, function()
    local i = 0
    return function()
      if i >= count then return nil end
      i = i + 1
      return {start + (i - 1) * step}
    end
  end)
  -- Blocks: the values of up to `size` elements written into one array.
  ds.open_blocks = function(_, _, size)
    local i = 0
    return function()
      if i >= count then return nil end
      local m = math.min(size, count - i)
      local a = new_array(int64, {m}, m)
      local d = a._data
      for k = 0, m - 1 do d[k] = start + (i + k) * step end
      i = i + m
      return {a}
    end
  end
  return ds
end

-- Dataset.from_generator(fn, dtypes, shapes): fn() is called at the start of
-- each epoch and returns an iterator (a function returning the next element,
-- nil at the end, e.g. coroutine.wrap(...)) or a list of elements. dtypes is
-- a dtype or a structure of them; shapes (optional) the same structure of
-- shapes (-1 unknown dims; nil unknown shape).
function Dataset.from_generator(fn, dtypes, shapes)
  if type(fn) ~= "function" then
    fail("Dataset.from_generator(fn, dtypes, shapes): fn must be a function returning an iterator " ..
         "(a function giving one element per call, nil at the end) or a list")
  end
  if dtypes == nil then
    fail("Dataset.from_generator: dtypes is required (e.g. tf.float32 or {tf.float32, tf.int32})")
  end
  local flat_types, flat_shapes = {}, {}
  local template
  local function walk(t, s)
    if getmetatable(t) == core.DType or type(t) == "string" then
      flat_types[#flat_types + 1] = core.as_dtype(t, "Dataset.from_generator")
      if s ~= nil and (type(s) ~= "table" or (#s == 0 and next(s) ~= nil and getmetatable(s) == nil)) then
        if getmetatable(s) ~= G.TensorShape then
          fail("Dataset.from_generator: shapes must mirror dtypes with a shape list per dtype")
        end
      end
      if getmetatable(s) == G.TensorShape then s = s.dims end
      flat_shapes[#flat_types] = s
      return #flat_types
    end
    if type(t) ~= "table" then
      fail("Dataset.from_generator: dtypes must be a dtype or a table of dtypes, got " .. tostring(t))
    end
    local out = {}
    for _, k in ipairs(ordered_keys(t)) do out[k] = walk(t[k], s ~= nil and s[k] or nil) end
    return out
  end
  template = walk(dtypes, shapes)
  local spec = {}
  for i, d in ipairs(flat_types) do spec[i] = {dtype = d, shape = flat_shapes[i]} end
  local what = "Dataset.from_generator"
  local function convert(v)
    local flat = {}
    if type(template) == "number" then
      flat[1] = v
    else
      if type(v) ~= "table" or Array.is(v) then
        fail(what .. ": the generator gave a " .. type(v) .. " where the dtypes declare a structure")
      end
      local function take(t, x)
        if type(t) == "number" then flat[t] = x; return end
        for k, sub in pairs(t) do
          if x[k] == nil then fail(what .. ": the generator's element lacks component " .. tostring(k)) end
          take(sub, x[k])
        end
      end
      take(template, v)
    end
    for i, c in ipairs(spec) do
      local x = component(flat[i], c.dtype, what)
      if not shape_fits(c.shape, shape_of(x)) then
        fail(string.format("%s: the generator gave component %d of shape %s where shapes says %s",
                           what, i, shape_str(shape_of(x)), shape_str(c.shape)))
      end
      flat[i] = x
    end
    return flat
  end
  return new_dataset("GeneratorDataset", template, spec, function()
    local it = fn()
    if type(it) == "table" then
      local list, i = it, 0
      it = function() i = i + 1; return list[i] end
    elseif type(it) ~= "function" then
      fail(what .. ": fn() returned a " .. type(it) .. "; return an iterator function or a list")
    end
    return function()
      local v = it()
      if v == nil then return nil end
      return convert(v)
    end
  end)
end

return Dataset
