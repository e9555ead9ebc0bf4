-- data/block.lua — blocks: runs of consecutive elements stacked along a new
-- first axis (a flat list of Arrays, one per component, with equal first
-- dimensions), the unit in which batch works. A dataset may stream blocks
-- itself (ds.open_blocks(ctx, ahead, n) returning next_block(), blocks of at
-- most n rows, nil at the end; `ahead` counts blocks in flight): sources
-- copy contiguous rows at once, a shuffle of a from_tensor_slices gathers
-- its rows by shuffled index, a map whose function is elementwise along
-- the rows runs it once per block (map-and-batch fusion, data/rowwise.lua).
-- Any other dataset's elements are stacked here, one at a time, as batch
-- always did. Either way batch sees the same rows in the same order, and an
-- error of the stream loses the rows of the batch being gathered, as it does
-- element by element.
local ffi = require("ffi")
local Array = require("moonflow.array")
local component = require("moonflow.data.component")
local recycler = require("moonflow.data.recycler")
local core = require("moonflow.core")

local fail = core.fail
local shape_of, shape_str, row_reader = component.shape_of, component.shape_str, component.row_reader
local new_array, new_array_key = recycler.new_array, recycler.key

local M = {}

local function rows(block) return block[1]._dims[1] end
M.rows = rows

