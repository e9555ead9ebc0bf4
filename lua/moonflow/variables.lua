-- variables.lua — state and structure: tf.Variable and tf.get_variable,
-- assignments, initializers, variable scopes and sharing (tf.variable_scope,
-- tf.make_template, tf.AUTO_REUSE), control dependencies and grouping,
-- collections (tf.GraphKeys).
--
-- A variable IS the Tensor of its VariableV2 op's output, so it works
-- wherever a tensor does (operators, ops, feeds, fetches). Its value lives in
-- each session (src/ops/state.c). The variable-only fields are set on that
-- Tensor object: `initializer` (the Assign op that sets the initial value),
-- `initial_value` (a Tensor) and `trainable`; methods `v:assign(x)`,
-- `v:assign_add(x)`, `v:assign_sub(x)`, `v:read_value()`, `v:load(value, sess)`.
--
-- Reads: a use of `v` in an op reads the value the variable has when its op
-- runs, which is before any assignment built after the variable, i.e. the
-- value at the start of the run. `v:read_value()` builds a read that runs
-- where its inputs and control dependencies put it (after an update it
-- depends on).
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local C = core.C
local dtypes = core.dtypes

-- TensorFlow's collection names.
local GraphKeys = {
  GLOBAL_VARIABLES = "variables",
  LOCAL_VARIABLES = "local_variables",
  MODEL_VARIABLES = "model_variables",
  TRAINABLE_VARIABLES = "trainable_variables",
  UPDATE_OPS = "update_ops",
  LOSSES = "losses",
  REGULARIZATION_LOSSES = "regularization_losses",
  SUMMARIES = "summaries",
  GLOBAL_STEP = "global_step",
  TRAIN_OP = "train_op",
  INIT_OP = "init_op",
  LOCAL_INIT_OP = "local_init_op",
  READY_OP = "ready_op",
  SAVERS = "savers",
  ACTIVATIONS = "activations",
  WEIGHTS = "weights",
  BIASES = "biases",
}

-- The sentinel for reuse = tf.AUTO_REUSE: create when missing, else reuse.
local AUTO_REUSE = setmetatable({}, {__tostring = function() return "tf.AUTO_REUSE" end})

local fail, options, is_options, name_of = core.fail, args.options, args.is_options, args.name_of

-- The option sets; a trailing empty table is an empty options table.
local VARIABLE_OPTIONS = {"trainable", "collections", "validate_shape", "name", "dtype", empty = true}
local GET_VARIABLE_OPTIONS = {"shape", "dtype", "initializer", "trainable", "collections", "validate_shape",
                              empty = true}
-- After a positional shape.
local GET_VARIABLE_SHAPED_OPTIONS = {"dtype", "initializer", "trainable", "collections", "validate_shape",
                                     empty = true}
local VARIABLE_SCOPE_OPTIONS = {"reuse", "initializer", "dtype", "default_name", empty = true}
local GROUP_OPTIONS = {"name", positional = 0}

local is_variable = G.is_variable

local function shape_str(dims)
  return tostring(G.TensorShape.new(dims))
end

-- A shape argument as a Lua list (nil stays nil).
local function shape_list(shape, fname)
  if shape == nil then return nil end
  if getmetatable(shape) == G.TensorShape then return shape.dims end
  if type(shape) == "number" then return {shape} end
  if type(shape) ~= "table" or getmetatable(shape) ~= nil then
    fail(fname .. ": shape must be a Lua list of integers or a tf.TensorShape, got " .. tostring(shape))
  end
  for i, d in ipairs(shape) do
    if type(d) ~= "number" or d % 1 ~= 0 or d < -1 then
      fail(string.format("%s: shape[%d] must be a non-negative integer or -1, got %s", fname, i, tostring(d)))
    end
  end
  return shape
end

local function fully_defined(dims)
  if not dims then return false end
  for _, d in ipairs(dims) do if d < 0 then return false end end
  return true
end

local in_name_scope = G.in_name_scope

