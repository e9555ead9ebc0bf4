-- estimator.lua — tf.estimator: Estimator, EstimatorSpec, ModeKeys, RunConfig.
--
-- An Estimator owns a model function and a model directory. Every call
-- (train, evaluate, predict) builds a graph of its own: the global step,
-- then the input function's tensors, then model_fn(features, labels, mode,
-- params, config)'s EstimatorSpec; a session on it starts from the newest
-- checkpoint in the model directory (or from the initializers when there is
-- none), so a program killed and started again resumes where its last
-- checkpoint was. train saves every save_checkpoints_steps steps (at
-- multiples of it) or save_checkpoints_secs seconds, and when it stops;
-- the saver keeps the last keep_checkpoint_max checkpoints, those an earlier
-- run left included (Saver:recover_last_checkpoints).
--
-- Input functions are called as input_fn(params, config, mode) and return
-- either a tf.data.Dataset whose elements are {features, labels} (or
-- features alone) or features and labels as two values; features are a
-- tensor or a table of them. Training and evaluation stop at max_steps /
-- steps or when the input ends (OutOfRangeError), as in TensorFlow.
--
-- Output: a progress line (progress.lua) on stderr while training and
-- evaluating, and one line when each call ends; log_step_count_steps = 0
-- keeps them quiet. Scalar summaries (event files) are not written.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local Array = require("moonflow.array")
local args = require("moonflow.args")
local Progress = require("moonflow.progress")
local summary = require("moonflow.summary")
local Dataset = require("moonflow.data.dataset").Dataset
local now = require("moonflow.clock")
local ffi = require("ffi")

local fail, options = core.fail, args.options

local ModeKeys = {TRAIN = "train", EVAL = "eval", PREDICT = "infer"}
local MODES = {train = true, eval = true, infer = true}

-- RunConfig ---------------------------------------------------------------------------
local RunConfig = {}
RunConfig.__index = RunConfig

local RUN_CONFIG_OPTIONS = {"model_dir", "tf_random_seed", "save_checkpoints_steps", "save_checkpoints_secs",
                            "session_config", "keep_checkpoint_max", "log_step_count_steps", "save_summary_steps",
                            positional = 0, empty = true}
local DEFAULT_CHECKPOINT_SECS = 600

local function non_negative_integer(v, fname, what)
  if v ~= nil and not (args.is_integer(v) and v >= 0) then
    fail(string.format("%s: ValueError: %s must be a non-negative integer, got %s", fname, what, args.describe(v)))
  end
end

-- tf.estimator.RunConfig({model_dir=, tf_random_seed=, save_checkpoints_steps=,
-- save_checkpoints_secs=, session_config=, keep_checkpoint_max=,
-- log_step_count_steps=, save_summary_steps=}).
local function run_config(o, fname)
  fname = fname or "tf.estimator.RunConfig"
  o = options(fname, RUN_CONFIG_OPTIONS, o)
  if o.model_dir ~= nil and (type(o.model_dir) ~= "string" or o.model_dir == "") then
    fail(fname .. ": model_dir must be a directory's path, got " .. args.describe(o.model_dir))
  end
  if o.save_checkpoints_steps and o.save_checkpoints_secs then
    fail(fname .. ": ValueError: Can not provide both save_checkpoints_steps and save_checkpoints_secs.")
  end
  non_negative_integer(o.save_checkpoints_steps, fname, "save_checkpoints_steps")
  if o.save_checkpoints_secs ~= nil and not (type(o.save_checkpoints_secs) == "number" and o.save_checkpoints_secs >= 0) then
    fail(fname .. ": ValueError: save_checkpoints_secs must be a non-negative number of seconds, got " ..
         args.describe(o.save_checkpoints_secs))
  end
  non_negative_integer(o.keep_checkpoint_max, fname, "keep_checkpoint_max")
  non_negative_integer(o.log_step_count_steps, fname, "log_step_count_steps")
  non_negative_integer(o.save_summary_steps, fname, "save_summary_steps")
  if o.tf_random_seed ~= nil and not args.is_integer(o.tf_random_seed) then
    fail(fname .. ": tf_random_seed must be an integer, got " .. args.describe(o.tf_random_seed))
  end
  if o.session_config ~= nil and not args.is_options(o.session_config, true) then
    fail(fname .. ": session_config must be a table of tf.Session options, got " .. args.describe(o.session_config))
  end
  local self = setmetatable({}, RunConfig)
  for _, k in ipairs(RUN_CONFIG_OPTIONS) do self[k] = o[k] end
  if not self.save_checkpoints_steps and not self.save_checkpoints_secs then
    self.save_checkpoints_secs = DEFAULT_CHECKPOINT_SECS
  end
  self.keep_checkpoint_max = self.keep_checkpoint_max or 5
  self.log_step_count_steps = self.log_step_count_steps or 100
  self.save_summary_steps = self.save_summary_steps or 100
  return self
