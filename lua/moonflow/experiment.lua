-- experiment.lua — tf.contrib.learn.Experiment and
-- tf.contrib.learn.learn_runner.run: an estimator with its training and
-- evaluation inputs, and the schedule that runs it (here, on one machine:
-- "train", "evaluate", "train_and_evaluate", "test").
--
-- train_and_evaluate trains to train_steps (or the end of the input); with
-- min_eval_frequency it also evaluates after each checkpoint at least that
-- many steps after the last evaluation (a saving listener, so the training
-- input runs on undisturbed), and always once at the end.
local core = require("moonflow.core")
local args = require("moonflow.args")
local estimator_types = require("moonflow.estimator")

local fail, options = core.fail, args.options

local Experiment = {}
Experiment.__index = Experiment

local EXPERIMENT_OPTIONS = {"train_steps", "eval_steps", "min_eval_frequency", positional = 0, empty = true}
local RUN_OPTIONS = {"output_dir", "schedule", "run_config", "hparams", empty = true}
-- What learn_runner.run may be asked to run.
local SCHEDULES = {train = true, evaluate = true, train_and_evaluate = true, test = true}

local function positive(v, fname, what)
  if v ~= nil and not (args.is_integer(v) and v > 0) then
    fail(string.format("%s: ValueError: %s must be a positive integer, got %s", fname, what, args.describe(v)))
  end
end

return function(tf)
  tf.contrib = tf.contrib or {}
  tf.contrib.learn = tf.contrib.learn or {}

  -- tf.contrib.learn.Experiment(estimator, train_input_fn, eval_input_fn,
  -- {train_steps=, eval_steps = 100, min_eval_frequency=}).
  function tf.contrib.learn.Experiment(estimator, train_input_fn, eval_input_fn, ...)
    local fname = "tf.contrib.learn.Experiment"
    if getmetatable(estimator) ~= estimator_types.Estimator then
      fail(fname .. ": ValueError: estimator must be a tf.estimator.Estimator, got " .. args.describe(estimator))
    end
    if type(train_input_fn) ~= "function" then
      fail(fname .. ": train_input_fn must be a function, got " .. args.describe(train_input_fn))
    end
    if type(eval_input_fn) ~= "function" then
      fail(fname .. ": eval_input_fn must be a function, got " .. args.describe(eval_input_fn))
    end
    local o = options(fname, EXPERIMENT_OPTIONS, ...)
    positive(o.train_steps, fname, "train_steps")
    positive(o.eval_steps, fname, "eval_steps")
    positive(o.min_eval_frequency, fname, "min_eval_frequency")
    return setmetatable({estimator = estimator, train_input_fn = train_input_fn, eval_input_fn = eval_input_fn,
                         train_steps = o.train_steps, eval_steps = o.eval_steps or 100,
                         min_eval_frequency = o.min_eval_frequency}, Experiment)
  end

  function Experiment:__tostring()
    return "<tf.contrib.learn.Experiment model_dir=" .. self.estimator.model_dir .. ">"
  end

  -- exp:train(): trains to train_steps (or the end of the input); returns the estimator.
  function Experiment:train(saving_listeners)
    return self.estimator:train(self.train_input_fn, {max_steps = self.train_steps, saving_listeners = saving_listeners})
  end

  -- exp:evaluate(name): the estimator's metrics over eval_steps batches.
  function Experiment:evaluate(name)
    return self.estimator:evaluate(self.eval_input_fn, {steps = self.eval_steps, name = name})
  end

  -- exp:train_and_evaluate(): trains, evaluating as it goes with
  -- min_eval_frequency; returns the final evaluation.
  function Experiment:train_and_evaluate()
    local listeners
    if self.min_eval_frequency then
      local last_eval
      listeners = {{
        after_save = function(_, _, step)
          if last_eval == nil or step - last_eval >= self.min_eval_frequency then
            last_eval = step
            self:evaluate()
          end
        end,
      }}
    end
    self:train(listeners)
    return self:evaluate()
  end

  -- exp:test(): one training step and one evaluation step, to see that
  -- both graphs build and run.
  function Experiment:test()
    self.estimator:train(self.train_input_fn, {steps = 1})
    return self.estimator:evaluate(self.eval_input_fn, {steps = 1})
  end

  tf.contrib.learn.learn_runner = tf.contrib.learn.learn_runner or {}

  -- learn_runner.run(experiment_fn, output_dir, schedule, run_config,
  -- hparams) or (experiment_fn, {run_config=, schedule=, hparams=}):
  -- experiment_fn(run_config, hparams) makes the Experiment; the schedule
  -- (default "train_and_evaluate") names the method run; its result returned.
  function tf.contrib.learn.learn_runner.run(experiment_fn, ...)
    local fname = "tf.contrib.learn.learn_runner.run"
    local o = options(fname, RUN_OPTIONS, ...)
    if type(experiment_fn) ~= "function" then
      fail(fname .. ": ValueError: experiment_fn must be callable, got " .. args.describe(experiment_fn))
    end
    if o.output_dir ~= nil and o.run_config ~= nil then
      fail(fname .. ": ValueError: Cannot provide both output_dir and run_config")
    end
    if o.output_dir == nil and o.run_config == nil then
      fail(fname .. ": ValueError: Must provide either `output_dir` or `run_config`")
    end
    local config = o.run_config
    if config ~= nil and getmetatable(config) ~= estimator_types.RunConfig then
      fail(fname .. ": ValueError: `run_config` must be an instance of RunConfig, got " .. args.describe(config))
    end
    config = config or tf.estimator.RunConfig({model_dir = o.output_dir})
    local schedule = o.schedule or "train_and_evaluate"
    if not SCHEDULES[schedule] then
      fail(string.format("%s: ValueError: Schedule references non-existent task %s (one of train, evaluate, " ..
                         "train_and_evaluate, test)", fname, tostring(schedule)))
    end
    local experiment = experiment_fn(config, o.hparams)
    if getmetatable(experiment) ~= Experiment then
      fail(fname .. ": TypeError: Experiment builder did not return an Experiment instance, got " ..
           args.describe(experiment) .. " instead.")
    end
    return experiment[schedule](experiment)
  end
end