-- Runs fn with no control dependencies in force (tf.control_dependencies(nil)):
-- a variable and its initializer never wait for the ops around their creation.
local function without_control_deps(g, fn, ...)
  local saved = g._control_deps
  g._control_deps = {}
  local results = {pcall(fn, ...)}
  g._control_deps = saved
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

-- A variable scope: name, reuse (false, true or AUTO_REUSE), initializer,
-- dtype, and original_name_scope (the name scope its first entry opened).
local VariableScope = {}
VariableScope.__index = VariableScope
function VariableScope:__tostring() return "<tf.VariableScope '" .. self.name .. "'>" end
-- Makes the rest of the scope's block (and later re-entries) reuse variables.
function VariableScope:reuse_variables() self.reuse = true end

-- The graph's variable scope stack and get_variable's store, made on first use.
local function var_state(g)
  local st = g._variables
  if not st then
    local root = setmetatable({name = "", original_name_scope = "", reuse = false}, VariableScope)
    st = {store = {}, scopes = {root}, used_scope_names = {}}
    g._variables = st
  end
  return st
end

local function current_scope(g)
  local scopes = var_state(g).scopes
  return scopes[#scopes]
end

-- Initializers ------------------------------------------------------------------
-- An initializer is called as init(shape, dtype) (shape a Lua list) and
-- returns a Tensor; these are callable objects that remember their settings.
local Initializer = {}
Initializer.__index = Initializer
function Initializer:__call(shape, dtype)
  dtype = dtype and core.as_dtype(dtype, self.kind) or self.dtype or dtypes.float32
  return self.build(shape_list(shape, self.kind) or {}, dtype)
end
function Initializer:__tostring() return "<tf." .. self.kind .. ">" end

local function initializer(kind, dtype, build)
  return setmetatable({kind = kind, dtype = dtype and core.as_dtype(dtype, kind), build = build}, Initializer)
end

local function is_callable(x)
  return type(x) == "function" or getmetatable(x) == Initializer
end

local function num_elements(dims)
  local n = 1
  for _, d in ipairs(dims) do n = n * d end
  return n
end

-- TensorFlow's fan-in and fan-out of a weight shape: a matrix {in, out}; a
-- convolution kernel {h, w, in, out} counts every tap of the window.
local function fans(shape)
  local r = #shape
  if r == 0 then return 1, 1 end
  if r == 1 then return shape[1], shape[1] end
  if r == 2 then return shape[1], shape[2] end
  local receptive = 1
  for i = 1, r - 2 do receptive = receptive * shape[i] end
  return shape[r - 1] * receptive, shape[r] * receptive
end
-- The standard deviation of a unit normal truncated to (-2, 2).
local TRUNCATED_STDDEV = 0.87962566103423978

local function float_only(kind, dtype)
  if not dtype.is_floating then
    fail("tf." .. kind .. ": dtype must be float32 or float64, got " .. dtype.name)
  end
end

-- Every initializer constructor and its argument names (TensorFlow's order).
local constructors = {}

constructors.zeros_initializer = {{"dtype"}, function(o)
  return initializer("zeros_initializer", o.dtype, function(shape, dtype) return G.ops.zeros(shape, dtype) end)
end}
constructors.ones_initializer = {{"dtype"}, function(o)
  return initializer("ones_initializer", o.dtype, function(shape, dtype) return G.ops.ones(shape, dtype) end)
end}

-- constant_initializer(value): a number fills the shape; a list (or tf.Array)
-- fills it in row-major order, its last element repeated when it is short.
constructors.constant_initializer = {{"value", "dtype"}, function(o)
  local value = o.value == nil and 0 or o.value
  return initializer("constant_initializer", o.dtype, function(shape, dtype)
    if type(value) == "number" or type(value) == "boolean" then
      return G.ops.fill(shape, G.constant(value, dtype))
    end
    local a = Array.from(value, dtype, false, "tf.constant_initializer")
    local n, have = num_elements(shape), a:size()
    if have > n then
      fail(string.format("tf.constant_initializer: Too many elements provided. Needed at most %d, " ..
                         "but received %d", n, have))
    end
    if have == 0 and n > 0 then fail("tf.constant_initializer: the value list is empty") end
    local full = Array.new(dtype, shape)
    for i = 0, n - 1 do full._data[i] = a._data[math.min(i, have - 1)] end
    return G.constant(full)
  end)
end}

constructors.random_normal_initializer = {{"mean", "stddev", "seed", "dtype"}, function(o)
  return initializer("random_normal_initializer", o.dtype, function(shape, dtype)
    float_only("random_normal_initializer", dtype)
    return G.ops.random_normal(shape, {mean = o.mean or 0, stddev = o.stddev or 1, seed = o.seed, dtype = dtype})
  end)
end}
constructors.truncated_normal_initializer = {{"mean", "stddev", "seed", "dtype"}, function(o)
  return initializer("truncated_normal_initializer", o.dtype, function(shape, dtype)
    float_only("truncated_normal_initializer", dtype)
    return G.ops.truncated_normal(shape, {mean = o.mean or 0, stddev = o.stddev or 1, seed = o.seed, dtype = dtype})
  end)
end}
constructors.random_uniform_initializer = {{"minval", "maxval", "seed", "dtype"}, function(o)
  return initializer("random_uniform_initializer", o.dtype, function(shape, dtype)
    float_only("random_uniform_initializer", dtype)
    return G.ops.random_uniform(shape, {minval = o.minval or 0, maxval = o.maxval or 1, seed = o.seed, dtype = dtype})
  end)
end}

-- variance_scaling_initializer(scale, mode, distribution): variance scale / n
-- with n the fan-in, the fan-out or their mean; "truncated_normal" (the
-- stddev corrected for the truncation), "untruncated_normal" or "uniform".
local function variance_scaling(kind, scale, mode, distribution, seed, dtype)
  local modes = {fan_in = true, fan_out = true, fan_avg = true}
  if not modes[mode] then fail("tf." .. kind .. ': mode must be "fan_in", "fan_out" or "fan_avg", got ' .. tostring(mode)) end
  if distribution == "normal" then distribution = "truncated_normal" end
  local dists = {truncated_normal = true, untruncated_normal = true, uniform = true}
  if not dists[distribution] then
    fail("tf." .. kind .. ': distribution must be "truncated_normal", "untruncated_normal" or "uniform", got ' ..
         tostring(distribution))
  end
  if type(scale) ~= "number" or scale <= 0 then fail("tf." .. kind .. ": scale must be a positive number") end
  return initializer(kind, dtype, function(shape, dt)
    float_only(kind, dt)
    local fan_in, fan_out = fans(shape)
    local n = mode == "fan_in" and fan_in or mode == "fan_out" and fan_out or (fan_in + fan_out) / 2
    local variance = scale / math.max(1, n)
    if distribution == "uniform" then
      local limit = math.sqrt(3 * variance)
      return G.ops.random_uniform(shape, {minval = -limit, maxval = limit, seed = seed, dtype = dt})
    elseif distribution == "truncated_normal" then
      return G.ops.truncated_normal(shape, {stddev = math.sqrt(variance) / TRUNCATED_STDDEV, seed = seed, dtype = dt})
    end
    return G.ops.random_normal(shape, {stddev = math.sqrt(variance), seed = seed, dtype = dt})
  end)
end
constructors.variance_scaling_initializer = {{"scale", "mode", "distribution", "seed", "dtype"}, function(o)
  return variance_scaling("variance_scaling_initializer", o.scale or 1, o.mode or "fan_in",
                          o.distribution or "truncated_normal", o.seed, o.dtype)
end}
-- Glorot (Xavier): variance 2 / (fan_in + fan_out).
constructors.glorot_uniform_initializer = {{"seed", "dtype"}, function(o)
  return variance_scaling("glorot_uniform_initializer", 1, "fan_avg", "uniform", o.seed, o.dtype)
end}
constructors.glorot_normal_initializer = {{"seed", "dtype"}, function(o)
  return variance_scaling("glorot_normal_initializer", 1, "fan_avg", "truncated_normal", o.seed, o.dtype)
end}

return function(tf, ops)
  tf.GraphKeys = GraphKeys
  tf.AUTO_REUSE = AUTO_REUSE
  tf.VariableScope = VariableScope
  tf.initializers = tf.initializers or {}
  for fname, c in pairs(constructors) do
    local names, make = c[1], c[2]
    names.empty = true
    tf[fname] = function(...) return make(options("tf." .. fname, names, ...)) end
    tf.initializers[(fname:gsub("_initializer$", ""))] = tf[fname]
  end

  -- Collections ---------------------------------------------------------------------
  function tf.add_to_collection(name, value) G.get_default_graph():add_to_collection(name, value) end
  function tf.add_to_collections(names, value)
    for _, name in ipairs(names) do G.get_default_graph():add_to_collection(name, value) end
  end
  function tf.get_collection(key, scope) return G.get_default_graph():get_collection(key, scope) end
  function tf.get_collection_ref(key) return G.get_default_graph():get_collection_ref(key) end

  function tf.global_variables(scope) return tf.get_collection(GraphKeys.GLOBAL_VARIABLES, scope) end
  function tf.trainable_variables(scope) return tf.get_collection(GraphKeys.TRAINABLE_VARIABLES, scope) end
  function tf.local_variables(scope) return tf.get_collection(GraphKeys.LOCAL_VARIABLES, scope) end

  -- Creating variables -------------------------------------------------------------------
  -- Builds a variable in graph g. spec: name (made unique in the current name
  -- scope, or taken as the full name when `exact`), dtype, shape (a list, nil
  -- when the initial value decides), init (returns the initial value; called
  -- inside the variable's name scope), trainable, collections, validate_shape,
  -- fname (tf.Variable or tf.get_variable, for the errors).
  local function make_variable(g, spec)
    -- A variable made while a tf.cond branch or tf.while_loop body is traced
    -- belongs to the outermost graph (made once, initialized with the others);
    -- the function uses it from there.
    local root = g:outermost()
    if G.get_default_graph() ~= root then return root:as_default(function() return make_variable(root, spec) end) end
    return without_control_deps(g, function()
      local attrs = {dtype = spec.dtype}
      if spec.shape and spec.validate_shape then attrs.shape = G.attr.shape(spec.shape) end
      local var
      if spec.exact then
        var = in_name_scope(g, "", G.op, {"VariableV2", attrs = attrs, name = spec.name, graph = g})
      else
        var = G.op{"VariableV2", attrs = attrs, name = spec.name, graph = g}
      end
      local initial, assign = in_name_scope(g, var.op.name .. "/", function()
        local initial = spec.init()
        if not G.is_tensor(initial) or initial.graph ~= g then
          fail(spec.fname .. ": the initial value of variable " .. var.op.name .. " must be a Tensor of its graph, " ..
               "got " .. tostring(initial))
        end
        if initial.dtype ~= spec.dtype then
          fail(string.format("%s: the initial value of variable %s has dtype %s, not %s; use tf.cast",
                             spec.fname, var.op.name, initial.dtype.name, spec.dtype.name))
        end
        local dims = initial:get_shape().dims
        if spec.validate_shape and not fully_defined(dims) then
          fail(spec.fname .. ": initial_value must have a shape specified: " .. tostring(initial) ..
               " (or create the variable with validate_shape = false)")
        end
        if spec.validate_shape and not spec.shape then var:set_shape(dims) end
        return initial, ops.assign(var, initial, {validate_shape = spec.validate_shape, name = "Assign"})
      end)
      -- Fields of its own: the graph keeps this Tensor object (graph.lua).
      var.initializer = assign.op
      var.initial_value = initial
      var.trainable = spec.trainable
      local keys = spec.collections or {GraphKeys.GLOBAL_VARIABLES}
      local listed = {}
      for _, key in ipairs(keys) do listed[key] = true; g:add_to_collection(key, var) end
      if spec.trainable and not listed[GraphKeys.TRAINABLE_VARIABLES] then
        g:add_to_collection(GraphKeys.TRAINABLE_VARIABLES, var)
      end
      return var
    end)
  end

  -- tf.Variable(initial, {name=, trainable=, dtype=, validate_shape=, collections=}):
  -- initial is a Tensor, a Lua value or tf.Array (a constant), or a function
  -- returning either (then dtype is required).
  function tf.Variable(initial, ...)
    local o = options("tf.Variable", VARIABLE_OPTIONS, ...)
    local dtype = o.dtype and core.as_dtype(o.dtype, "tf.Variable")
    local g, init, shape
    if G.is_tensor(initial) then
      g = initial.graph
      if dtype and dtype ~= initial.dtype then
        fail(string.format("tf.Variable: the initial value has dtype %s but dtype %s was asked for; use tf.cast",
                           initial.dtype.name, dtype.name))
      end
      dtype = initial.dtype
      init = function() return initial end
    elseif type(initial) == "function" then
      if not dtype then fail("tf.Variable: an initial value given as a function needs the dtype option") end
      g = G.get_default_graph():outermost()
      init = function()
        return in_name_scope(g, "Initializer", function() return G.convert(initial(), dtype, g) end)
      end
    elseif initial == nil then
      fail("tf.Variable: an initial value is required")
    else
      local a = Array.from(initial, dtype, false, "tf.Variable")
      g, dtype, shape = G.get_default_graph():outermost(), a.dtype, a:shape()
      init = function() return G.constant(a, {name = "initial_value", graph = g}) end
    end
    return make_variable(g, {fname = "tf.Variable", name = o.name or "Variable", dtype = dtype, shape = shape,
                             init = init, trainable = args.check_bool(o.trainable, "tf.Variable", "trainable") ~= false,
                             collections = o.collections,
                             validate_shape = o.validate_shape ~= false})
  end

  -- tf.get_variable(name, shape, {dtype=, initializer=, trainable=, collections=,
  -- validate_shape=}) or (name, {shape=, ...}) or (name, shape, dtype, initializer):
  -- the variable `scope/name` of the current variable scope, created or reused
  -- as the scope's reuse setting says.
  function tf.get_variable(name, shape, ...)
    if type(name) ~= "string" or name == "" then fail("tf.get_variable: a name is required") end
    local o
    if is_options(shape) then
      o = options("tf.get_variable", GET_VARIABLE_OPTIONS, shape)
    else
      o = options("tf.get_variable", GET_VARIABLE_SHAPED_OPTIONS, ...)
      o.shape = shape
    end
    local dims = shape_list(o.shape, "tf.get_variable")
    local dtype = o.dtype and core.as_dtype(o.dtype, "tf.get_variable")
    local g = G.get_default_graph():outermost()
    local st = var_state(g)
    local scope = current_scope(g)
    local full = scope.name == "" and name or scope.name .. "/" .. name
    local found = st.store[full]
    if found then
      if not scope.reuse then
        fail(string.format("Variable %s already exists, disallowed. Did you mean to set reuse=true or " ..
                           "reuse=tf.AUTO_REUSE in variable_scope? Originally defined at %s", full, found.op.origin))
      end
      local have = found:get_shape()
      if not have:is_compatible_with(dims) then
        fail(string.format("Trying to share variable %s, but specified shape %s and found shape %s.",
                           full, shape_str(dims), tostring(have)))
      end
      if dtype and dtype ~= found.dtype then
        fail(string.format("Trying to share variable %s, but specified dtype %s and found dtype %s.",
                           full, dtype.name, found.dtype.name))
      end
      return found
    end
    if scope.reuse == true then
      fail(string.format("Variable %s does not exist, or was not created with tf.get_variable(). " ..
                         "Did you mean to set reuse=tf.AUTO_REUSE in variable_scope?", full))
    end
    local init = o.initializer
    if init == nil then init = scope.initializer end
    local make_initial
    if G.is_tensor(init) or (init ~= nil and not is_callable(init)) then
      if o.shape ~= nil then fail("tf.get_variable: If initializer is a constant, do not specify shape.") end
      if G.is_tensor(init) then
        if dtype and dtype ~= init.dtype then
          fail(string.format("tf.get_variable: the initializer has dtype %s but dtype %s was asked for; use tf.cast",
                             init.dtype.name, dtype.name))
        end
        dtype = init.dtype
        make_initial = function() return init end
      else
        local a = Array.from(init, dtype or scope.dtype, false, "tf.get_variable")
        dtype, dims = a.dtype, a:shape()
        make_initial = function() return G.constant(a, {name = "initial_value", graph = g}) end
      end
    else
      dtype = dtype or scope.dtype or dtypes.float32
      if not fully_defined(dims) then
        fail(string.format("Shape of a new variable (%s) must be fully defined, but instead was %s.",
                           full, dims and shape_str(dims) or "<unknown>"))
      end
      if init == nil then
        init = dtype.is_floating and tf.glorot_uniform_initializer() or tf.zeros_initializer()
      end
      make_initial = function()
        return in_name_scope(g, "Initializer", function() return G.convert(init(dims, dtype), dtype, g) end)
      end
    end
    local var = make_variable(g, {fname = "tf.get_variable", name = full, exact = true, dtype = dtype, shape = dims,
                                  init = make_initial,
                                  trainable = args.check_bool(o.trainable, "tf.get_variable", "trainable") ~= false,
                                  collections = o.collections,
                                  validate_shape = o.validate_shape ~= false})
    st.store[full] = var
    return var
  end

  -- Assignments (also methods: v:assign(x), v:assign_add(x), v:assign_sub(x)) ---------------
  -- (ref, value, validate_shape, use_locking, name) or (ref, value, {validate_shape=, name=});
  -- each returns the new value and assigns when a run flows through it.
  -- use_locking is accepted for TensorFlow code and changes nothing: a
  -- session runs one op at a time.
  local function assigner(fname, op_type, names)
    return function(ref, value, ...)
      local o = options(fname, names, ...)
      if not is_variable(ref) then
        fail(fname .. ": ref must be a variable (tf.Variable or tf.get_variable), got " .. tostring(ref))
      end
      local attrs
      if o.validate_shape ~= nil then attrs = {validate_shape = o.validate_shape} end
      return G.op{op_type, inputs = {ref, G.convert(value, ref.dtype, ref.graph)}, attrs = attrs,
                  name = o.name}
    end
  end
  ops.assign = assigner("tf.assign", "Assign", {"validate_shape", "use_locking", "name", empty = true})
  ops.assign_add = assigner("tf.assign_add", "AssignAdd", {"use_locking", "name", empty = true})
  ops.assign_sub = assigner("tf.assign_sub", "AssignSub", {"use_locking", "name", empty = true})

  -- v:read_value(): the value when this read runs (after its control dependencies).
  function G.tensor_methods.read_value(v, name)
    if not is_variable(v) then fail("Variable:read_value: " .. tostring(v) .. " is not a variable") end
    return G.op{"ReadVariable", inputs = {v}, name = name_of(name, "Variable:read_value") or "read"}
  end

  -- v:load(value, sess): sets the value in that session without building ops
  -- (feeds the initial value to the initializer).
  function G.tensor_methods.load(v, value, sess)
    local init = rawget(v, "initializer")
    if not init then
      fail("Variable:load: " .. tostring(v) .. " is not a variable made by tf.Variable or tf.get_variable")
    end
    if not sess then fail("Variable:load(value, sess): a session is required") end
    sess:run(init, {[v.initial_value] = value})
  end

  function tf.is_variable_initialized(v, name)
    if not is_variable(v) then fail("tf.is_variable_initialized: " .. tostring(v) .. " is not a variable") end
    return G.op{"IsVariableInitialized", inputs = {v}, name = name_of(name, "tf.is_variable_initialized")}
  end

  -- Initializing -----------------------------------------------------------------
  -- tf.variables_initializer(list, name): one op running every initializer.
  function tf.variables_initializer(var_list, name)
    if var_list ~= nil and not args.is_plain(var_list) then
      fail("tf.variables_initializer: var_list must be a list of variables, got " .. args.describe(var_list))
    end
    local deps = {}
    for i, v in ipairs(var_list or {}) do
      local init = G.is_tensor(v) and rawget(v, "initializer")
      if not init then
        fail("tf.variables_initializer: var_list[" .. i .. "] is not a variable: " .. tostring(v))
      end
      deps[#deps + 1] = init
    end
    return G.build{"NoOp", control_inputs = deps, name = name_of(name, "tf.variables_initializer") or "init",
                   graph = deps[1] and deps[1].graph or G.get_default_graph()}
  end
  function tf.global_variables_initializer() return tf.variables_initializer(tf.global_variables(), "init") end
  function tf.local_variables_initializer() return tf.variables_initializer(tf.local_variables(), "init") end

  -- tf.report_uninitialized_variables(var_list): fetched, it gives the list of
  -- the names of the variables not initialized in that session.
  local Report = {}
  Report.__index = Report
  function Report:__tostring() return "<uninitialized-variables report over " .. #self.names .. " variables>" end
  function Report.__fetch(r)
    return r.mask, function(mask)
      local out = {}
      for i, name in ipairs(r.names) do if mask:get(i - 1) then out[#out + 1] = name end end
      return out
    end
  end
  function tf.report_uninitialized_variables(var_list, name)
    var_list = var_list or tf.global_variables()
    local names, flags = {}, {}
    for i, v in ipairs(var_list) do
      names[i] = v.op.name
      flags[i] = ops.logical_not(tf.is_variable_initialized(v))
    end
    name = name_of(name, "tf.report_uninitialized_variables") or "report_uninitialized_variables"
    local mask = #flags > 0 and ops.stack(flags, {name = name}) or {}
    return setmetatable({names = names, mask = mask}, Report)
  end

  -- Variable scopes -------------------------------------------------------------------
  function tf.get_variable_scope() return current_scope(G.get_default_graph()) end

  -- tf.variable_scope(name_or_scope, {reuse=, initializer=, dtype=, default_name=}, fn):
  -- runs fn(scope). A name nests in the current variable scope and opens a
  -- name scope of that name (made unique); a VariableScope object re-enters
  -- that scope and its name scope; nil with default_name picks a unique name.
  -- reuse = true reuses existing variables (missing ones are errors),
  -- tf.AUTO_REUSE creates missing ones; otherwise the parent's setting holds.
  function tf.variable_scope(name_or_scope, opts, fn)
    if type(opts) == "function" and fn == nil then opts, fn = {}, opts end
    if type(fn) ~= "function" then fail("tf.variable_scope(name_or_scope, [options,] fn): fn must be a function") end
    local o = options("tf.variable_scope", VARIABLE_SCOPE_OPTIONS, opts)
    local reuse = o.reuse
    if reuse == false then reuse = nil end
    if reuse ~= nil and reuse ~= true and reuse ~= AUTO_REUSE then
      fail("tf.variable_scope: reuse must be true, false, nil or tf.AUTO_REUSE, got " .. tostring(reuse))
    end
    local g = G.get_default_graph()
    local st = var_state(g)
    local parent = current_scope(g)
    local function nested(name) return parent.name == "" and name or parent.name .. "/" .. name end
    local base, scope_name, name_scope
    if getmetatable(name_or_scope) == VariableScope then
      base = name_or_scope
      scope_name, name_scope = base.name, base.original_name_scope
      if name_scope == "" and scope_name ~= "" then name_scope = scope_name .. "/" end
    elseif type(name_or_scope) == "string" and name_or_scope ~= "" then
      scope_name, name_scope = nested(name_or_scope), name_or_scope
    elseif name_or_scope == nil and type(o.default_name) == "string" and o.default_name ~= "" then
      local want = nested(o.default_name)
      scope_name = want
      local i = 1
      while st.used_scope_names[scope_name] do scope_name = want .. "_" .. i; i = i + 1 end
      name_scope = o.default_name
    else
      fail("tf.variable_scope: name_or_scope must be a non-empty string or a VariableScope " ..
           "(or nil with the default_name option), got " .. tostring(name_or_scope))
    end
    st.used_scope_names[scope_name] = true
    local full_name_scope = C.mf_graph_push_name_scope(g.ptr, name_scope, core.status)
    if full_name_scope == nil then fail("tf.variable_scope: " .. ffi.string(C.mf_status_message(core.status))) end
    local scope = setmetatable({
      name = scope_name,
      reuse = reuse or (base and base.reuse) or parent.reuse or false,
      initializer = o.initializer or (base and base.initializer) or parent.initializer,
      dtype = o.dtype and core.as_dtype(o.dtype, "tf.variable_scope") or (base and base.dtype) or parent.dtype,
      original_name_scope = ffi.string(full_name_scope),
    }, VariableScope)
    local results = {pcall(G.with_pushed, st.scopes, scope, fn, scope)}
    C.mf_graph_pop_name_scope(g.ptr)
    if not results[1] then error(results[2], 0) end
    return unpack(results, 2, table.maxn(results))
  end

  -- tf.make_template(name, fn): a function whose first call creates fn's
  -- variables in a new variable scope `name` and whose later calls reuse them.
  function tf.make_template(name, fn)
    if type(name) ~= "string" or type(fn) ~= "function" then
      fail("tf.make_template(name, fn): a name and a function are required")
    end
    local captured
    return function(...)
      local n, call_args = select("#", ...), {...}
      if not captured then
        return tf.variable_scope(nil, {default_name = name}, function(scope)
          captured = scope
          return fn(unpack(call_args, 1, n))
        end)
      end
      return tf.variable_scope(captured, {reuse = true}, function()
        local trainable = G.get_default_graph():get_collection_ref(GraphKeys.TRAINABLE_VARIABLES)
        local before = #trainable
        local results = {fn(unpack(call_args, 1, n))}
        if #trainable > before then
          fail("Trainable variable created when calling a template after the first time, perhaps you " ..
               "used tf.Variable when you meant tf.get_variable: " .. trainable[#trainable].name)
        end
        return unpack(results, 1, table.maxn(results))
      end)
    end
  end

  -- Ordering and grouping -------------------------------------------------------------
  -- The ops of a list of ops and tensors (a tensor stands for its op).
  local function op_list(fname, list)
    local out = {}
    for i, x in ipairs(list) do
      if G.is_tensor(x) then out[#out + 1] = x.op
      elseif G.is_operation(x) then out[#out + 1] = x
      else fail(fname .. ": element " .. i .. " is not a Tensor or an Operation: " .. tostring(x)) end
    end
    return out
  end

  -- tf.control_dependencies(list, fn): every op built in fn runs after the ops
  -- of the list; nil instead of a list lifts the dependencies in force.
  function tf.control_dependencies(control_inputs, fn, ...)
    if type(fn) ~= "function" then fail("tf.control_dependencies(list, fn): fn must be a function") end
    local g = G.get_default_graph()
    if control_inputs == nil then return without_control_deps(g, fn, ...) end
    if type(control_inputs) ~= "table" or getmetatable(control_inputs) ~= nil then
      control_inputs = {control_inputs}
    end
    local deps = op_list("tf.control_dependencies", control_inputs)
    for _, op in ipairs(deps) do
      if op.graph ~= g then
        fail("tf.control_dependencies: " .. tostring(op) .. " is not an element of the default graph")
      end
    end
    return G.with_pushed(g._control_deps, deps, fn, ...)
  end

  -- tf.group(a, b, ..., {name=}): an op that runs all of them (lists are
  -- flattened; tensors stand for their ops).
  function tf.group(...)
    local n = select("#", ...)
    local last = n > 0 and select(n, ...) or nil
    local name
    if is_options(last) then name = options("tf.group", GROUP_OPTIONS, last).name; n = n - 1 end
    local deps, seen = {}, {}
    local function add(x)
      if type(x) == "table" and getmetatable(x) == nil then
        for _, y in ipairs(x) do add(y) end
        return
      end
      local op = op_list("tf.group", {x})[1]
      if not seen[op] then seen[op] = true; deps[#deps + 1] = op end
    end
    for i = 1, n do
      local x = select(i, ...)
      if x ~= nil then add(x) end
    end
    return G.build{"NoOp", control_inputs = deps, name = name or "group_deps",
                   graph = deps[1] and deps[1].graph or G.get_default_graph()}
  end
end
