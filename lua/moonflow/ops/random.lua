-- ops/random.lua — random sources and seeds: tf.random_uniform, tf.random_normal,
-- tf.truncated_normal, tf.random_shuffle, tf.multinomial, tf.set_random_seed,
-- tf.get_seed (also as tf.random.uniform, …).
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local C = core.C

local fail, options = core.fail, args.options

-- TensorFlow's constants (random_seed.py): seeds are truncated to 31 bits, and
-- an op seed without a graph seed pairs with this default graph seed.
local MAXINT32 = 2 ^ 31 - 1
local DEFAULT_GRAPH_SEED = 87654321

local function truncate_seed(seed, fname)
  if type(seed) ~= "number" or seed % 1 ~= 0 then
    fail(fname .. ": the seed must be an integer, got " .. tostring(seed))
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

-- The option sets: (shape, a, b, dtype, seed, name) with the names of a
-- distribution's two parameters, or (shape, {...}); an empty table is no options.
local UNIFORM_OPTIONS = {"minval", "maxval", "dtype", "seed", "name", empty = true}
local NORMAL_OPTIONS = {"mean", "stddev", "dtype", "seed", "name", empty = true}
local SEED_OPTIONS = {"seed", "name", empty = true}
local MULTINOMIAL_OPTIONS = {"seed", "name", "output_dtype", empty = true}
local CATEGORICAL_OPTIONS = {"dtype", "seed", "name", empty = true}

-- The options of a random source: the shape checked, the dtype (float32 by default).
local function source_options(fname, names, shape, ...)
  if shape == nil then fail(fname .. ": a shape is required") end
  local o = options(fname, names, ...)
  o.dtype = core.as_dtype(o.dtype or core.dtypes.float32, fname)
  return o
end

-- The shape argument as an int tensor: a Tensor, a TensorShape or a Lua list.
local function shape_tensor(shape, fname)
  if getmetatable(shape) == G.TensorShape and not shape:is_fully_defined() then
    fail(fname .. ": random ops need a fully defined shape, got " .. tostring(shape))
  end
  return G.shape_tensor(shape, fname)
end

