-- data/transforms.lua — the transformations of a dataset, each a new Dataset
-- over its input: map, filter, batch, shuffle, repeat_, take, skip, cache and
-- prefetch. map and filter run traced functions (data/trace.lua), read ahead
-- when a consumer asks for it (data/prefetch.lua); batch gathers blocks of
-- rows (data/block.lua), over which an elementwise map runs once per block
-- (data/rowwise.lua).
local bit = require("bit")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local dataset = require("moonflow.data.dataset")
local component = require("moonflow.data.component")
local block = require("moonflow.data.block")
local traced = require("moonflow.data.trace")
local prefetch = require("moonflow.data.prefetch")
local rowwise = require("moonflow.data.rowwise")
local args = require("moonflow.args")
local C = core.C
local fail = core.fail

local Dataset, new_dataset = dataset.Dataset, dataset.new
local check_dataset, check_count = dataset.check, dataset.check_count
local shape_str = component.shape_str
local trace, runs = traced.trace, prefetch.runs
local options = args.options

-- ds:batch(n, drop_remainder) and ds:shuffle(buffer_size, seed,
-- reshuffle_each_iteration), or those as an options table.
local BATCH_OPTIONS = {"drop_remainder", empty = true}
local MAP_OPTIONS = {"num_parallel_calls", empty = true}
local SHUFFLE_OPTIONS = {"seed", "reshuffle_each_iteration", empty = true}

-- The elements of parent with the results of traced function t on each:
-- open(ctx, ahead) returns next() -> element, results (a list of nout
-- values), or nil at the end; a run's error is raised. Given `ahead`, the
-- runs may be read ahead on the worker thread (data/prefetch.lua).
local function traced_results(parent, t, nout)
  local nin = #parent.spec
  return function(ctx, ahead, what)
    local tuning = ctx.node[t] or {}
    ctx.node[t] = tuning
    local next_run = runs(ctx, parent.open(ctx, ahead), ahead, t, nin, nout, what, tuning)
    return function()
      local e, ok, r = next_run()
      if e == nil then return nil end
      if not ok then error(r, 0) end
      return e, r
    end
  end
end

-- A count of elements in flight: a positive integer or AUTOTUNE (2).
local function depth_of(n, what, name)
  if type(n) ~= "number" or n % 1 ~= 0 or (n < 1 and n ~= dataset.AUTOTUNE) then
    fail(what .. ": " .. name .. " must be a positive integer or tf.data.experimental.AUTOTUNE, got " ..
         tostring(n))
  end
  return n == dataset.AUTOTUNE and 2 or n
end