-- String arrays hold offsets, not bytes, in their elements (core/tstring.h):
-- their rows move as Lua strings, never byte for byte. The rows (0-based
-- indices in the Lua list `list`; nil: all) of each array of xs in turn, as
-- one new string array.
local function string_rows(xs, list)
  local out = {}
  for _, x in ipairs(xs) do
    local t = x:totable()
    if list then
      for _, i in ipairs(list) do out[#out + 1] = t[i + 1] end
    else
      for _, row in ipairs(t) do out[#out + 1] = row end
    end
  end
  if #out == 0 then return Array.new(xs[1].dtype, {0, unpack(xs[1]._dims, 2)}) end
  return Array.from(out, xs[1].dtype)
end
local function range_list(first, count)
  local list = {}
  for k = 1, count do list[k] = first + k - 1 end
  return list
end

-- Per array (equal first dimensions): its row layout, and the shapes of the
-- blocks it makes, worked out once.
local function layouts_of(arrays)
  local layouts = {}
  for c, x in ipairs(arrays) do
    local total = x._dims[1]
    local row_size = total > 0 and x._size / total or 0
    layouts[c] = {x = x, row_size = row_size, row_bytes = row_size * x.dtype.size,
                  base = ffi.cast("uint8_t*", x._data), shapes = {}}
  end
  return layouts
end

-- A new array for count rows of layout l; its bytes as a uint8_t*.
local function rows_array(l, count)
  local shape = l.shapes[count]
  if not shape then
    local dims = {count, unpack(l.x._dims, 2)}
    shape = {dims = dims, key = new_array_key(l.x.dtype, dims)}
    l.shapes[count] = shape
  end
  local a = new_array(l.x.dtype, shape.dims, count * l.row_size, shape.key)
  return a, ffi.cast("uint8_t*", a._data)
end

-- slice(first, count): rows [first, first + count) of arrays (equal first
-- dimensions) copied into new arrays, a block.
local function slicer(arrays)
  local layouts = layouts_of(arrays)
  return function(first, count)
    local out = {}
    for c, l in ipairs(layouts) do
      if l.x.dtype.name == "string" then
        out[c] = string_rows({l.x}, range_list(first, count))
      else
        local a, dst = rows_array(l, count)
        ffi.copy(dst, l.base + first * l.row_bytes, count * l.row_bytes)
        out[c] = a
      end
    end
    return out
  end
end
M.slicer = slicer

-- gather(rows): the rows of arrays whose indices (0-based) the list rows
-- holds, in its order, copied into new arrays: a block.
function M.gatherer(arrays)
  local layouts = layouts_of(arrays)
  return function(rows)
    local out, count = {}, #rows
    for c, l in ipairs(layouts) do
      if l.x.dtype.name == "string" then
        out[c] = string_rows({l.x}, rows)
      else
        local a, dst = rows_array(l, count)
        local base, bytes = l.base, l.row_bytes
        for k = 1, count do ffi.copy(dst + (k - 1) * bytes, base + rows[k] * bytes, bytes) end
        out[c] = a
      end
    end
    return out
  end
end

local function slice(arrays, first, count) return slicer(arrays)(first, count) end

-- Blocks of the same components one after the other, as one block.
local function concat(parts)
  if #parts == 1 then return parts[1] end
  local total = 0
  for _, b in ipairs(parts) do total = total + rows(b) end
  local out = {}
  for c, x in ipairs(parts[1]) do
    if x.dtype.name == "string" then
      local xs = {}
      for k, b in ipairs(parts) do xs[k] = b[c] end
      out[c] = string_rows(xs)
    else
      local row_size = x._size / rows(parts[1])
      local a = new_array(x.dtype, {total, unpack(x._dims, 2)}, total * row_size)
      local dst = ffi.cast("uint8_t*", a._data)
      for _, b in ipairs(parts) do
        local bytes = b[c]._size * x.dtype.size
        ffi.copy(dst, b[c]._data, bytes)
        dst = dst + bytes
      end
      out[c] = a
    end
  end
  return out
end

-- Component c of m elements (Lua strings, or string Arrays of one shape)
-- stacked into a string array.
local function stack_strings(elems, m, c)
  local list = {}
  for k = 1, m do
    local v = elems[k][c]
    list[k] = Array.is(v) and (v:rank() == 0 and v:get() or v:totable()) or v
  end
  return Array.from(list, core.dtypes.string, false, "Dataset:batch")
end

-- Component c (of dtype) of m elements stacked into an array; names the
-- first element whose shape differs from the first's.
local function stack_numbers(elems, m, c, dtype)
  local first = elems[1][c]
  local dims = shape_of(first)
  local rest = #dims
  local bdims = {m}
  for d = 1, rest do bdims[d + 1] = dims[d] end
  local b = new_array(dtype, bdims, m * (rest == 0 and 1 or first._size))
  if rest == 0 then
    local bd = b._data
    for k = 1, m do
      local v = elems[k][c]
      if Array.is(v) then
        if v:rank() ~= 0 then
          fail(string.format("Dataset:batch: element %d has shape %s but element 1 has shape []; " ..
                             "batching needs equal shapes", k, shape_str(v._dims)))
        end
        v = v._data[0]
      end
      if type(v) == "boolean" and dtype.name ~= "bool" then v = v and 1 or 0 end
      bd[k - 1] = v
    end
  else
    local size = first._size
    local bytes = size * dtype.size
    local dst = ffi.cast("uint8_t*", b._data)
    for k = 1, m do
      local v = elems[k][c]
      local vd = shape_of(v)
      local same = #vd == rest
      for d = 1, rest do if vd[d] ~= dims[d] then same = false end end
      if not same then
        fail(string.format("Dataset:batch: element %d has shape %s but element 1 has shape %s; " ..
                           "batching needs equal shapes (reshape or pad them in a map)",
                           k, shape_str(vd), shape_str(dims)))
      end
      ffi.copy(dst + (k - 1) * bytes, v._data, bytes)
    end
  end
  return b
end

-- m elements (flat lists of values of spec's dtypes) stacked into a block.
local function stack(elems, m, spec)
  local out = {}
  for c = 1, #spec do
    local dtype = spec[c].dtype
    out[c] = dtype.name == "string" and stack_strings(elems, m, c) or stack_numbers(elems, m, c, dtype)
  end
  return out
end
M.stack = stack

-- next_block() over an element stream: up to n elements per block.
function M.stacked(next_elem, n, spec)
  local done = false
  return function()
    if done then return nil end
    local elems = {}
    while #elems < n do
      local e = next_elem()
      if e == nil then done = true; break end
      elems[#elems + 1] = e
    end
    if #elems == 0 then return nil end
    return stack(elems, #elems, spec)
  end
end

-- The elements of a block stream, one at a time (rows of each block).
function M.elements(next_block)
  local row, i, m = nil, 0, 0
  return function()
    while i >= m do
      local b = next_block()
      if b == nil then return nil end
      row, i, m = row_reader(b), 0, rows(b)
    end
    i = i + 1
    return row(i - 1)
  end
end

-- Whether every component's shape is known in full.
local function fully_defined(spec)
  for _, c in ipairs(spec) do
    if not c.shape then return false end
    for _, d in ipairs(c.shape) do if d < 0 then return false end end
  end
  return true
end
M.fully_defined = fully_defined

-- ds's rows as next_block() (blocks of at most n rows): its own block
-- stream when it has one and its element shapes are known (so no two rows
-- can differ in shape), else its elements stacked.
function M.open(ds, ctx, ahead, n)
  if ds.open_blocks and fully_defined(ds.spec) then return ds.open_blocks(ctx, ahead, n) end
  return M.stacked(ds.open(ctx, ahead and ahead * n), n, ds.spec)
end

-- next() over a block stream giving blocks of exactly n rows (fewer only for
-- the last), joining and splitting the stream's blocks where they do not
-- fall on n. An error of the stream loses the rows gathered for the block.
function M.exact(next_block, n)
  local left, done = nil, false
  return function()
    if done then return nil end
    local parts, have = {}, 0
    if left then parts[1], have, left = left, rows(left), nil end
    while have < n do
      local b = next_block()
      if b == nil then done = true; break end
      parts[#parts + 1] = b
      have = have + rows(b)
    end
    if have == 0 then return nil end
    if have > n then
      local last = parts[#parts]
      local keep = rows(last) - (have - n)
      left = slice(last, keep, have - n)
      parts[#parts] = slice(last, 0, keep)
    end
    return concat(parts)
  end
end

return M