return function(tf, ops)
  tf.random = tf.random or {}

  -- tf.set_random_seed(seed): the default graph's seed; nil unsets it.
  function tf.set_random_seed(seed)
    C.mf_graph_set_seed(G.get_default_graph().ptr, seed == nil and -1 or truncate_seed(seed, "tf.set_random_seed"))
  end

  -- The graph seed and op seed for an op of fname built now in graph (tf.get_seed).
  local function get_seed(op_seed, graph, fname)
    local global = tonumber(C.mf_graph_seed(graph.ptr))
    local seed, seed2
    if global >= 0 then
      seed, seed2 = global, truncate_seed(op_seed or graph:num_ops(), fname)
    elseif op_seed ~= nil then
      seed, seed2 = DEFAULT_GRAPH_SEED, truncate_seed(op_seed, fname)
    else
      return nil, nil
    end
    -- (0, 0) means "nondeterministic" to TensorFlow's kernels; keep it distinct.
    if seed == 0 and seed2 == 0 then seed2 = MAXINT32 end
    return seed, seed2
  end

  -- tf.get_seed(op_seed) -> graph seed, op seed for an op built now in `graph`
  -- (default graph), following TensorFlow: a graph seed alone derives the op
  -- seed from the graph's op count; an op seed alone pairs with the default
  -- graph seed; neither gives nil, nil (the op then draws fresh seeds).
  function tf.get_seed(op_seed, graph)
    return get_seed(op_seed, graph or G.get_default_graph(), "tf.get_seed")
  end

  -- The seed attrs of a random op of fname built now in `graph`: TensorFlow's
  -- pair, or fresh seeds when neither a graph nor an op seed is set.
  local function seed_attrs(op_seed, graph, attrs, fname)
    local seed, seed2 = get_seed(op_seed, graph, fname)
    if seed == nil then seed, seed2 = fresh_seed(), fresh_seed() end
    attrs.seed, attrs.seed2 = G.attr.int(seed), G.attr.int(seed2)
    return attrs
  end

  -- Builds a random source op; returns its [0, 1) or standard normal output.
  local function source(fname, op_type, shape, dtype, op_seed, name)
    shape = shape_tensor(shape, fname)
    return G.op{op_type, inputs = {shape}, name = name,
                attrs = seed_attrs(op_seed, shape.graph, {dtype = dtype}, fname)}
  end

  -- tf.random_uniform(shape, minval=0, maxval=1, dtype=float32, seed, name):
  -- values in [minval, maxval).
  -- For int32/int64, integers uniform in [minval, maxval) (TensorFlow's
  -- RandomUniformInt): maxval is required, minval defaults to 0, and maxval
  -- must exceed minval (checked when the op is built if both are known, else
  -- when it runs).
  function ops.random_uniform(shape, ...)
    local fname = "tf.random_uniform"
    local o = source_options(fname, UNIFORM_OPTIONS, shape, ...)
    local minval, maxval, dtype, seed = o.minval, o.maxval, o.dtype, o.seed
    local name = o.name or "random_uniform"
    if dtype == core.dtypes.int32 or dtype == core.dtypes.int64 then
      if maxval == nil then
        fail(fname .. ": maxval must be given for integer dtype " .. dtype.name)
      end
      minval = minval == nil and 0 or minval
      for _, b in ipairs({{"minval", minval}, {"maxval", maxval}}) do
        if not G.is_tensor(b[2]) and (type(b[2]) ~= "number" or b[2] % 1 ~= 0) then
          fail(fname .. ": " .. b[1] .. " must be an integer or an integer scalar tensor for dtype " ..
               dtype.name .. ", got " .. tostring(b[2]))
        end
      end
      if type(minval) == "number" and type(maxval) == "number" and maxval <= minval then
        fail(string.format("%s: need minval < maxval, got minval %d, maxval %d", fname, minval, maxval))
      end
      shape = shape_tensor(shape, fname)
      local g = shape.graph
      return G.op{"RandomUniformInt", name = name,
                  inputs = {shape, G.convert(minval, dtype, g), G.convert(maxval, dtype, g)},
                  attrs = seed_attrs(seed, g, {}, fname)}
    end
    if minval == nil then minval = 0 end
    if maxval == nil then maxval = 1 end
    if minval == 0 and maxval == 1 then return source(fname, "RandomUniform", shape, dtype, seed, name) end
    local rnd = source(fname, "RandomUniform", shape, dtype, seed)
    local range
    if type(minval) == "number" and type(maxval) == "number" then range = maxval - minval
    else
      minval = G.tensor_arg(fname, "minval", minval, dtype, rnd.graph)
      range = ops.subtract(G.tensor_arg(fname, "maxval", maxval, dtype, rnd.graph), minval)
    end
    return ops.add(ops.multiply(rnd, range), minval, name)
  end

  -- A normal source scaled by stddev and shifted by mean:
  -- (shape, mean=0, stddev=1, dtype=float32, seed, name).
  local function normal(op_name, op_type)
    local fname = "tf." .. op_name
    return function(shape, ...)
      local o = source_options(fname, NORMAL_OPTIONS, shape, ...)
      local mean, stddev = o.mean, o.stddev
      if mean == nil then mean = 0 end
      if stddev == nil then stddev = 1 end
      local name = o.name or op_name
      if mean == 0 and stddev == 1 then return source(fname, op_type, shape, o.dtype, o.seed, name) end
      local rnd = source(fname, op_type, shape, o.dtype, o.seed)
      stddev = G.tensor_arg(fname, "stddev", stddev, o.dtype, rnd.graph)
      mean = G.tensor_arg(fname, "mean", mean, o.dtype, rnd.graph)
      return ops.add(ops.multiply(rnd, stddev), mean, name)
    end
  end
  -- tf.random_normal(shape, mean, stddev, dtype, seed, name).
  ops.random_normal = normal("random_normal", "RandomNormal")
  -- tf.truncated_normal(shape, mean, stddev, dtype, seed, name): values more
  -- than two standard deviations from the mean are drawn again.
  ops.truncated_normal = normal("truncated_normal", "TruncatedNormal")

  -- tf.random_shuffle(value, seed, name) or (value, {seed=, name=}): value's
  -- rows (along the first dimension) in a random order, a new one each run.
  function ops.random_shuffle(value, ...)
    local o = options("tf.random_shuffle", SEED_OPTIONS, ...)
    value = G.convert(value)
    return G.op{"RandomShuffle", inputs = {value}, name = o.name,
                attrs = seed_attrs(o.seed, value.graph, {}, "tf.random_shuffle")}
  end

  -- tf.multinomial(logits, num_samples, seed, name, output_dtype) or
  -- {seed=, name=, output_dtype=}: for each row of logits [batch, classes],
  -- num_samples class indices drawn with probabilities softmax(row); int64
  -- unless output_dtype is int32.
  function ops.multinomial(logits, num_samples, ...)
    local fname = "tf.multinomial"
    local o = options(fname, MULTINOMIAL_OPTIONS, ...)
    if num_samples == nil then fail(fname .. ": num_samples is required") end
    logits = G.convert(logits)
    local samples = G.convert(num_samples, core.dtypes.int32, logits.graph)
    local attrs = {output_dtype = core.as_dtype(o.output_dtype or core.dtypes.int64, fname)}
    return G.op{"Multinomial", inputs = {logits, samples}, name = o.name,
                attrs = seed_attrs(o.seed, logits.graph, attrs, fname)}
  end

  -- tf.random.categorical(logits, num_samples, dtype, seed, name) or {dtype=,
  -- seed=, name=}: the same draw.
  function tf.random.categorical(logits, num_samples, ...)
    local o = options("tf.random.categorical", CATEGORICAL_OPTIONS, ...)
    return ops.multinomial(logits, num_samples, {seed = o.seed, name = o.name, output_dtype = o.dtype})
  end

  tf.random.shuffle = ops.random_shuffle
  tf.random.multinomial = ops.multinomial
  tf.random.uniform = ops.random_uniform
  tf.random.normal = ops.random_normal
  tf.random.truncated_normal = ops.truncated_normal
  tf.random.set_random_seed = tf.set_random_seed
  tf.random.get_seed = tf.get_seed
end
