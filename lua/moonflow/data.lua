-- data.lua — tf.data: Dataset input pipelines and their iterators.
--
-- Design. A Dataset is a Lua object describing a pipeline (sources and
-- transformations); an iterator runs it once per session. The elements a
-- pipeline produces are host values (tf.Array, or Lua numbers and booleans
-- for scalars), and they reach the graph as feeds:
--   * `it:get_next()` builds one Placeholder per element component (named
--     IteratorGetNext…) and registers them, with the iterator, on the graph;
--   * Session:run (and make_callable) call the graph's `_before_run` /
--     `_wrap_callable` hook (two lines in session.lua) with the run's fetches
--     and targets. The hook looks up, memoized per op, which get_next groups
--     and iterator initializers the fetched ops depend on (through data and
--     control inputs, so `train_op` reaches the get_next behind its loss),
--     restarts the iterators whose initializer runs, pulls one element per
--     get_next group the run needs, and adds the element to the run's feeds.
-- So a run that needs get_next advances the iterator once, a run that does
-- not leaves it alone, nothing is looked at per run beyond one table lookup
-- per fetch, and no data ever becomes a graph constant: a 100 MB array goes to
-- the kernels zero-copy as a fed tf.Array, not into a Const op.
--
-- Why not a C iterator op with per-session state: the elements come from Lua
-- (generators, CSV rows, traced map/filter functions), so a C kernel would have
-- to call back into Lua mid-run, which LuaJIT forbids from JIT-compiled
-- callers ("bad callback") and which could not raise errors across the C
-- executor. Feeding keeps the executor untouched and plans cached (the fed
-- ports are the same every step).
--
-- The work per element stays in C where it is bulk: slicing rows and stacking
-- batches are memcpy (ffi.copy) into one allocation per component, and map and
-- filter functions are traced once into a private graph and run through a
-- prepared callable (one C call per element). Iterator state is per (iterator,
-- session): two sessions iterate independently, like variables.
--
-- prefetch(n): LuaJIT has one thread, and Lua code (sources, generators,
-- slicing, batching, shuffling) runs only on it. The bulk of a pipeline's
-- work, though, is usually its traced map and filter functions, and those run
-- in C: prefetch runs them ahead on a worker thread. Every dataset's
-- open(ctx, ahead) passes on `ahead`, how many of its elements its consumer
-- wants in flight (prefetch asks for n; batch(b) asks its input for n*b;
-- shuffle, repeat, take, skip, cache and filter pass it on). A map or filter
-- given `ahead` reads that many elements ahead of its consumer: it pulls the
-- raw input elements (Lua, memcpy) at once and submits the runs of its
-- traced function to its private session's worker thread
-- (C.mf_callable_run_async, src/async.c), one job per element, run in order;
-- handing an element on waits for its job (usually long finished: it ran
-- while the training step did). So the worker runs exactly the traced
-- functions' C kernels; everything else stays on the calling thread, and a
-- pipeline without map or filter is passed through. Results are those of
-- the synchronous pipeline, element for element: the private session runs the
-- same jobs in the same order, an error (of the function, or of the input
-- pulled ahead, after which nothing more is read ahead until it is handed on)
-- is raised at the element it belongs to, and the end likewise. Work read
-- ahead but never used (a take() that stops, a re-initialization, which
-- cancels the jobs not yet started) has still advanced the stateful ops of
-- the function (random ops), as in TensorFlow. A function with tf.lua_func or
-- tf.Print calls back into Lua, so it runs on the calling thread, unprefetched.
local ffi = require("ffi")
local bit = require("bit")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local C = core.C

