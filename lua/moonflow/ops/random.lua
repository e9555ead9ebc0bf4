-- ops/random.lua — random sources and seeds: tf.random_uniform, tf.random_normal,
-- tf.truncated_normal, tf.random_shuffle, tf.multinomial, tf.set_random_seed,
-- tf.get_seed (also as tf.random.uniform, …).
local core = require("moonflow.core")
local G = require("moonflow.graph")
-- An options table here may be empty.
local is_options = require("moonflow.args").is_options
local C = core.C

-- TensorFlow's constants (random_seed.py): seeds are truncated to 31 bits, and
-- an op seed without a graph seed pairs with this default graph seed.
local MAXINT32 = 2 ^ 31 - 1
local DEFAULT_GRAPH_SEED = 87654321

local function truncate_seed(seed)
  if type(seed) ~= "number" or seed % 1 ~= 0 then
    error("random seed must be an integer, got " .. tostring(seed), 3)
  end
  return seed % MAXINT32
end

-- Seeds for ops built with neither a graph nor an op seed: different for every
-- op and every process (time, clock, a fresh table's address, a counter), then
-- fixed in the op, so the op is still reproducible within one session.
local drawn = 0
local function fresh_seed()
  drawn = drawn + 1
  local addr = tonumber(tostring({}):match("0x(%x+)") or "0", 16)
  return (os.time() * 7919 + math.floor(os.clock() * 1e6) + drawn * 104729 + addr) % MAXINT32
end


-- Parses (shape, a, b, dtype, seed, name) or (shape, {opts}) with the names of
-- the two distribution parameters and their defaults.
local function parse(what, args, pa, pb, da, db)
  local shape, opts = args[1], args[2]
  if not is_options(opts, true) then
    opts = {[pa] = args[2], [pb] = args[3], dtype = args[4], seed = args[5], name = args[6]}
  end
  if shape == nil then error(what .. ": a shape is required", 3) end
  local dtype = core.as_dtype(opts.dtype or core.dtypes.float32, what)
  local a, b = opts[pa], opts[pb]
  if a == nil then a = da end
  if b == nil then b = db end
  return shape, a, b, dtype, opts.seed, opts.name
end

-- The shape argument as an int tensor: a Tensor, a TensorShape or a Lua list.
local function shape_tensor(shape)
  if G.is_tensor(shape) then return shape end
  if getmetatable(shape) == G.TensorShape then
    if not shape:is_fully_defined() then
      error("random ops need a fully defined shape, got " .. tostring(shape), 4)
    end
    shape = shape.dims
  end
  return G.convert(shape, core.dtypes.int32)
end

return function(tf, ops)
  tf.random = tf.random or {}

  -- tf.set_random_seed(seed): the default graph's seed; nil unsets it.
  function tf.set_random_seed(seed)
    C.mf_graph_set_seed(G.get_default_graph().ptr, seed == nil and -1 or truncate_seed(seed))
  end

  -- tf.get_seed(op_seed) -> graph seed, op seed for an op built now in `graph`
  -- (default graph), following TensorFlow: a graph seed alone derives the op
  -- seed from the graph's op count; an op seed alone pairs with the default
  -- graph seed; neither gives nil, nil (the op then draws fresh seeds).
  function tf.get_seed(op_seed, graph)
    graph = graph or G.get_default_graph()
    local global = tonumber(C.mf_graph_seed(graph.ptr))
    local seed, seed2
    if global >= 0 then
      seed, seed2 = global, truncate_seed(op_seed or graph:num_ops())
    elseif op_seed ~= nil then
      seed, seed2 = DEFAULT_GRAPH_SEED, truncate_seed(op_seed)
    else
      return nil, nil
    end
    -- (0, 0) means "nondeterministic" to TensorFlow's kernels; keep it distinct.
    if seed == 0 and seed2 == 0 then seed2 = MAXINT32 end
    return seed, seed2
  end

  -- The seed attrs of a random op built now in `graph`: TensorFlow's pair, or
  -- fresh seeds when neither a graph nor an op seed is set.
  local function seed_attrs(op_seed, graph, attrs)
    local seed, seed2 = tf.get_seed(op_seed, graph)
    if seed == nil then seed, seed2 = fresh_seed(), fresh_seed() end
    attrs.seed, attrs.seed2 = G.attr.int(seed), G.attr.int(seed2)
    return attrs
  end

  -- Builds a random source op; returns its [0, 1) or standard normal output.
  local function source(op_type, shape, dtype, op_seed, name)
    shape = shape_tensor(shape)
    return G.op{op_type, inputs = {shape}, name = name, attrs = seed_attrs(op_seed, shape.graph, {dtype = dtype})}
  end

  -- tf.random_uniform(shape, minval=0, maxval=1, dtype=float32, seed, name):
  -- values in [minval, maxval).
  -- For int32/int64, integers uniform in [minval, maxval) (TensorFlow's
  -- RandomUniformInt): maxval is required, minval defaults to 0, and maxval
  -- must exceed minval (checked when the op is built if both are known, else
  -- when it runs).
  function ops.random_uniform(...)
    local shape, minval, maxval, dtype, seed, name =
      parse("random_uniform", {...}, "minval", "maxval", nil, nil)
    name = name or "random_uniform"
    if dtype == core.dtypes.int32 or dtype == core.dtypes.int64 then
      if maxval == nil then
        error("random_uniform: maxval must be given for integer dtype " .. dtype.name, 2)
      end
      minval = minval == nil and 0 or minval
      for _, b in ipairs({{"minval", minval}, {"maxval", maxval}}) do
        if not G.is_tensor(b[2]) and (type(b[2]) ~= "number" or b[2] % 1 ~= 0) then
          error("random_uniform: " .. b[1] .. " must be an integer or an integer scalar tensor for dtype " ..
                dtype.name .. ", got " .. tostring(b[2]), 2)
        end
      end
      if type(minval) == "number" and type(maxval) == "number" and maxval <= minval then
        error(string.format("random_uniform: need minval < maxval, got minval %d, maxval %d", minval, maxval), 2)
      end
      shape = shape_tensor(shape)
      local g = shape.graph
      return G.op{"RandomUniformInt", name = name,
                  inputs = {shape, G.convert(minval, dtype, g), G.convert(maxval, dtype, g)},
                  attrs = seed_attrs(seed, g, {})}
    end
    if minval == nil then minval = 0 end
    if maxval == nil then maxval = 1 end
    if minval == 0 and maxval == 1 then return source("RandomUniform", shape, dtype, seed, name) end
    local rnd = source("RandomUniform", shape, dtype, seed)
    local range
    if type(minval) == "number" and type(maxval) == "number" then range = maxval - minval
    else range = ops.subtract(G.convert(maxval, dtype, rnd.graph), G.convert(minval, dtype, rnd.graph)) end
    return ops.add(ops.multiply(rnd, range), minval, name)
  end

  -- A normal source scaled by stddev and shifted by mean:
  -- (shape, mean=0, stddev=1, dtype=float32, seed, name).
  local function normal(fname, op_type)
    return function(...)
      local shape, mean, stddev, dtype, seed, name = parse(fname, {...}, "mean", "stddev", 0, 1)
      name = name or fname
      if mean == 0 and stddev == 1 then return source(op_type, shape, dtype, seed, name) end
      local rnd = source(op_type, shape, dtype, seed)
      return ops.add(ops.multiply(rnd, stddev), mean, name)
    end
  end
  -- tf.random_normal(shape, mean, stddev, dtype, seed, name).
  ops.random_normal = normal("random_normal", "RandomNormal")
  -- tf.truncated_normal(shape, mean, stddev, dtype, seed, name): values more
  -- than two standard deviations from the mean are drawn again.
  ops.truncated_normal = normal("truncated_normal", "TruncatedNormal")

  -- Reads (first, seed, name) or (first, {seed=, name=}).
  local function seed_name(fname, seed, name)
    if is_options(seed, true) then
      for k in pairs(seed) do
        if k ~= "seed" and k ~= "name" then error(fname .. ": unknown option '" .. tostring(k) .. "'", 3) end
      end
      seed, name = seed.seed, seed.name
    end
    return seed, name
  end

  -- tf.random_shuffle(value, seed, name): value's rows (along the first
  -- dimension) in a random order, a new one each run.
  function ops.random_shuffle(value, seed, name)
    seed, name = seed_name("tf.random_shuffle", seed, name)
    value = G.convert(value)
    return G.op{"RandomShuffle", inputs = {value}, name = name, attrs = seed_attrs(seed, value.graph, {})}
  end

  -- tf.multinomial(logits, num_samples, seed, name, output_dtype) or
  -- {seed=, name=, output_dtype=}: for each row of logits [batch, classes],
  -- num_samples class indices drawn with probabilities softmax(row); int64
  -- unless output_dtype is int32.
  function ops.multinomial(logits, num_samples, ...)
    local o = ...
    if not (select("#", ...) == 1 and is_options(o, true)) then
      local seed, name, output_dtype = ...
      o = {seed = seed, name = name, output_dtype = output_dtype}
    end
    for k in pairs(o) do
      if k ~= "seed" and k ~= "name" and k ~= "output_dtype" then
        error("tf.multinomial: unknown option '" .. tostring(k) .. "'", 2)
      end
    end
    if num_samples == nil then error("tf.multinomial: num_samples is required", 2) end
    logits = G.convert(logits)
    local samples = G.convert(num_samples, core.dtypes.int32, logits.graph)
    local attrs = {output_dtype = core.as_dtype(o.output_dtype or core.dtypes.int64, "tf.multinomial")}
    return G.op{"Multinomial", inputs = {logits, samples}, name = o.name,
                attrs = seed_attrs(o.seed, logits.graph, attrs)}
  end

  -- tf.random.categorical(logits, num_samples, dtype, seed, name): the same draw.
  function tf.random.categorical(logits, num_samples, dtype, seed, name)
    if is_options(dtype, true) then return ops.multinomial(logits, num_samples, {seed = dtype.seed, name = dtype.name,
                                                                           output_dtype = dtype.dtype}) end
    return ops.multinomial(logits, num_samples, {seed = seed, name = name, output_dtype = dtype})
  end

  tf.random.shuffle = ops.random_shuffle
  tf.random.multinomial = ops.multinomial
  tf.random.uniform = ops.random_uniform
  tf.random.normal = ops.random_normal
  tf.random.truncated_normal = ops.truncated_normal
  tf.random.set_random_seed = tf.set_random_seed
  tf.random.get_seed = tf.get_seed
end