end

-- config:replace({...}): a copy with the given fields changed (giving
-- save_checkpoints_steps drops the other's default, and back).
function RunConfig:replace(changes)
  if not args.is_options(changes, true) then fail("RunConfig:replace: a table of fields to change is required") end
  local o = {}
  for _, k in ipairs(RUN_CONFIG_OPTIONS) do o[k] = self[k] end
  if changes.save_checkpoints_steps ~= nil then o.save_checkpoints_secs = nil end
  if changes.save_checkpoints_secs ~= nil then o.save_checkpoints_steps = nil end
  for k, v in pairs(changes) do o[k] = v end
  return run_config(o, "RunConfig:replace")
end

function RunConfig:__tostring()
  return string.format("<tf.estimator.RunConfig model_dir=%s save_checkpoints_%s=%s keep_checkpoint_max=%d>",
                       tostring(self.model_dir), self.save_checkpoints_steps and "steps" or "secs",
                       tostring(self.save_checkpoints_steps or self.save_checkpoints_secs), self.keep_checkpoint_max)
end

-- EstimatorSpec -----------------------------------------------------------------------
local EstimatorSpec = {}
EstimatorSpec.__index = EstimatorSpec
local SPEC_OPTIONS = {"predictions", "loss", "train_op", "eval_metric_ops", empty = true}

local function is_op(x) return getmetatable(x) == G.Operation end

-- tf.estimator.EstimatorSpec(mode, predictions, loss, train_op,
-- eval_metric_ops) or (mode, {...}) or ({mode =, ...}), checked as TensorFlow does.
local function estimator_spec(mode, ...)
  local fname = "tf.estimator.EstimatorSpec"
  if args.is_options(mode) and select("#", ...) == 0 then
    local o = {}
    for k, v in pairs(mode) do if k ~= "mode" then o[k] = v end end
    return estimator_spec(mode.mode, o)
  end
  if not MODES[mode] then
    fail(fname .. ": ValueError: mode must be one of tf.estimator.ModeKeys (\"train\", \"eval\", \"infer\"), got " ..
         args.describe(mode))
  end
  local o = options(fname, SPEC_OPTIONS, ...)
  local g = G.get_default_graph()
  local function check_graph(t, what)
    if t.graph ~= g then
      fail(fname .. ": ValueError: " .. what .. " must be from the default graph (the one the Estimator builds " ..
           "and calls model_fn in): " .. tostring(t))
    end
  end
  local loss = o.loss
  if loss ~= nil then
    if not G.is_tensor(loss) then fail(fname .. ": TypeError: loss must be Tensor, given: " .. args.describe(loss)) end
    local dims = loss:get_shape().dims
    if dims and not (#dims == 0 or (#dims == 1 and dims[1] == 1)) then
      fail(fname .. ": ValueError: Loss must be scalar, given: " .. tostring(loss))
    end
    if not loss.dtype.is_floating then fail(fname .. ": TypeError: loss must be float32 or float64: " .. tostring(loss)) end
    check_graph(loss, "loss")
  end
  local predictions = o.predictions
  if predictions ~= nil then
    if G.is_tensor(predictions) then check_graph(predictions, "predictions")
    elseif args.is_plain(predictions) and predictions[1] == nil and next(predictions) ~= nil then
      for k, t in pairs(predictions) do
        if type(k) ~= "string" or not G.is_tensor(t) then
          fail(fname .. ": TypeError: predictions[" .. tostring(k) .. "] must be Tensor, given: " .. args.describe(t))
        end
        check_graph(t, "predictions['" .. k .. "']")
      end
    else
      fail(fname .. ": TypeError: predictions must be a Tensor or a table {name = Tensor}, given: " ..
           args.describe(predictions))
    end
  end
  local train_op = o.train_op
  if train_op ~= nil then
    if not (G.is_tensor(train_op) or is_op(train_op)) then
      fail(fname .. ": TypeError: train_op must be Operation or Tensor, given: " .. args.describe(train_op))
    end
    check_graph(train_op, "train_op")
  end
  local metrics = o.eval_metric_ops or {}
  if not args.is_plain(metrics) or metrics[1] ~= nil then
    fail(fname .. ": TypeError: eval_metric_ops must be a table {name = {value, update_op}}, given: " ..
         args.describe(metrics))
  end
  for k, pair in pairs(metrics) do
    if type(k) ~= "string" or not args.is_plain(pair) or #pair ~= 2 or not G.is_tensor(pair[1]) or
       not (G.is_tensor(pair[2]) or is_op(pair[2])) then
      fail(string.format("%s: TypeError: Values of eval_metric_ops must be (metric_value, update_op) pairs, " ..
                         "given: %s for key: %s (write {tf.metrics.accuracy(labels, predictions)})", fname,
                         args.describe(pair), tostring(k)))
    end
    check_graph(pair[1], "eval_metric_ops['" .. k .. "']")
  end
  if mode == ModeKeys.TRAIN and train_op == nil then fail(fname .. ": ValueError: Missing train_op.") end
  if mode ~= ModeKeys.PREDICT and loss == nil then fail(fname .. ": ValueError: Missing loss.") end
  if mode == ModeKeys.PREDICT and predictions == nil then fail(fname .. ": ValueError: Missing predictions.") end
  return setmetatable({mode = mode, predictions = predictions, loss = loss, train_op = train_op,
                       eval_metric_ops = metrics}, EstimatorSpec)
end

function EstimatorSpec:__tostring() return "<tf.estimator.EstimatorSpec mode=" .. self.mode .. ">" end

-- Estimator ------------------------------------------------------------------------
local Estimator = {}
Estimator.__index = Estimator

local ESTIMATOR_OPTIONS = {"model_dir", "config", "params", empty = true}
local TRAIN_OPTIONS = {"hooks", "steps", "max_steps", "saving_listeners", empty = true}
local LISTENER_METHODS = {"begin", "before_save", "after_save", "end"}
local EVALUATE_OPTIONS = {"steps", "hooks", "checkpoint_path", "name", empty = true}
local PREDICT_OPTIONS = {"predict_keys", "hooks", "checkpoint_path", "yield_single_examples", empty = true}

local function is_end_of_input(err) return tostring(err):find("OutOfRangeError", 1, true) ~= nil end

local function temporary_dir()
  local p = io.popen("mktemp -d 2>/dev/null")
  local dir = p and p:read("*l")
  if p then p:close() end
  if not dir or dir == "" then fail("tf.estimator.Estimator: cannot make a temporary model directory (mktemp -d)") end
  return dir
end

local function make_dirs(dir, fname)
  local status = os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
  if status ~= 0 and status ~= true then  -- (LuaJIT gives the status; Lua 5.2 compatibility true or nil)
    fail(fname .. ": cannot create the model directory " .. dir)
  end
end

-- The module: its classes (for type checks: experiment.lua), called with
-- tf to install tf.estimator.
local M = {Estimator = Estimator, RunConfig = RunConfig}

return setmetatable(M, {__call = function(_, tf)
  tf.estimator = tf.estimator or {}
  tf.estimator.ModeKeys = ModeKeys
  tf.estimator.RunConfig = function(o) return run_config(o) end
  tf.estimator.EstimatorSpec = estimator_spec

  -- tf.estimator.Estimator(model_fn, model_dir, config, params) or (model_fn, {model_dir=, config=, params=}).
  function tf.estimator.Estimator(model_fn, ...)
    local fname = "tf.estimator.Estimator"
    if type(model_fn) ~= "function" then
      fail(fname .. ": model_fn must be a function (features, labels, mode, params, config) -> EstimatorSpec, got " ..
           args.describe(model_fn))
    end
    local o = options(fname, ESTIMATOR_OPTIONS, ...)
    local config = o.config
    if config == nil then config = run_config({})
    elseif getmetatable(config) ~= RunConfig then
      fail(fname .. ": config must be a tf.estimator.RunConfig, got " .. args.describe(config))
    end
    if o.model_dir ~= nil then
      if config.model_dir and config.model_dir ~= o.model_dir then
        fail(string.format("%s: ValueError: model_dir are set both in constructor and RunConfig, but with " ..
                           "different values. In constructor: '%s', in RunConfig: '%s'", fname, o.model_dir,
                           config.model_dir))
      end
      config = config:replace({model_dir = o.model_dir})
    end
    if not config.model_dir then
      config = config:replace({model_dir = temporary_dir()})
      io.stderr:write("Using temporary folder as model directory: ", config.model_dir, "\n")
    end
    if o.params ~= nil and type(o.params) ~= "table" then
      fail(fname .. ": params must be a table or tf.contrib.training.HParams, got " .. args.describe(o.params))
    end
    return setmetatable({model_fn = model_fn, config = config, model_dir = config.model_dir, params = o.params or {}},
                        Estimator)
  end

  function Estimator:__tostring() return "<tf.estimator.Estimator model_dir=" .. self.model_dir .. ">" end

  -- features, labels from input_fn (a Dataset's next element, or its two results).
  local function call_input_fn(self, input_fn, mode, fname)
    if type(input_fn) ~= "function" then
      fail(fname .. ": input_fn must be a function returning a tf.data.Dataset or (features, labels), got " ..
           args.describe(input_fn))
    end
    local features, labels = input_fn(self.params, self.config, mode)
    if getmetatable(features) == Dataset then
      local element = features:make_one_shot_iterator():get_next()
      if args.is_plain(element) and #element == 2 and next(element, 2) == nil then
        features, labels = element[1], element[2]
      else
        features, labels = element, nil
      end
    end
    if features == nil then
      fail(fname .. ": input_fn returned nothing; it must return a tf.data.Dataset or (features, labels)")
    end
    local g = G.get_default_graph()
    for what, value in pairs({features = features, labels = labels or false}) do
      for _, t in pairs(G.is_tensor(value) and {value} or args.is_plain(value) and value or {}) do
        if G.is_tensor(t) and t.graph ~= g then
          fail(fname .. ": input_fn returned " .. what .. " from another graph: " .. tostring(t) .. "; each call " ..
               "of train, evaluate and predict builds a graph of its own, so input_fn must make its tensors " ..
               "when it is called (tf.Array values are graph-free)")
        end
      end
    end
    return features, labels
  end

  -- The graph of one call: the global step, the input, model_fn's spec.
  local function build(self, input_fn, mode, fname)
    local g = tf.Graph()
    return g:as_default(function()
      if self.config.tf_random_seed then tf.set_random_seed(self.config.tf_random_seed) end
      local global_step = tf.train.get_or_create_global_step()
      local features, labels = call_input_fn(self, input_fn, mode, fname)
      local spec = self.model_fn(features, labels, mode, self.params, self.config)
      if getmetatable(spec) ~= EstimatorSpec then
        fail(fname .. ": model_fn must return a tf.estimator.EstimatorSpec, got " .. args.describe(spec))
      end
      if spec.mode ~= mode then
        fail(fname .. ": model_fn was called in mode '" .. mode .. "' but returned an EstimatorSpec for '" ..
             spec.mode .. "'")
      end
      return g, spec, global_step
    end)
  end

  -- A session on g started from checkpoint_path, the newest checkpoint, or
  -- the initializers; local variables (metrics) initialized. Returns it and
  -- the saver.
  local function start_session(self, g, checkpoint_path, fname)
    return g:as_default(function()
      local saver = tf.train.Saver(nil, {max_to_keep = self.config.keep_checkpoint_max})
      local local_init = tf.local_variables_initializer()
      local global_init = tf.global_variables_initializer()
      local options = {graph = g}
      for k, v in pairs(self.config.session_config or {}) do options[k] = v end
      local sess = tf.Session(options)
      local path = checkpoint_path or tf.train.latest_checkpoint(self.model_dir)
      if path then
        saver:restore(sess, path)
        local state = tf.train.get_checkpoint_state(self.model_dir)
        if state then saver:recover_last_checkpoints(state.all_model_checkpoint_paths) end
      else
        if fname ~= "Estimator:train" and self.config.log_step_count_steps > 0 then
          io.stderr:write("Could not find trained model in model_dir: ", self.model_dir,
                          ", running initialization to ", fname == "Estimator:evaluate" and "evaluate" or "predict",
                          ".\n")
        end
        sess:run(global_init)
      end
      sess:run(local_init)
      return sess, saver, path
    end)
  end

  local function positive_steps(v, fname, what)
    if v ~= nil and not (args.is_integer(v) and v > 0) then
      fail(string.format("%s: ValueError: Must specify %s > 0, given: %s", fname, what, args.describe(v)))
    end
  end

  local function no_hooks(o, fname)
    if o.hooks ~= nil and not (args.is_plain(o.hooks) and next(o.hooks) == nil) then
      fail(fname .. ": hooks (SessionRunHook objects) are not supported; leave the option out")
    end
  end

  -- saving_listeners: a list of objects with any of the methods begin(),
  -- before_save(sess, step), after_save(sess, step), end(sess, step), as
  -- TensorFlow's CheckpointSaverListener.
  local function check_listeners(listeners, fname)
    if listeners == nil then return {} end
    if not args.is_plain(listeners) then fail(fname .. ": saving_listeners must be a list, got " .. args.describe(listeners)) end
    for i, l in ipairs(listeners) do
      local any = false
      for _, m in ipairs(LISTENER_METHODS) do
        local f = type(l) == "table" and l[m]
        if f ~= nil and f ~= false then
          if type(f) ~= "function" then fail(string.format("%s: saving_listeners[%d].%s must be a function", fname, i, m)) end
          any = true
        end
      end
      if not any then
        fail(string.format("%s: saving_listeners[%d] has none of the methods begin, before_save, after_save, end",
                           fname, i))
      end
    end
    return listeners
  end

  local function notify(listeners, method, ...)
    for _, l in ipairs(listeners) do
      if l[method] then l[method](l, ...) end
    end
  end

  -- est:train(input_fn, hooks, steps, max_steps, saving_listeners) or
  -- (input_fn, {steps=} | {max_steps=}, saving_listeners=): returns est.
  function Estimator:train(input_fn, ...)
    local fname = "Estimator:train"
    local o = options(fname, TRAIN_OPTIONS, ...)
    no_hooks(o, fname)
    local listeners = check_listeners(o.saving_listeners, fname)
    if o.steps ~= nil and o.max_steps ~= nil then fail(fname .. ": ValueError: Can not provide both steps and max_steps.") end
    positive_steps(o.steps, fname, "steps")
    positive_steps(o.max_steps, fname, "max_steps")
    local config = self.config
    local quiet = config.log_step_count_steps == 0
    if o.max_steps then
      local latest = tf.train.latest_checkpoint(self.model_dir)
      local saved = latest and tonumber(latest:match("%-(%d+)$"))
      if saved and saved >= o.max_steps then
        if not quiet then io.stderr:write("Skipping training since max_steps has already saved.\n") end
        return self
      end
    end
    make_dirs(self.model_dir, fname)
    local g, spec, global_step = build(self, input_fn, ModeKeys.TRAIN, fname)
    local sess, saver = start_session(self, g, nil, fname)
    local step = sess:run(global_step)
    local first = step
    local last = o.max_steps or (o.steps and step + o.steps)
    if last and step >= last then
      if not quiet then io.stderr:write("Skipping training since max_steps has already saved.\n") end
      sess:close()
      return self
    end
    local progress = not quiet and Progress.new({label = "train", first = step, last = last,
                                                 every = config.log_step_count_steps})
    local prefix = self.model_dir .. "/model.ckpt"
    local saved_step, saved_at = first, now()
    local function save()
      notify(listeners, "before_save", sess, step)
      local path = saver:save(sess, prefix, {global_step = step})
      saved_step, saved_at = step, now()
      if progress and #listeners > 0 then progress:pause() end
      notify(listeners, "after_save", sess, step)
      return path
    end
    notify(listeners, "begin")
    local run = sess:make_callable({spec.loss, spec.train_op})
    local loss
    -- TensorFlow's summaries of training in model_dir: the loss every
    -- save_summary_steps, global_step/sec since the last write (rank 0 alone
    -- under moonflow.mpi, as checkpoints).
    local every = core.writes_checkpoints and config.save_summary_steps or 0
    local writer = every > 0 and tf.summary.FileWriter(self.model_dir) or nil
    local summary_step, summary_at  -- of the last write; none yet (the first step's time holds the setup's)
    local function write_summary()
      local t = now()
      local values = {loss = loss}
      if summary_step and step > summary_step and t > summary_at then
        values["global_step/sec"] = (step - summary_step) / (t - summary_at)
      end
      writer:add_summary(summary.scalars(values), step)
      summary_step, summary_at = step, t
    end
    while not last or step < last do
      local ok, result = pcall(run)
      if not ok then
        if is_end_of_input(result) then break end
        error(result, 0)
      end
      loss = result[1]
      if step == first then
        -- Every step must advance the global step, or max_steps would never come.
        local advanced = sess:run(global_step)
        if advanced ~= first + 1 then
          sess:close()
          fail(string.format("%s: the train_op moved the global step from %d to %d in one step; it must add 1 " ..
                             "(optimizer:minimize(loss, {global_step = tf.train.get_global_step()}))", fname, first,
                             advanced))
        end
      end
      step = step + 1
      if loss ~= loss then
        sess:close()
        fail(fname .. ": NanLossDuringTrainingError: NaN loss during training (step " .. step .. ").")
      end
      if progress then progress:update(step, loss) end
      if writer and (step % every == 0 or step == first + 1) then write_summary() end
      if config.save_checkpoints_steps and config.save_checkpoints_steps > 0 then
        if step % config.save_checkpoints_steps == 0 then save() end
      elseif config.save_checkpoints_secs and now() - saved_at >= config.save_checkpoints_secs then
        save()
      end
    end
    if writer then
      if loss and summary_step ~= step then write_summary() end
      writer:close()
    end
    local path = saved_step ~= step and save() or tf.train.latest_checkpoint(self.model_dir)
    if progress then progress:finish(step, loss, "saved " .. tostring(path)) end
    notify(listeners, "end", sess, step)
    sess:close()
    return self
  end

  -- The fetch of every metric's update op and every value, "loss" among them.
  local function metric_fetches(spec, fname)
    if spec.eval_metric_ops.loss then
      fail(fname .. ': ValueError: Metric with name "loss" is not allowed, because Estimator already defines a ' ..
           "default metric with the same name.")
    end
    local values, updates = {}, {}
    values.loss, updates.loss = tf.metrics.mean(spec.loss)
    for k, pair in pairs(spec.eval_metric_ops) do values[k], updates[k] = pair[1], pair[2] end
    return values, updates
  end

  local function format_metrics(result)
    local keys = {}
    for k in pairs(result) do if k ~= "global_step" then keys[#keys + 1] = k end end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do
      local v = result[k]
      parts[#parts + 1] = k .. " = " .. (type(v) == "number" and string.format("%.6g", v) or tostring(v))
    end
    parts[#parts + 1] = "global_step = " .. tostring(result.global_step)
    return table.concat(parts, ", ")
  end

  -- est:evaluate(input_fn, steps, hooks, checkpoint_path, name): {metric =
  -- value, loss =, global_step =} over `steps` batches or the whole input.
  function Estimator:evaluate(input_fn, ...)
    local fname = "Estimator:evaluate"
    local o = options(fname, EVALUATE_OPTIONS, ...)
    no_hooks(o, fname)
    positive_steps(o.steps, fname, "steps")
    if o.checkpoint_path ~= nil and type(o.checkpoint_path) ~= "string" then
      fail(fname .. ": checkpoint_path must be a path, got " .. args.describe(o.checkpoint_path))
    end
    local g, spec, global_step = build(self, input_fn, ModeKeys.EVAL, fname)
    local values, updates = g:as_default(function() return metric_fetches(spec, fname) end)
    local sess = start_session(self, g, o.checkpoint_path, fname)
    local quiet = self.config.log_step_count_steps == 0
    local progress = not quiet and Progress.new({label = "evaluate" .. (o.name and " " .. o.name or ""), first = 0,
                                                 last = o.steps, every = self.config.log_step_count_steps})
    local update = sess:make_callable(updates)
    local n = 0
    while not o.steps or n < o.steps do
      local ok, result = pcall(update)
      if not ok then
        if is_end_of_input(result) then break end
        sess:close()
        error(result, 0)
      end
      n = n + 1
      if progress then progress:update(n, result.loss) end
    end
    local result = sess:run(values)
    result.global_step = sess:run(global_step)
    if progress then progress:finish(n, nil, format_metrics(result)) end
    -- The metrics (number-valued) as summaries of the global step in
    -- model_dir/eval (eval_<name>), as TensorFlow's evaluation writes them.
    if core.writes_checkpoints and self.config.save_summary_steps > 0 then
      local writer = tf.summary.FileWriter(self.model_dir .. "/eval" .. (o.name and "_" .. o.name or ""))
      local values = {}
      for k, v in pairs(result) do if k ~= "global_step" then values[k] = v end end
      writer:add_summary(summary.scalars(values), result.global_step)
      writer:close()
    end
    sess:close()
    return result
  end

  -- Row i (0-based) of a batch value: a number for a vector, an Array otherwise.
  local function row(a, i)
    if type(a) ~= "table" then return a end
    if a:rank() == 1 then return a:get(i) end
    local dims = a:shape()
    local rest = {unpack(dims, 2)}
    local out = Array.new(a.dtype, rest)
    local nbytes = out:size() * a.dtype.size
    ffi.copy(out:data(), ffi.cast("const char *", a:data()) + i * nbytes, nbytes)
    return out
  end

  local function batch_length(v)
    if type(v) ~= "table" or v:rank() == 0 then return nil end
    return v:shape()[1]
  end

  -- est:predict(input_fn, predict_keys, hooks, checkpoint_path,
  -- yield_single_examples): an iterator over the predictions, one example
  -- at a time (a value, or a table {name = value}), or one batch at a time
  -- with yield_single_examples = false.
  function Estimator:predict(input_fn, ...)
    local fname = "Estimator:predict"
    local o = options(fname, PREDICT_OPTIONS, ...)
    no_hooks(o, fname)
    local single = o.yield_single_examples ~= false
    local g, spec = build(self, input_fn, ModeKeys.PREDICT, fname)
    local fetches = spec.predictions
    if o.predict_keys ~= nil then
      if G.is_tensor(fetches) then
        fail(fname .. ": ValueError: predict_keys needs predictions that are a table {name = Tensor}")
      end
      local keys = type(o.predict_keys) == "string" and {o.predict_keys} or o.predict_keys
      local chosen = {}
      for _, k in ipairs(keys) do
        if not fetches[k] then
          local have = {}
          for name in pairs(fetches) do have[#have + 1] = name end
          table.sort(have)
          fail(string.format("%s: ValueError: Expected to run at least one output from {%s}, provided {%s}", fname,
                             table.concat(have, ", "), table.concat(keys, ", ")))
        end
        chosen[k] = fetches[k]
      end
      fetches = chosen
    end
    local sess = start_session(self, g, o.checkpoint_path, fname)
    local run = sess:make_callable(fetches)
    local batch, n, i = nil, 0, 0
    local done = false
    local function next_batch()
      local ok, result = pcall(run)
      if not ok then
        done = true
        sess:close()
        if is_end_of_input(result) then return false end
        error(result, 0)
      end
      batch, i = result, 0
      if G.is_tensor(fetches) then
        n = batch_length(batch)
      else
        n = nil
        for k, v in pairs(batch) do
          local len = batch_length(v)
          if single and not len then
            fail(fname .. ": ValueError: prediction '" .. k .. "' is a scalar per batch; yield_single_examples " ..
                 "needs a batch dimension in every prediction")
          end
          if n and len ~= n then
            fail(string.format("%s: ValueError: Batch length of predictions should be same. %s has different batch " ..
                               "length than others.", fname, k))
          end
          n = len
        end
      end
      if single and not n then
        fail(fname .. ": ValueError: the predictions have no batch dimension; yield_single_examples needs one")
      end
      return true
    end
    return function()
      if done then return nil end
      if not single then
        if not next_batch() then return nil end
        return batch
      end
      while not batch or i >= n do
        if not next_batch() then return nil end
      end
      local out
      if G.is_tensor(fetches) then out = row(batch, i)
      else
        out = {}
        for k, v in pairs(batch) do out[k] = row(v, i) end
      end
      i = i + 1
      return out
    end
  end

  -- est:latest_checkpoint(), est:get_variable_names(), est:get_variable_value(name).
  function Estimator:latest_checkpoint() return tf.train.latest_checkpoint(self.model_dir) end

  local function checkpoint_of(self, fname)
    local path = self:latest_checkpoint()
    if not path then fail(fname .. ": ValueError: no checkpoint in model_dir " .. self.model_dir .. "; train first") end
    return path
  end

  function Estimator:get_variable_names()
    local names = {}
    for i, entry in ipairs(tf.train.list_variables(checkpoint_of(self, "Estimator:get_variable_names"))) do
      names[i] = entry[1]
    end
    return names
  end

  function Estimator:get_variable_value(name)
    return tf.train.load_variable(checkpoint_of(self, "Estimator:get_variable_value"), name)
  end

end})