-- ds:map(fn, {num_parallel_calls=}): fn gets the element's tensors (a list
-- spread as arguments, a map or single tensor as one) and returns tensors:
-- one, several (a list), or a table (list or map). With num_parallel_calls
-- that many elements are mapped ahead on the worker thread. Batched, a
-- function elementwise along the batch runs once per batch (rowwise.lua).
function Dataset:map(fn, ...)
  check_dataset(self, "Dataset:map")
  local parallel = options("Dataset:map", MAP_OPTIONS, ...).num_parallel_calls
  local depth = parallel ~= nil and depth_of(parallel, "Dataset:map", "num_parallel_calls") or nil
  local t = trace(self, fn, "Dataset:map")
  local open = traced_results(self, t, #t.spec)
  local ds = new_dataset("MapDataset", t.template, t.spec, function(ctx, ahead)
    local next_result = open(ctx, depth and math.max(ahead or 0, depth) or ahead, "Dataset:map")
    return function()
      local e, r = next_result()
      if e == nil then return nil end
      return r
    end
  end)
  if block.fully_defined(self.spec) then ds.open_blocks = rowwise.open_blocks(self, t, depth, "Dataset:map") end
  return ds
end

-- ds:filter(pred): keeps the elements for which pred (traced like map)
-- returns true; pred must return a scalar bool tensor.
function Dataset:filter(pred)
  check_dataset(self, "Dataset:filter")
  local t = trace(self, pred, "Dataset:filter")
  local spec = t.spec
  if type(t.template) ~= "number" or spec[1].dtype.name ~= "bool" or
     (spec[1].shape and #spec[1].shape ~= 0) then
    fail("Dataset:filter: the predicate must return a scalar bool tensor, got " ..
         (type(t.template) == "number" and (spec[1].dtype.name .. " of shape " .. shape_str(spec[1].shape))
          or "a table") .. " (use tf.equal, tf.less, … and reduce to a scalar)")
  end
  local open = traced_results(self, t, 1)
  return new_dataset("FilterDataset", self.template, self.spec, function(ctx, ahead)
    local next_result = open(ctx, ahead, "Dataset:filter")
    return function()
      while true do
        local e, r = next_result()
        if e == nil then return nil end
        local keep = r[1]
        if type(keep) ~= "boolean" then
          fail("Dataset:filter: the predicate gave a non-scalar value; reduce it to a scalar bool")
        end
        if keep then return e end
      end
    end
  end)
end

-- ds:batch(n, {drop_remainder=}): stacks n consecutive elements along a new
-- first axis (the last batch may be smaller unless drop_remainder), from the
-- blocks of rows its input streams (data/block.lua).
function Dataset:batch(n, ...)
  check_dataset(self, "Dataset:batch")
  if type(n) ~= "number" or n % 1 ~= 0 or n < 1 then
    fail("Dataset:batch: batch_size must be a positive integer, got " .. tostring(n))
  end
  local drop = false
  if options("Dataset:batch", BATCH_OPTIONS, ...).drop_remainder then drop = true end
  local spec = {}
  for i, c in ipairs(self.spec) do
    spec[i] = {dtype = c.dtype, shape = c.shape and {drop and n or -1, unpack(c.shape)} or nil}
  end
  local parent, rows = self, block.rows
  return new_dataset("BatchDataset", self.template, spec, function(ctx, ahead)
    local next_block = block.exact(block.open(parent, ctx, ahead, n), n)
    return function()
      local b = next_block()
      if b == nil or (drop and rows(b) < n) then return nil end
      return b
    end
  end)
end

-- Random numbers for shuffle: xorshift32, reproducible from a seed.
local function mix(a, b)
  local h = bit.tobit(a)
  h = bit.bxor(h, bit.tobit(b) + 0x9e3779b9 + bit.lshift(h, 6) + bit.rshift(h, 2))
  h = bit.tobit(h * 0x85ebca6b % 4294967296)
  h = bit.bxor(h, bit.rshift(h, 13))
  return h ~= 0 and h or 0x6d2b79f5
end
local function xorshift(seed)
  local s = seed
  return function(n)  -- an integer in [0, n)
    s = bit.bxor(s, bit.lshift(s, 13))
    s = bit.bxor(s, bit.rshift(s, 17))
    s = bit.bxor(s, bit.lshift(s, 5))
    return math.floor((s % 4294967296) / 4294967296 * n)
  end
end
-- Shuffles built with neither their own seed nor a graph seed so far.
local unseeded = 0

-- ds:shuffle(buffer_size, {seed=, reshuffle_each_iteration=true}): TensorFlow's
-- buffered shuffle: fill a buffer, emit a random entry and refill its slot.
-- With a seed the orders are reproducible; each new pass over the dataset
-- (an initializer run, a repeat) draws a new order unless
-- reshuffle_each_iteration = false.
function Dataset:shuffle(buffer_size, ...)
  check_dataset(self, "Dataset:shuffle")
  if type(buffer_size) ~= "number" or buffer_size % 1 ~= 0 or buffer_size < 1 then
    fail("Dataset:shuffle: buffer_size must be a positive integer, got " .. tostring(buffer_size))
  end
  local opts = options("Dataset:shuffle", SHUFFLE_OPTIONS, ...)
  local reshuffle = opts.reshuffle_each_iteration ~= false
  local seed = opts.seed
  if seed == nil then
    local gs = tonumber(C.mf_graph_seed(G.get_default_graph().ptr))
    if gs >= 0 then
      seed = gs
    else
      unseeded = unseeded + 1
      seed = math.floor((os.time() % 1000003) * 7919 + os.clock() * 1e6) + unseeded
    end
  end
  local base = mix(seed % 4294967296, 0x5eed)
  local parent = self
  local ds
  -- next() over next_in's values shuffled, this pass's order.
  local function shuffled(ctx, next_in)
    local st = ctx.node[ds] or {passes = 0}
    ctx.node[ds] = st
    local pass = reshuffle and st.passes or 0
    st.passes = st.passes + 1
    local rand = xorshift(mix(base, pass))
    local buf, exhausted = {}, false
    return function()
      while not exhausted and #buf < buffer_size do
        local e = next_in()
        if e == nil then exhausted = true else buf[#buf + 1] = e end
      end
      local n = #buf
      if n == 0 then return nil end
      local j = rand(n) + 1
      local e = buf[j]
      local nxt = not exhausted and next_in() or nil
      if nxt ~= nil then
        buf[j] = nxt
      else
        exhausted = true
        buf[j] = buf[n]
        buf[n] = nil
      end
      return e
    end
  end
  ds = new_dataset("ShuffleDataset", self.template, self.spec, function(ctx, ahead)
    return shuffled(ctx, parent.open(ctx, ahead))
  end)
  if parent.open_rows then
    -- Blocks: the rows' indices shuffled (the elements' order), their rows gathered.
    ds.open_blocks = function(ctx, _, n)
      local arrays = parent.open_rows(ctx)
      local count, i = arrays[1]._dims[1], 0
      local next_row = shuffled(ctx, function()
        if i >= count then return nil end
        i = i + 1
        return i - 1
      end)
      local gather = block.gatherer(arrays)
      return function()
        local rows = {}
        for k = 1, n do
          local r = next_row()
          if r == nil then break end
          rows[k] = r
        end
        if #rows == 0 then return nil end
        return gather(rows)
      end
    end
  end
  return ds
end

-- ds:repeat_(count): the dataset count times (nil or -1: forever). Lua
-- reserves `repeat`; ds["repeat"] works too.
function Dataset:repeat_(count)
  check_dataset(self, "Dataset:repeat_")
  if count == nil then count = -1 end
  check_count(count, "Dataset:repeat_", true)
  local parent = self
  -- next() over the passes: open_pass() starts one (elements or blocks).
  local function passes(open_pass)
    local pass, next_in, produced = 0, nil, false
    return function()
      while true do
        if next_in == nil then
          if count >= 0 and pass >= count then return nil end
          pass = pass + 1
          produced = false
          next_in = open_pass()
        end
        local e = next_in()
        if e ~= nil then produced = true; return e end
        next_in = nil
        -- An empty pass would repeat forever without producing anything.
        if not produced then return nil end
      end
    end
  end
  local ds = new_dataset("RepeatDataset", self.template, self.spec, function(ctx, ahead)
    return passes(function() return parent.open(ctx, ahead) end)
  end)
  ds.open_blocks = function(ctx, ahead, n)
    return passes(function() return block.open(parent, ctx, ahead, n) end)
  end
  return ds
end
Dataset["repeat"] = Dataset.repeat_

-- ds:take(n): the first n elements (-1: all).
function Dataset:take(n)
  check_dataset(self, "Dataset:take")
  check_count(n, "Dataset:take", true)
  local parent = self
  return new_dataset("TakeDataset", self.template, self.spec, function(ctx, ahead)
    if ahead and n >= 0 then ahead = math.max(math.min(ahead, n), 1) end
    local next_in, k = parent.open(ctx, ahead), 0
    return function()
      if n >= 0 and k >= n then return nil end
      k = k + 1
      return next_in()
    end
  end)
end

-- ds:skip(n): all but the first n elements (-1: skips everything).
function Dataset:skip(n)
  check_dataset(self, "Dataset:skip")
  check_count(n, "Dataset:skip", true)
  local parent = self
  return new_dataset("SkipDataset", self.template, self.spec, function(ctx, ahead)
    local next_in, skipped = parent.open(ctx, ahead), false
    return function()
      if not skipped then
        skipped = true
        local k = 0
        while n < 0 or k < n do
          if next_in() == nil then return nil end
          k = k + 1
        end
      end
      return next_in()
    end
  end)
end

-- ds:cache(): the first complete pass is kept in memory (per iterator and
-- session); later passes replay it without running the pipeline above.
-- A pass cut short (take, a re-initialization) is not kept.
function Dataset:cache(filename)
  check_dataset(self, "Dataset:cache")
  if filename ~= nil and filename ~= "" then
    fail("Dataset:cache: only the in-memory cache is supported; call ds:cache() without a filename")
  end
  local parent = self
  local ds
  ds = new_dataset("CacheDataset", self.template, self.spec, function(ctx, ahead)
    local st = ctx.node[ds] or {}
    ctx.node[ds] = st
    if st.complete then
      local list, i = st.complete, 0
      return function() i = i + 1; return list[i] end
    end
    local next_in, recorded = parent.open(ctx, ahead), {}
    return function()
      local e = next_in()
      if e == nil then
        if recorded then st.complete = recorded; recorded = nil end
        return nil
      end
      if recorded then
        for _, v in ipairs(e) do if type(v) == "table" then v._kept = true end end
        recorded[#recorded + 1] = e
      end
      return e
    end
  end)
  return ds
end

-- ds:prefetch(n): keeps the runs of the traced map and filter functions
-- upstream n elements ahead on a worker thread (see data/prefetch.lua);
-- AUTOTUNE reads 2 ahead. Elements pass through unchanged.
function Dataset:prefetch(n)
  check_dataset(self, "Dataset:prefetch")
  local depth = depth_of(n, "Dataset:prefetch", "buffer_size")
  local parent = self
  local ds = new_dataset("PrefetchDataset", self.template, self.spec, function(ctx, ahead)
    return parent.open(ctx, math.max(ahead or 0, depth))
  end)
  ds.open_blocks = function(ctx, ahead, n_rows)  -- (depth counts rows here)
    return block.open(parent, ctx, math.max(ahead or 0, math.ceil(depth / n_rows)), n_rows)
  end
  return ds
end

return Dataset
