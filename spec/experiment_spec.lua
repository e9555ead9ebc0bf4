-- tf.contrib.learn.Experiment (train, evaluate, train_and_evaluate with
-- evaluations after checkpoints, test), learn_runner.run (schedules,
-- hparams, TensorFlow's errors) and the Estimator's saving listeners.
local tf = require("moonflow")
local H = require("spec.helpers")

local XS, YS = {}, {}
for i = 1, 32 do XS[i] = {(i - 17) / 8}; YS[i] = {3 - XS[i][1]} end

local function input_fn() return tf.data.Dataset.from_tensor_slices({tf.constant(XS), tf.constant(YS)}):batch(8) end
local function train_input_fn() return input_fn():repeat_() end

local function model_fn(features, labels, mode, params)
  local pred = tf.layers.dense(features, 1)
  local loss = tf.reduce_mean(tf.square(pred - labels))
  local train_op = tf.train.GradientDescentOptimizer(params.learning_rate):minimize(loss,
    {global_step = tf.train.get_global_step()})
  return tf.estimator.EstimatorSpec(mode, {loss = loss, train_op = mode == "train" and train_op or nil})
end

local function config(dir)
  return tf.estimator.RunConfig({model_dir = dir, save_checkpoints_steps = 10, log_step_count_steps = 0,
                                 tf_random_seed = 5})
end

local function experiment(run_config, hparams, opts)
  local est = tf.estimator.Estimator(model_fn, {config = run_config, params = hparams})
  return tf.contrib.learn.Experiment(est, train_input_fn, input_fn, opts or {train_steps = 50})
end

describe("tf.contrib.learn.Experiment", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("trains to train_steps and evaluates, also after checkpoints with min_eval_frequency", function()
    local exp = experiment(config(dir), {learning_rate = 0.1}, {train_steps = 50, min_eval_frequency = 20})
    local evaluated = {}
    local evaluate = exp.evaluate
    exp.evaluate = function(self, name)
      local r = evaluate(self, name)
      evaluated[#evaluated + 1] = r.global_step
      return r
    end
    local result = exp:train_and_evaluate()
    -- checkpoints at 10, 20, ..., 50: evaluations at 10, 30 and 50, and the final one
    assert.same({10, 30, 50, 50}, evaluated)
    assert.equals(50, result.global_step)
    assert.is_true(result.loss < 0.01, "loss " .. result.loss)
  end)

  it("tests one step of each", function()
    local r = experiment(config(dir), {learning_rate = 0.1}):test()
    assert.equals(1, r.global_step)
  end)

  it("refuses what is not an Estimator or a function", function()
    assert.matches("estimator must be a tf.estimator.Estimator", H.error_of(tf.contrib.learn.Experiment, {}, input_fn,
                                                                           input_fn))
    local est = tf.estimator.Estimator(model_fn, {config = config(dir)})
    assert.matches("eval_input_fn must be a function", H.error_of(tf.contrib.learn.Experiment, est, input_fn, 3))
    assert.matches("train_steps must be a positive integer, got 0",
                   H.error_of(tf.contrib.learn.Experiment, est, input_fn, input_fn, {train_steps = 0}))
  end)
end)

describe("tf.contrib.learn.learn_runner.run", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)
  local run = tf.contrib.learn.learn_runner.run

  it("makes the experiment from run_config and hparams and runs the schedule", function()
    local hparams = tf.contrib.training.HParams({learning_rate = 0.5})
    hparams:parse("learning_rate=0.1")
    local seen
    local function experiment_fn(run_config, hp)
      seen = {run_config.model_dir, hp.learning_rate}
      return experiment(run_config, hp, {train_steps = 20})
    end
    local r = run(experiment_fn, {run_config = config(dir), hparams = hparams})
    assert.same({dir, 0.1}, seen)
    assert.equals(20, r.global_step)
    assert.equals(dir .. "/model.ckpt-20", run(experiment_fn, {run_config = config(dir), schedule = "train",
                                                                hparams = hparams}):latest_checkpoint())
    -- output_dir: a default RunConfig there, which logs (to stderr: caught here)
    local said, stderr = {}, io.stderr
    io.stderr = {write = function(_, ...) for _, s in ipairs({...}) do said[#said + 1] = s end end, flush = function() end}
    local ok, evaluated = pcall(run, experiment_fn, {output_dir = dir .. "/o", schedule = "evaluate", hparams = hparams})
    io.stderr = stderr
    assert(ok, evaluated)
    assert.equals(0, evaluated.global_step)  -- nothing trained there: the initializers' weights
    assert.matches("Could not find trained model in model_dir: " .. dir .. "/o, running initialization to evaluate.",
                   table.concat(said), 1, true)
  end)

  it("refuses bad arguments in TensorFlow's words", function()
    local function fn(c) return experiment(c, {learning_rate = 0.1}) end
    assert.matches("Must provide either `output_dir` or `run_config`", H.error_of(run, fn, {}))
    assert.matches("Cannot provide both output_dir and run_config",
                   H.error_of(run, fn, {output_dir = dir, run_config = config(dir)}))
    assert.matches("`run_config` must be an instance of RunConfig", H.error_of(run, fn, {run_config = {}}))
    assert.matches("Schedule references non%-existent task run_std_server",
                   H.error_of(run, fn, {run_config = config(dir), schedule = "run_std_server"}))
    assert.matches("Experiment builder did not return an Experiment instance, got 3 instead",
                   H.error_of(run, function() return 3 end, {run_config = config(dir)}))
  end)
end)

describe("Estimator:train's saving_listeners", function()
  it("hear begin, each save and the end", function()
    local dir = H.tmpdir()
    local calls = {}
    local listener = {
      begin = function() calls[#calls + 1] = "begin" end,
      before_save = function(_, sess, step) calls[#calls + 1] = "before " .. step; assert.is_table(sess) end,
      after_save = function(_, _, step) calls[#calls + 1] = "after " .. step end,
      ["end"] = function(_, _, step) calls[#calls + 1] = "end " .. step end,
    }
    local est = tf.estimator.Estimator(model_fn, {config = config(dir), params = {learning_rate = 0.1}})
    est:train(train_input_fn, {max_steps = 25, saving_listeners = {listener}})
    assert.same({"begin", "before 10", "after 10", "before 20", "after 20", "before 25", "after 25", "end 25"}, calls)
    assert.matches("saving_listeners%[1%] has none of the methods",
                   H.error_of(est.train, est, train_input_fn, {max_steps = 30, saving_listeners = {{}}}))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