return function(tf, ops)
  local data = tf.data or {}
  tf.data = data
  data.experimental = data.experimental or {}
  data.experimental.AUTOTUNE = -1

  -- Structures ------------------------------------------------------------------
  -- An element is kept flat (a list of components); its structure is a
  -- template: a number (the component's index) or a table of templates with
  -- the keys of the structure given (a list stays a list, a map a map).
  local function pack(template, flat)
    if type(template) == "number" then return flat[template] end
    local out = {}
    for k, v in pairs(template) do out[k] = pack(v, flat) end
    return out
  end

  local function is_map(t)
    for k in pairs(t) do if type(k) ~= "number" then return true end end
    return false
  end

  -- Whether a plain Lua table is a value (nested numbers or booleans) rather
  -- than a structure of components.
  local function is_value_table(t)
    local v = t
    while type(v) == "table" and getmetatable(v) == nil and not is_map(v) do v = v[1] end
    return type(v) == "number" or type(v) == "boolean" or (v == nil and next(t) == nil)
  end

  local function is_leaf(x)
    return Array.is(x) or G.is_tensor(x) or type(x) ~= "table" or is_value_table(x)
  end

  -- The keys of a structure in a fixed order: list positions, then names
  -- sorted (as TensorFlow orders a dict's components).
  local function ordered_keys(t)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
      if type(a) == type(b) then return a < b end
      return type(a) == "number"
    end)
    return keys
  end

  -- Flattens `value` into `flat`; returns its template.
  local function flatten(value, flat)
    if is_leaf(value) then
      flat[#flat + 1] = value
      return #flat
    end
    local template = {}
    for _, k in ipairs(ordered_keys(value)) do template[k] = flatten(value[k], flat) end
    return template
  end

  -- Calls fn with an element given as its structure: a list spreads into
  -- arguments (as TensorFlow spreads tuples), a map or single value is one.
  local function call_structured(fn, template, values)
    local args = pack(template, values)
    if type(template) == "table" and not is_map(template) then return fn(unpack(args, 1, #template)) end
    return fn(args)
  end

  local function shape_str(shape)
    if shape == nil then return "<unknown>" end
    return "[" .. table.concat(shape, ",") .. "]"
  end

  -- A row of a sliced array, not copied yet: batch copies it straight from
  -- the source into the batch, anything else copies it into its own Array
  -- first (materialize). _data points into the source, which _keep holds.
  local Row = {}

  -- Arrays made per element or batch own C memory the Lua collector cannot
  -- see, so a pipeline would leave dead batches piling up, and each new one
  -- would fault in fresh pages (a 100 KB batch cost 80 us that way). So, as
  -- session.lua does for fetched results, count the bytes and finish a
  -- collection once they pass both 4 MB and twice the Lua heap; and when the
  -- collector finds such an array dead and nobody else holds its value
  -- (refcount 1: no session, fetch or variable kept it), its buffer goes to a
  -- pool (per dtype and shape) that the next array of that shape reuses. Every
  -- user of new_array overwrites all its bytes.
  local unseen_bytes = 0
  local pool = {}            -- "dtype:d1,d2" -> list of mf_tensor* (plain, no finalizer)
  local POOL_MAX = 64
  local tensor_ptr = ffi.typeof("mf_tensor*")
  local function pool_key(dtype, dims) return dtype.name .. ":" .. table.concat(dims, ",") end
  local function recycler(key)
    return function(p)
      local list = pool[key]
      if C.mf_tensor_refcount(p) == 1 and (not list or #list < POOL_MAX) then
        if not list then list = {}; pool[key] = list end
        list[#list + 1] = ffi.cast(tensor_ptr, p)
      else
        C.mf_tensor_release(p)
      end
    end
  end
  local recyclers = {}
  local function new_array(dtype, dims, size)
    local key = pool_key(dtype, dims)
    local list = pool[key]
    local a
    if list and #list > 0 then
      local p = list[#list]
      list[#list] = nil
      a = Array.wrap(p)
    else
      unseen_bytes = unseen_bytes + size * dtype.size
      if unseen_bytes >= 4 * 2 ^ 20 and unseen_bytes >= 2048 * collectgarbage("count") then
        unseen_bytes = 0
        collectgarbage()
      end
      a = Array.new(dtype, dims)
    end
    local r = recyclers[key]
    if not r then r = recycler(key); recyclers[key] = r end
    ffi.gc(a.ptr, r)
    a._pool_key = key
    return a
  end

  -- Without waiting for the collector: an array of new_array that an iterator
  -- fed to a run is dead once the run is over, unless a cache keeps it
  -- (_kept) or someone else holds its value (refcount > 1: a fetch of
  -- get_next, a variable assigned from it). The iterator hands those back at
  -- its next step; the Lua object is emptied so that no stale use goes unseen.
  local function give_back(a)
    if a._kept or a.ptr == nil or C.mf_tensor_refcount(a.ptr) ~= 1 then return end
    local list = pool[a._pool_key]
    if not list then list = {}; pool[a._pool_key] = list end
    if #list >= POOL_MAX then return end
    local p = a.ptr
    ffi.gc(p, nil)
    list[#list + 1] = ffi.cast(tensor_ptr, p)
    a.ptr, a._data = nil, nil
  end

  local function materialize(v)
    if getmetatable(v) ~= Row then return v end
    local a = new_array(v.dtype, v._dims, v._size)
    ffi.copy(a._data, v._data, v._bytes)
    return a
  end

  local function shape_of(v)
    if Array.is(v) or getmetatable(v) == Row then return v._dims end
    return {}
  end

  -- Whether a concrete shape fits a static one (-1 / nil unknown).
  local function shape_fits(static, dims)
    if static == nil then return true end
    if #static ~= #dims then return false end
    for i, d in ipairs(static) do if d >= 0 and d ~= dims[i] then return false end end
    return true
  end

  local function static_shape(t)
    local s = t:get_shape()
    return s.dims and s:as_list() or nil
  end

  -- A fetched or generated component as a feedable value of `dtype`.
  local function component(v, dtype, what)
    if Array.is(v) then
      if v.dtype ~= dtype then
        error(what .. ": got a " .. v.dtype.name .. " value where the dataset declares " .. dtype.name ..
              "; convert it (tf.array(x, tf." .. dtype.name .. "))", 0)
      end
      return v
    end
    if type(v) == "number" then
      if dtype.name == "bool" then error(what .. ": got a number for a bool component", 0) end
      return v
    end
    if type(v) == "boolean" then
      if dtype.name ~= "bool" then return v and 1 or 0 end
      return v
    end
    if type(v) == "table" then return Array.from(v, dtype) end
    error(what .. ": cannot use a " .. type(v) .. " as a tensor value (use numbers, booleans, " ..
          "nested tables or tf.Array)", 0)
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
  local unseeded = 0

  -- Datasets ---------------------------------------------------------------------
  -- Fields: template (the element structure), spec (per component {dtype=,
  -- shape=}), open(ctx) returning next() (the next flat element, or nil at the
  -- end). ctx belongs to one iterator in one session: ctx.session, ctx.feeds
  -- (the feeds of the run that started the epoch), ctx.node[ds] (state a
  -- dataset keeps across epochs: caches, shuffle counters).
  local Dataset = {}
  Dataset.__index = function(ds, k)
    if k == "output_types" then return pack(ds.template, (function()
      local t = {}
      for i, c in ipairs(ds.spec) do t[i] = c.dtype end
      return t
    end)()) end
    if k == "output_shapes" then return pack(ds.template, (function()
      local t = {}
      for i, c in ipairs(ds.spec) do t[i] = G.TensorShape.new(c.shape) end
      return t
    end)()) end
    return Dataset[k]
  end
  data.Dataset = Dataset

  local function new_dataset(kind, template, spec, open)
    return setmetatable({kind = kind, template = template, spec = spec, open = open}, Dataset)
  end

  function Dataset:__tostring()
    local parts = {}
    for i, c in ipairs(self.spec) do parts[i] = c.dtype.name .. " " .. shape_str(c.shape) end
    return "<moonflow.Dataset " .. self.kind .. ": " .. table.concat(parts, ", ") .. ">"
  end

  local function check_dataset(ds, what)
    if getmetatable(ds) ~= Dataset then
      error(what .. ": call it as a method (ds:" .. what:match("[%w_]+$") .. "(...))", 3)
    end
  end

  local function check_count(n, what, allow_negative)
    if type(n) ~= "number" or n % 1 ~= 0 or (n < 0 and not allow_negative) then
      error(what .. ": expected a" .. (allow_negative and "n" or " non-negative") .. " integer count, got " ..
            tostring(n), 3)
    end
  end

  -- Dataset.from_tensor_slices(x | {x, y} | {a = x}) -----------------------------
  -- Components are tf.Array, nested Lua tables of numbers (float32; bool for
  -- booleans) or tensors (evaluated when the iterator starts, with the feeds of
  -- that run: feed a placeholder when running it.initializer). Element i is row
  -- i of every component.
  function Dataset.from_tensor_slices(value)
    if value == nil then error("Dataset.from_tensor_slices: expected an array or a table of arrays", 2) end
    if value == Dataset then
      error("Dataset.from_tensor_slices is a function: call it with a dot, not a colon", 2)
    end
    local flat = {}
    local template = flatten(value, flat)
    if #flat == 0 then error("Dataset.from_tensor_slices: the structure has no components", 2) end
    local spec, rows = {}, nil
    for i, v in ipairs(flat) do
      local dtype, shape
      if G.is_tensor(v) then
        dtype, shape = v.dtype, static_shape(v)
      else
        if not Array.is(v) then
          if type(v) ~= "table" then
            error("Dataset.from_tensor_slices: component " .. i .. " is a " .. type(v) ..
                  "; slicing needs an array of rank >= 1", 2)
          end
          v = Array.from(v)
          flat[i] = v
        end
        dtype, shape = v.dtype, v:shape()
      end
      if shape and #shape == 0 then
        error("Dataset.from_tensor_slices: component " .. i .. " is a scalar; slicing needs rank >= 1", 2)
      end
      if shape and shape[1] >= 0 then
        if rows and rows ~= shape[1] then
          error(string.format("Dataset.from_tensor_slices: components have different first dimensions " ..
                              "(%d and %d); every component needs one row per element", rows, shape[1]), 2)
        end
        rows = shape[1]
      end
      local elem = nil
      if shape then elem = {unpack(shape, 2)} end
      spec[i] = {dtype = dtype, shape = elem}
    end
    local has_tensors = false
    for _, v in ipairs(flat) do if G.is_tensor(v) then has_tensors = true end end
    return new_dataset("TensorSliceDataset", template, spec, function(ctx)
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
              error("Dataset.from_tensor_slices: tensor " .. v.name .. " evaluated to a scalar; slicing needs rank >= 1", 0)
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
            error(string.format("Dataset.from_tensor_slices: components have different first dimensions " ..
                                "(%d and %d)", n, r), 0)
          end
          n = r
        end
      end
      local n = values[1]._dims[1]
      local ncomp = #values
      -- Per component: the row's shape, bytes and element count.
      local row_dims, row_bytes, row_size, dtypes, ptrs = {}, {}, {}, {}, {}
      for i, x in ipairs(values) do
        row_dims[i] = {unpack(x._dims, 2)}
        row_size[i] = x._size / math.max(n, 1)
        row_bytes[i] = row_size[i] * x.dtype.size
        dtypes[i] = x.dtype
        ptrs[i] = ffi.cast("uint8_t*", x._data)
      end
      local i = 0
      return function()
        if i >= n then return nil end
        local elem = {}
        for c = 1, ncomp do
          local x = values[c]
          if #row_dims[c] == 0 then
            local v = x._data[i]
            if dtypes[c].name ~= "bool" then v = tonumber(v) end
            elem[c] = v
          else
            elem[c] = setmetatable({dtype = dtypes[c], _dims = row_dims[c], _size = row_size[c],
                                    _bytes = row_bytes[c], _data = ptrs[c] + i * row_bytes[c],
                                    _keep = x}, Row)
          end
        end
        i = i + 1
        return elem
      end
    end)
  end

  -- Dataset.range(stop) / (start, stop[, step]): int64 scalars --------------------
  function Dataset.range(a, b, step)
    local start, stop = 0, a
    if b ~= nil then start, stop = a, b end
    step = step or 1
    for _, v in ipairs({start, stop, step}) do
      if type(v) ~= "number" or v % 1 ~= 0 then
        error("Dataset.range: expected integers (stop) or (start, stop[, step]), got " .. tostring(v), 2)
      end
    end
    if step == 0 then error("Dataset.range: step must not be 0", 2) end
    return new_dataset("RangeDataset", 1, {{dtype = tf.int64, shape = {}}}, function()
      local v = start
      return function()
        if (step > 0 and v >= stop) or (step < 0 and v <= stop) then return nil end
        local out = v
        v = v + step
        return {out}
      end
    end)
  end

  -- Dataset.from_generator(fn, dtypes, shapes): fn() is called at the start of
  -- each epoch and returns an iterator (a function returning the next element,
  -- nil at the end, e.g. coroutine.wrap(...)) or a list of elements. dtypes is
  -- a dtype or a structure of them; shapes (optional) the same structure of
  -- shapes (-1 unknown dims; nil unknown shape).
  function Dataset.from_generator(fn, dtypes, shapes)
    if type(fn) ~= "function" then
      error("Dataset.from_generator(fn, dtypes, shapes): fn must be a function returning an iterator " ..
            "(a function giving one element per call, nil at the end) or a list", 2)
    end
    if dtypes == nil then error("Dataset.from_generator: dtypes is required (e.g. tf.float32 or {tf.float32, tf.int32})", 2) end
    local flat_types, flat_shapes = {}, {}
    local template
    local function walk(t, s)
      if getmetatable(t) == core.DType or type(t) == "string" then
        flat_types[#flat_types + 1] = core.as_dtype(t, "Dataset.from_generator")
        if s ~= nil and (type(s) ~= "table" or (#s == 0 and next(s) ~= nil and getmetatable(s) == nil)) then
          if getmetatable(s) ~= G.TensorShape then
            error("Dataset.from_generator: shapes must mirror dtypes with a shape list per dtype", 3)
          end
        end
        if getmetatable(s) == G.TensorShape then s = s.dims end
        flat_shapes[#flat_types] = s
        return #flat_types
      end
      if type(t) ~= "table" then
        error("Dataset.from_generator: dtypes must be a dtype or a table of dtypes, got " .. tostring(t), 3)
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
          error(what .. ": the generator gave a " .. type(v) .. " where the dtypes declare a structure", 0)
        end
        local function take(t, x)
          if type(t) == "number" then flat[t] = x; return end
          for k, sub in pairs(t) do
            if x[k] == nil then error(what .. ": the generator's element lacks component " .. tostring(k), 0) end
            take(sub, x[k])
          end
        end
        take(template, v)
      end
      for i, c in ipairs(spec) do
        local x = component(flat[i], c.dtype, what)
        if not shape_fits(c.shape, shape_of(x)) then
          error(string.format("%s: the generator gave component %d of shape %s where shapes says %s",
                              what, i, shape_str(shape_of(x)), shape_str(c.shape)), 0)
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
        error(what .. ": fn() returned a " .. type(it) .. "; return an iterator function or a list", 0)
      end
      return function()
        local v = it()
        if v == nil then return nil end
        return convert(v)
      end
    end)
  end

  -- Traced functions (map, filter) -------------------------------------------------
  -- fn is called once with placeholders standing for an element, in a private
  -- graph (it inherits the default graph's random seed); the ops it builds run
  -- per element through a prepared callable of a private session.
  local function trace(ds, fn, what)
    if type(fn) ~= "function" then error(what .. ": expected a function", 3) end
    local outer = G.get_default_graph()
    local g = tf.Graph()
    C.mf_graph_set_seed(g.ptr, C.mf_graph_seed(outer.ptr))
    local args, outs, template = {}, {}, nil
    local ok, err = pcall(g.as_default, g, function()
      for i, c in ipairs(ds.spec) do args[i] = tf.placeholder(c.dtype, c.shape, "arg" .. (i - 1)) end
      local results = {call_structured(fn, ds.template, args)}
      local n = table.maxn(results)
      if n == 0 or (n == 1 and results[1] == nil) then
        error(what .. ": the function returned nothing; return a tensor or a table of tensors", 0)
      end
      local value = n == 1 and results[1] or results
      local flat = {}
      if G.is_tensor(value) or type(value) ~= "table" or Array.is(value) then
        template = flatten(value, flat)
      else
        template = {}
        for _, k in ipairs(ordered_keys(value)) do template[k] = flatten(value[k], flat) end
      end
      for i, v in ipairs(flat) do
        if not G.is_tensor(v) then v = tf.convert_to_tensor(v) end
        if v.graph ~= g then
          error(what .. ": the function returned tensor " .. v.name .. " of another graph; a dataset " ..
                "function runs in its own graph: pass data through the dataset, or build constants inside", 0)
        end
        outs[i] = v
      end
    end)
    if not ok then
      err = tostring(err)
      if err:find("same graph", 1, true) then
        err = err .. "; a dataset function runs in its own graph: pass data through the dataset, " ..
              "or build the constants it needs inside the function"
      end
      if err:sub(1, #what) ~= what then err = what .. ": " .. err end
      error(err, 0)
    end
    local sess = tf.Session(g)
    local call = sess:make_callable(outs, args)
    local spec = {}
    for i, t in ipairs(outs) do spec[i] = {dtype = t.dtype, shape = static_shape(t)} end
    -- For read-ahead (prefetch): the C callable itself (the plan make_callable
    -- made: same signature), unless the function calls back into Lua.
    local async = nil
    if not g._host_ops then
      local feed_ports, fetch_ports = core.ports(math.max(#args, 1)), core.ports(math.max(#outs, 1))
      for i, t in ipairs(args) do feed_ports[i - 1].op, feed_ports[i - 1].index = t.op.ptr, t.value_index end
      for i, t in ipairs(outs) do fetch_ports[i - 1].op, fetch_ports[i - 1].index = t.op.ptr, t.value_index end
      local c = C.mf_session_make_callable(sess.ptr, feed_ports, #args, fetch_ports, #outs, nil, 0, core.status)
      if c == nil then core.check() end
      async = {callable = c, session = sess, args = args, nout = #outs}
    end
    return call, template, spec, sess, async
  end

  -- Read-ahead (see the header): a traced function's runs submitted to the
  -- worker thread of its private session ahead of the consumer.
  local to_lua = require("moonflow.session").to_lua
  data._async_runs = 0  -- jobs submitted to worker threads so far (for tests)
  -- A feed value as an mf_tensor* (and whether it is ours to release), as
  -- Session:make_callable converts it.
  local function feed_value(v, dtype)
    if Array.is(v) then return v.ptr, false end
    if type(v) == "number" or type(v) == "boolean" then
      if dtype.name == "bool" and type(v) ~= "boolean" then error("cannot feed a number to a bool tensor", 0) end
      local ptr = C.mf_tensor_new(dtype.enum, 0, nil, core.status)
      if ptr == nil then core.check() end
      local d = ffi.cast(dtype.ptr_ctype, C.mf_tensor_data(ptr))
      if dtype.name == "bool" then d[0] = v else d[0] = type(v) == "boolean" and (v and 1 or 0) or v end
      return ptr, true
    end
    if type(v) == "table" then return C.mf_tensor_retain(Array.from(v, dtype).ptr), true end
    error("cannot feed a " .. type(v) .. ": use a number, boolean, nested table or tf.Array", 0)
  end

  -- Submits the run of `async` (trace's) over element e; returns the job (a
  -- cdata whose finalizer cancels or waits for it, keeping the fed values
  -- alive until then). Raises what the synchronous run would raise for a bad feed.
  local function submit(async, e, n, feeds, what)
    local args = {}
    for i = 1, n do args[i] = materialize(e[i]) end
    local owned = {}
    for i = 1, n do
      local ok, ptr, own = pcall(feed_value, args[i], async.args[i].dtype)
      if not ok then
        for j = 1, i - 1 do if owned[j] then C.mf_tensor_release(feeds[j - 1]) end end
        error(what .. ": feed for " .. async.args[i].name .. ": " .. tostring(ptr), 0)
      end
      feeds[i - 1], owned[i] = ptr, own
    end
    local job = C.mf_callable_run_async(async.callable, feeds, core.status)
    for i = 1, n do if owned[i] then C.mf_tensor_release(feeds[i - 1]) end end
    if job == nil then core.check() end
    data._async_runs = data._async_runs + 1
    return ffi.gc(job, function(p)
      C.mf_async_free(p)
      args = nil  -- (the upvalue keeps the fed arrays alive until the job is over)
    end)
  end

  -- Waits for a job; its results as Lua values (what the callable returns), or
  -- raises "what: <the run's error>".
  local function finish(job, fetches, nout, what)
    ffi.gc(job, nil)
    local rc = C.mf_async_wait(job, fetches, core.status)
    local msg = rc ~= 0 and ffi.string(C.mf_status_message(core.status)) or nil
    C.mf_async_free(job)
    if msg then error(what .. ": " .. msg, 0) end
    local r = {}
    for i = 1, nout do r[i] = to_lua(fetches[i - 1]) end
    return r
  end

  local function free_job(job)
    if job then
      ffi.gc(job, nil)
      C.mf_async_free(job)
    end
  end

  -- next() over next_in reading `depth` elements ahead: each input element
  -- is submitted at once, and next() returns the oldest as (element, job).
  -- An input error or the input's end is queued in its place and stops the
  -- reading ahead until next() reaches it (then raises it / returns nil, and
  -- the next call reads on, as the synchronous pipeline would call next_in
  -- again). The iterator's restart discards what is queued (ctx.readers).
  local function read_ahead(ctx, next_in, depth, async, n, what)
    local queue, head, tail, stopped = {}, 1, 0, false
    local feeds = core.value_ptrs(math.max(n, 1))
    local function pull()
      local ok, e = pcall(next_in)
      local entry
      if not ok then entry = {err = e}
      elseif e == nil then entry = {finished = true}
      else
        local ok2, job = pcall(submit, async, e, n, feeds, what)
        entry = ok2 and {elem = e, job = job} or {err = job}
      end
      if entry.err or entry.finished then stopped = true end
      tail = tail + 1
      queue[tail] = entry
    end
    local function discard()
      for i = head, tail do free_job(queue[i].job); queue[i] = nil end
      head, tail, stopped = 1, 0, false
    end
    -- Weak: a reader dropped (a finished repeat pass) takes its entry along;
    -- its jobs' finalizers cancel them.
    if ctx.readers then ctx.readers[discard] = true end
    return function()
      local _ = discard
      if head > tail then pull() end
      local entry = queue[head]
      queue[head] = nil
      head = head + 1
      -- Keep `depth` jobs in flight while the consumer works on this one.
      while not stopped and tail - head + 1 < depth do pull() end
      if entry.err ~= nil then stopped = false; error(entry.err, 0) end
      if entry.finished then stopped = false; return nil end
      return entry.elem, entry.job
    end
  end

  local function run_traced(call, elem, n, what)
    local args = {}
    for i = 1, n do args[i] = materialize(elem[i]) end
    local ok, res = pcall(call, unpack(args, 1, n))
    if not ok then error(what .. ": " .. tostring(res), 0) end
    return res
  end

  -- ds:map(fn): fn gets the element's tensors (a list spread as arguments, a
  -- map or single tensor as one) and returns tensors: one, several (a list),
  -- or a table (list or map).
  function Dataset:map(fn)
    check_dataset(self, "Dataset:map")
    local call, template, spec, _, async = trace(self, fn, "Dataset:map")
    local parent, nin, nout = self, #self.spec, #spec
    return new_dataset("MapDataset", template, spec, function(ctx, ahead)
      local next_in = parent.open(ctx, ahead)
      if ahead and async then
        local next_job = read_ahead(ctx, next_in, ahead, async, nin, "Dataset:map")
        local fetches = core.value_ptrs(math.max(nout, 1))
        return function()
          local e, job = next_job()
          if e == nil then return nil end
          return finish(job, fetches, nout, "Dataset:map")
        end
      end
      return function()
        local e = next_in()
        if e == nil then return nil end
        local r = run_traced(call, e, nin, "Dataset:map")
        local out = {}
        for i = 1, nout do out[i] = r[i] end
        return out
      end
    end)
  end

  -- ds:filter(pred): keeps the elements for which pred (traced like map)
  -- returns true; pred must return a scalar bool tensor.
  function Dataset:filter(pred)
    check_dataset(self, "Dataset:filter")
    local call, template, spec, _, async = trace(self, pred, "Dataset:filter")
    if type(template) ~= "number" or spec[1].dtype.name ~= "bool" or
       (spec[1].shape and #spec[1].shape ~= 0) then
      error("Dataset:filter: the predicate must return a scalar bool tensor, got " ..
            (type(template) == "number" and (spec[1].dtype.name .. " of shape " .. shape_str(spec[1].shape))
             or "a table") .. " (use tf.equal, tf.less, … and reduce to a scalar)", 2)
    end
    local parent, nin = self, #self.spec
    return new_dataset("FilterDataset", self.template, self.spec, function(ctx, ahead)
      local next_in = parent.open(ctx, ahead)
      if ahead and async then
        local next_job = read_ahead(ctx, next_in, ahead, async, nin, "Dataset:filter")
        local fetches = core.value_ptrs(1)
        return function()
          while true do
            local e, job = next_job()
            if e == nil then return nil end
            local keep = finish(job, fetches, 1, "Dataset:filter")[1]
            if type(keep) ~= "boolean" then
              error("Dataset:filter: the predicate gave a non-scalar value; reduce it to a scalar bool", 0)
            end
            if keep then return e end
          end
        end
      end
      return function()
        while true do
          local e = next_in()
          if e == nil then return nil end
          local keep = run_traced(call, e, nin, "Dataset:filter")[1]
          if type(keep) ~= "boolean" then
            error("Dataset:filter: the predicate gave a non-scalar value; reduce it to a scalar bool", 0)
          end
          if keep then return e end
        end
      end
    end)
  end

  -- ds:batch(n, {drop_remainder=}): stacks n consecutive elements along a new
  -- first axis (the last batch may be smaller unless drop_remainder).
  function Dataset:batch(n, opts)
    check_dataset(self, "Dataset:batch")
    if type(n) ~= "number" or n % 1 ~= 0 or n < 1 then
      error("Dataset:batch: batch_size must be a positive integer, got " .. tostring(n), 2)
    end
    local drop = false
    if type(opts) == "table" then drop = opts.drop_remainder and true or false
    elseif type(opts) == "boolean" then drop = opts end
    local spec = {}
    for i, c in ipairs(self.spec) do
      spec[i] = {dtype = c.dtype, shape = c.shape and {drop and n or -1, unpack(c.shape)} or nil}
    end
    local parent, ncomp = self, #self.spec
    return new_dataset("BatchDataset", self.template, spec, function(ctx, ahead)
      local next_in = parent.open(ctx, ahead and ahead * n)
      local done = false
      return function()
        if done then return nil end
        local elems = {}
        while #elems < n do
          local e = next_in()
          if e == nil then done = true; break end
          elems[#elems + 1] = e
        end
        local m = #elems
        if m == 0 or (drop and m < n) then return nil end
        local out = {}
        for c = 1, ncomp do
          local dtype = parent.spec[c].dtype
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
                  error(string.format("Dataset:batch: element %d has shape %s but element 1 has shape []; " ..
                                      "batching needs equal shapes", k, shape_str(v._dims)), 0)
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
                error(string.format("Dataset:batch: element %d has shape %s but element 1 has shape %s; " ..
                                    "batching needs equal shapes (reshape or pad them in a map)",
                                    k, shape_str(vd), shape_str(dims)), 0)
              end
              ffi.copy(dst + (k - 1) * bytes, v._data, bytes)
            end
          end
          out[c] = b
        end
        return out
      end
    end)
  end

  -- ds:shuffle(buffer_size, {seed=, reshuffle_each_iteration=true}): TensorFlow's
  -- buffered shuffle: fill a buffer, emit a random entry and refill its slot.
  -- With a seed the orders are reproducible; each new pass over the dataset
  -- (an initializer run, a repeat) draws a new order unless
  -- reshuffle_each_iteration = false.
  function Dataset:shuffle(buffer_size, opts)
    check_dataset(self, "Dataset:shuffle")
    if type(buffer_size) ~= "number" or buffer_size % 1 ~= 0 or buffer_size < 1 then
      error("Dataset:shuffle: buffer_size must be a positive integer, got " .. tostring(buffer_size), 2)
    end
    opts = opts or {}
    if type(opts) == "number" then opts = {seed = opts} end
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
    ds = new_dataset("ShuffleDataset", self.template, self.spec, function(ctx, ahead)
      local st = ctx.node[ds] or {passes = 0}
      ctx.node[ds] = st
      local pass = reshuffle and st.passes or 0
      st.passes = st.passes + 1
      local rand = xorshift(mix(base, pass))
      local next_in = parent.open(ctx, ahead)
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
    end)
    return ds
  end

  -- ds:repeat_(count): the dataset count times (nil or -1: forever). Lua
  -- reserves `repeat`; ds["repeat"] works too.
  function Dataset:repeat_(count)
    check_dataset(self, "Dataset:repeat_")
    if count == nil then count = -1 end
    check_count(count, "Dataset:repeat_", true)
    local parent = self
    return new_dataset("RepeatDataset", self.template, self.spec, function(ctx, ahead)
      local pass, next_in, produced = 0, nil, false
      return function()
        while true do
          if next_in == nil then
            if count >= 0 and pass >= count then return nil end
            pass = pass + 1
            produced = false
            next_in = parent.open(ctx, ahead)
          end
          local e = next_in()
          if e ~= nil then produced = true; return e end
          next_in = nil
          -- An empty pass would repeat forever without producing anything.
          if not produced then return nil end
        end
      end
    end)
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
      error("Dataset:cache: only the in-memory cache is supported; call ds:cache() without a filename", 2)
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
  -- upstream n elements ahead on a worker thread (see the header comment);
  -- AUTOTUNE reads 2 ahead. Elements pass through unchanged.
  function Dataset:prefetch(n)
    check_dataset(self, "Dataset:prefetch")
    if type(n) ~= "number" or n % 1 ~= 0 or (n < 1 and n ~= data.experimental.AUTOTUNE) then
      error("Dataset:prefetch: buffer_size must be a positive integer or tf.data.experimental.AUTOTUNE, got " ..
            tostring(n), 2)
    end
    local parent = self
    local depth = n == data.experimental.AUTOTUNE and 2 or n
    return new_dataset("PrefetchDataset", self.template, self.spec, function(ctx, ahead)
      return parent.open(ctx, math.max(ahead or 0, depth))
    end)
  end

  -- tf.data.experimental.CsvDataset(path | {paths}, dtypes, {header=, field_delim=,
  -- select_cols=}): one element per record, a list of scalars (one per selected
  -- column) of the given dtypes (float32, float64, int32, int64, uint8, bool).
  -- Records are parsed as TensorFlow does with use_quote_delim: a field that
  -- starts with a double quote ends at the matching quote ("" inside stands for
  -- one quote) and may hold the delimiter and newlines. A UTF-8 byte order mark
  -- at the start of a file is skipped. Every value is checked against its
  -- dtype's range: out of range is an error naming the file, line and column,
  -- never a wrapped value. int64 fields are parsed exactly (digits into an
  -- int64_t); one beyond 2^53 is handed on as an int64 tf.Array scalar, which
  -- a Lua number could not hold.
  local INT_RANGE = {
    int32 = {-2147483648, 2147483647},
    uint8 = {0, 255},
  }
  local FLOAT32_OVERFLOW = 3.4028235677973366e38  -- 2^128 - 2^103: rounds to inf as a float
  local INT64_MAX_U = 9223372036854775807ULL
  local EXACT = 2 ^ 53

  -- The digit string's value as an int64, exactly, or nil when out of range.
  local function parse_int64(digits, negative)
    local limit = negative and INT64_MAX_U + 1 or INT64_MAX_U
    local acc = 0ULL
    for i = 1, #digits do
      local d = digits:byte(i) - 48
      if acc > (limit - d) / 10 then return nil end
      acc = acc * 10 + d
    end
    if acc <= EXACT then return negative and -tonumber(acc) or tonumber(acc) end
    local a = Array.new(core.dtypes.int64, {})
    a._data[0] = ffi.cast("int64_t", negative and 0ULL - acc or acc)
    return a
  end

  function data.experimental.CsvDataset(paths, dtypes, opts)
    local what = "CsvDataset"
    if type(paths) == "string" then paths = {paths} end
    if type(paths) ~= "table" or #paths == 0 then error(what .. ": expected a file name or a list of them", 2) end
    if type(dtypes) ~= "table" or #dtypes == 0 then
      error(what .. ": dtypes must be a list with one dtype per column, e.g. {tf.float32, tf.int32}", 2)
    end
    opts = opts or {}
    local delim = opts.field_delim or ","
    if type(delim) ~= "string" or #delim ~= 1 then error(what .. ": field_delim must be one character", 2) end
    if delim == '"' or delim == "\n" or delim == "\r" then
      error(what .. ": field_delim cannot be a double quote or a line break", 2)
    end
    local cols = opts.select_cols
    local spec, template = {}, {}
    for i, d in ipairs(dtypes) do
      d = core.as_dtype(d, what)
      spec[i] = {dtype = d, shape = {}}
      template[i] = i
    end
    if cols and #cols ~= #dtypes then
      error(what .. ": select_cols names " .. #cols .. " columns but dtypes has " .. #dtypes, 2)
    end
    for _, p in ipairs(paths) do
      local f = io.open(p, "rb")
      if not f then error(what .. ": cannot open '" .. tostring(p) .. "': no such file or not readable", 2) end
      f:close()
    end
    -- Leading blanks before an opening quote are skipped unless they are the delimiter.
    local quote_at = (delim == " " or delim == "\t") and '^"' or '^[ \t]*"'

    -- Field `s` (quoted: whether it was in quotes) of record `rec`, at the given
    -- line and 0-based column, as a value of dtype d.
    local function parse(field, d, path, line, col, rec)
      local s = field.quoted and field.text or field.text:match("^%s*(.-)%s*$")
      local function bad(why)
        error(string.format("%s: %s line %d, column %d: %s", what, path, line, col, why), 0)
      end
      local function invalid(extra)
        bad(string.format("Field %d in record %d is not a valid %s: %s%s", col, rec, d.name, s, extra or ""))
      end
      if s == "" then bad("the field is empty") end
      if d.name == "bool" then
        local l = s:lower()
        if l == "true" or l == "1" then return true end
        if l == "false" or l == "0" then return false end
        bad("'" .. s .. "' is not a bool (true, false, 1 or 0)")
      end
      if d.is_integer then
        local sign, digits = s:match("^([+-]?)(%d+)$")
        if not digits then
          if tonumber(s) == nil then bad("'" .. s .. "' is not a number") end
          bad("'" .. s .. "' is not an integer (dtype " .. d.name .. ")")
        end
        local negative = sign == "-"
        if d.name == "int64" then
          local v = parse_int64(digits, negative)
          if v == nil then invalid(" (out of range)") end
          return v
        end
        digits = digits:match("^0*(%d-%d)$")  -- no leading zeros, so the length bounds the value
        local range = INT_RANGE[d.name]
        local v = #digits <= 15 and tonumber(digits) * (negative and -1 or 1) or nil
        if v == nil or v < range[1] or v > range[2] then
          invalid(string.format(" (out of range [%d, %d])", range[1], range[2]))
        end
        return v
      end
      local sign, word = s:lower():match("^%s*([+-]?)(%a+)%s*$")
      if word == "inf" or word == "infinity" then return sign == "-" and -math.huge or math.huge end
      if word == "nan" then return 0 / 0 end
      local v = tonumber(s)
      if v == nil then bad("'" .. s .. "' is not a number") end
      if s:find("^%s*[+-]?0[xX]") then bad("'" .. s .. "' is not a decimal number") end
      if math.abs(v) == math.huge or (d.name == "float32" and math.abs(v) >= FLOAT32_OVERFLOW) then
        invalid(" (out of range)")
      end
      return v
    end

    -- Splits the record starting with `line` into fields ({text=, quoted=});
    -- more() gives the next line when a quoted field runs past the line's end.
    local function split(line, more, where)
      local fields, pos, n = {}, 1, #line
      while true do
        local _, q = line:find(quote_at, pos)
        if q then
          local parts, i = {}, q + 1
          while true do
            local close = line:find('"', i, true)
            if close == nil then
              parts[#parts + 1] = line:sub(i)
              local nxt = more()
              if nxt == nil then error(what .. ": " .. where() .. ": a quoted field is not closed before the end of the file", 0) end
              parts[#parts + 1] = "\n"
              line, i, n = nxt, 1, #nxt
            elseif line:byte(close + 1) == 34 then  -- "" is one quote
              parts[#parts + 1] = line:sub(i, close)
              i = close + 2
            else
              parts[#parts + 1] = line:sub(i, close - 1)
              pos = close + 1
              break
            end
          end
          fields[#fields + 1] = {text = table.concat(parts), quoted = true}
          local after = line:find("[^ \t]", pos) or n + 1
          if delim ~= " " and delim ~= "\t" then pos = after end
          if pos > n then return fields end
          if line:sub(pos, pos) ~= delim then
            error(what .. ": " .. where() .. ": a quoted field must be followed by the delimiter or the end of " ..
                  "the record, found '" .. line:sub(pos, pos) .. "'", 0)
          end
          pos = pos + 1
        else
          local e = line:find(delim, pos, true)
          fields[#fields + 1] = {text = line:sub(pos, (e or n + 1) - 1)}
          if e == nil then return fields end
          pos = e + 1
        end
      end
    end

    local ncol = #dtypes
    return new_dataset("CsvDataset", template, spec, function(ctx)
      local fi, f, path, lineno, record = 0, nil, nil, 0, 0
      local function close()
        if f then f:close(); f = nil end
      end
      -- The end of a file, or a re-initialization mid-epoch, closes it (ctx.readers
      -- holds close weakly; the iterator below keeps it alive).
      if ctx and ctx.readers then ctx.readers[close] = true end
      local function next_line()
        local line = f:read("*l")
        if line == nil then return nil end
        lineno = lineno + 1
        if lineno == 1 and line:sub(1, 3) == "\239\187\191" then line = line:sub(4) end
        return (line:gsub("\r$", ""))
      end
      local function where() return path .. " line " .. lineno end
      return function()
        while true do
          if f == nil then
            fi = fi + 1
            path = paths[fi]
            if path == nil then return nil end
            local err
            f, err = io.open(path, "rb")
            if not f then error(what .. ": cannot open '" .. path .. "': " .. tostring(err), 0) end
            lineno, record = 0, 0
            if opts.header then
              local h = next_line()
              if h then split(h, next_line, where) end
            end
          end
          local line = next_line()
          if line == nil then
            close()
          elseif line:match("%S") then
            local first = lineno
            local fields = split(line, next_line, where)
            record = record + 1
            local elem = {}
            if cols then
              for i, c in ipairs(cols) do
                local s = fields[c + 1]
                if s == nil then
                  error(string.format("%s: %s line %d has %d fields; select_cols asks for column %d",
                                      what, path, first, #fields, c), 0)
                end
                elem[i] = parse(s, spec[i].dtype, path, first, c, record)
              end
            else
              if #fields ~= ncol then
                error(string.format("%s: %s line %d has %d fields, expected %d (one per dtype)",
                                    what, path, first, #fields, ncol), 0)
              end
              for i = 1, ncol do elem[i] = parse(fields[i], spec[i].dtype, path, first, i - 1, record) end
            end
            return elem
          end
        end
      end
    end)
  end

  -- Iterators ---------------------------------------------------------------------
  local Iterator = {}
  Iterator.__index = Iterator
  data.Iterator = Iterator

  local function graph_data(g)
    local d = g._data
    if not d then
      d = {reach = setmetatable({}, {__mode = "k"}), marks = {}}
      g._data = d
      g._before_run = function(sess, tensors, targets, feeds) return data._before_run(g, sess, tensors, targets, feeds) end
      g._wrap_callable = function(sess, fetches, feed_list, tensors, targets)
        return data._wrap_callable(g, sess, fetches, feed_list, tensors, targets)
      end
    end
    return d
  end

  local function make_iterator(ds, one_shot, what)
    check_dataset(ds, what)
    local g = G.get_default_graph()
    if g._parent then error(what .. ": build iterators outside tf.cond / tf.while_loop functions", 3) end
    local it = setmetatable({dataset = ds, one_shot = one_shot, graph = g, origin = core.user_location(),
                             states = setmetatable({}, {__mode = "k"})}, Iterator)
    local d = graph_data(g)
    if not one_shot then
      it.initializer = G.build{"NoOp", name = "MakeIterator"}
      d.marks[it.initializer] = {kind = "init", iterator = it}
    end
    it.name = one_shot and "OneShotIterator" or "Iterator"
    return it
  end

  function Dataset:make_one_shot_iterator() return make_iterator(self, true, "Dataset:make_one_shot_iterator") end
  function Dataset:make_initializable_iterator() return make_iterator(self, false, "Dataset:make_initializable_iterator") end

  function Iterator:__tostring() return "<moonflow.Iterator over " .. tostring(self.dataset) .. ">" end

  -- it:get_next(): the element's tensors, with the dataset's structure. Each
  -- run that needs them advances the iterator once (per get_next call).
  function Iterator:get_next(name)
    if getmetatable(self) ~= Iterator then error("Iterator:get_next: call it as a method (it:get_next())", 2) end
    local g = self.graph
    if G.get_default_graph():outermost() ~= g then
      error("Iterator:get_next: the iterator belongs to another graph; call get_next with its graph as default", 2)
    end
    local phs = {}
    g:as_default(function()
      for i, c in ipairs(self.dataset.spec) do
        phs[i] = tf.placeholder(c.dtype, c.shape, name or "IteratorGetNext")
      end
    end)
    local group = {kind = "next", iterator = self, tensors = phs}
    local d = graph_data(g)
    for _, t in ipairs(phs) do d.marks[t.op] = group end
    return pack(self.dataset.template, phs)
  end

  -- The marks (get_next groups, initializers) an op depends on: nil or a list.
  local function reach(d, op)
    local r = d.reach[op]
    if r ~= nil then return r or nil end
    local found, seen = nil, nil
    local function add(list)
      if not list then return end
      if found == nil then found = list; return end
      if not seen then
        local copy = {}
        seen = {}
        for i, m in ipairs(found) do copy[i] = m; seen[m] = true end
        found = copy
      end
      for _, m in ipairs(list) do
        if not seen[m] then seen[m] = true; found[#found + 1] = m end
      end
    end
    local mark = d.marks[op]
    if mark then add({mark}) end
    local p = op.ptr
    local g = op.graph
    for i = 0, C.mf_op_num_inputs(p) - 1 do
      local inp = C.mf_op_input(p, i)
      add(reach(d, g:_op(inp.op)))
    end
    for i = 0, C.mf_op_num_control_inputs(p) - 1 do add(reach(d, g:_op(C.mf_op_control_input(p, i)))) end
    d.reach[op] = found or false
    return found
  end

  local function end_of_sequence(it)
    local how = it.one_shot and
      "a one-shot iterator does not restart: use ds:make_initializable_iterator() and run it.initializer " ..
      "for another epoch, or ds:repeat_()" or
      "catch it with pcall to end the epoch, and run it.initializer to start another"
    error("OutOfRangeError: End of sequence: iterator '" .. it.name .. "' (created at " .. it.origin ..
          ") has no more elements; " .. how, 0)
  end

  -- (Re)starts the iterator's epoch in this session.
  local function restart(it, sess, feeds)
    local st = it.states[sess]
    if not st then
      st = {node = {}}
      it.states[sess] = st
    end
    if st.readers then  -- the last epoch's work read ahead: cancel it
      for discard in pairs(st.readers) do discard() end
    end
    st.next, st.done = nil, false
    local ctx = {session = sess, feeds = feeds, node = st.node, readers = setmetatable({}, {__mode = "k"})}
    st.readers = ctx.readers
    st.next = it.dataset.open(ctx)
    ctx.feeds = nil
    return st
  end

  local function pull(it, sess)
    local st = it.states[sess]
    if not st or not st.next then
      if not it.one_shot or (st and st.done) then
        if st and st.done then end_of_sequence(it) end
        error("FailedPreconditionError: GetNext() failed because the iterator has not been initialized. " ..
              "Ensure that you have run the initializer operation for this iterator before getting the " ..
              "next element: sess:run(it.initializer) (iterator created at " .. it.origin .. ")", 0)
      end
      st = restart(it, sess, nil)
    end
    if st.done then end_of_sequence(it) end
    local fed = st.fed
    if fed then
      for i = 1, #fed do give_back(fed[i]) end
      st.fed = nil
    end
    local e = st.next()
    if e == nil then
      st.done = true
      end_of_sequence(it)
    end
    return e
  end

  local function collect(d, list, out, seen)
    for _, x in ipairs(list) do
      local op = G.is_tensor(x) and x.op or x
      local r = reach(d, op)
      if r then
        for _, m in ipairs(r) do
          if not seen[m] then seen[m] = true; out[#out + 1] = m end
        end
      end
    end
  end

  -- Restarts the iterators whose initializer is among marks; then, for each
  -- get_next group, calls put(tensor, value) with the next element (groups
  -- whose tensors are fed already (`fed(tensor)`) are left alone).
  local function advance(marks, sess, feeds, fed, put)
    for _, m in ipairs(marks) do
      if m.kind == "init" then restart(m.iterator, sess, feeds) end
    end
    for _, m in ipairs(marks) do
      if m.kind == "next" and not fed(m.tensors[1]) then
        local e = pull(m.iterator, sess)
        local fed
        for i, t in ipairs(m.tensors) do
          local v = materialize(e[i])
          if type(v) == "table" and v._pool_key and not v._kept then
            fed = fed or {}
            fed[#fed + 1] = v
          end
          put(t, v)
        end
        m.iterator.states[sess].fed = fed
      end
    end
  end

  function data._before_run(g, sess, tensors, targets, feeds)
    local d = g._data
    local marks, seen = {}, {}
    collect(d, tensors, marks, seen)
    collect(d, targets, marks, seen)
    if #marks == 0 then return feeds end
    local out = {}
    if feeds then for k, v in pairs(feeds) do out[k] = v end end
    advance(marks, sess, feeds,
            function(t) return feeds ~= nil and (feeds[t] ~= nil or feeds[t.name] ~= nil) end,
            function(t, v) out[t] = v end)
    return out
  end

  function data._wrap_callable(g, sess, fetches, feed_list, tensors, targets)
    local d = g._data
    local marks, seen = {}, {}
    collect(d, tensors, marks, seen)
    collect(d, targets, marks, seen)
    feed_list = feed_list or {}
    if #marks == 0 then return sess:make_callable(fetches, feed_list, true) end
    local user = #feed_list
    local list, slot = {}, {}
    local fed = {}
    for i, t in ipairs(feed_list) do
      list[i] = t
      if type(t) == "string" then t = g:get_tensor_by_name(t) end
      fed[t] = i
    end
    for _, m in ipairs(marks) do
      if m.kind == "next" and not fed[m.tensors[1]] then
        for _, t in ipairs(m.tensors) do list[#list + 1] = t; slot[t] = #list end
      end
    end
    local call = sess:make_callable(fetches, list, true)
    local total = #list
    return function(...)
      local args = {...}
      local feeds = nil
      for _, m in ipairs(marks) do
        if m.kind == "init" then
          feeds = {}
          for i = 1, user do feeds[list[i]] = args[i] end
          break
        end
      end
      advance(marks, sess, feeds, function(t) return fed[t] ~= nil end,
              function(t, v) args[slot[t]] = v end)
      return call(unpack(args, 1, total))
    end
  end
end
