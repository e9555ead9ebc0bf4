-- tf.estimator: RunConfig, EstimatorSpec's checks, Estimator's train
-- (checkpoints every N steps and at the end, the last K kept, resuming from
-- the newest, stopping at max_steps, steps or the end of the input),
-- evaluate (metrics against hand computations), predict, and the progress line.
local tf = require("moonflow")
local H = require("spec.helpers")
local Progress = require("moonflow.progress")

-- y = 2x + 1 on 64 points of [-2, 2).
local XS, YS = {}, {}
for i = 1, 64 do XS[i] = {(i - 33) / 16}; YS[i] = {2 * XS[i][1] + 1} end

local function dataset(batch) return tf.data.Dataset.from_tensor_slices({tf.constant(XS), tf.constant(YS)}):batch(batch) end

local function linear_model(features, labels, mode, params)
  local pred = tf.layers.dense(features, 1, {name = "linear"})
  if mode == tf.estimator.ModeKeys.PREDICT then
    return tf.estimator.EstimatorSpec(mode, {predictions = {y = pred, twice = pred * 2}})
  end
  local loss = tf.reduce_mean(tf.square(pred - labels))
  local train_op = tf.train.GradientDescentOptimizer(params.learning_rate):minimize(loss,
    {global_step = tf.train.get_global_step()})
  return tf.estimator.EstimatorSpec{mode = mode, loss = loss, train_op = train_op,
                                    eval_metric_ops = {mae = {tf.metrics.mean(tf.abs(pred - labels))}}}
end

local function estimator(dir, config)
  return tf.estimator.Estimator(linear_model, {model_dir = dir, params = {learning_rate = 0.05},
    config = tf.estimator.RunConfig(config or {save_checkpoints_steps = 20, keep_checkpoint_max = 3,
                                               log_step_count_steps = 0, tf_random_seed = 3})})
end

-- The files of a model directory, less its event files (summaries).
local function ls(dir)
  local out = {}
  for _, f in ipairs(H.files_in(dir)) do
    if not f:match("^events%.out%.tfevents%.") and f ~= "eval" then out[#out + 1] = f end
  end
  return out
end

-- The scalars of the event files of a directory: {tag = {[step] = value}}.
local function scalars_in(dir)
  local out = {}
  for _, f in ipairs(H.files_in(dir)) do
    if f:match("^events%.out%.tfevents%.") then
      for e in tf.train.summary_iterator(dir .. "/" .. f) do
        for _, v in ipairs(e.summary and e.summary.value or {}) do
          out[v.tag] = out[v.tag] or {}
          out[v.tag][e.step] = v.simple_value
        end
      end
    end
  end
  return out
end

-- The whole data set at every step: the result of training is a function of the step alone.
local function full_batch() return tf.constant(XS), tf.constant(YS) end

describe("tf.estimator.RunConfig", function()
  it("has TensorFlow's defaults and checks", function()
    local c = tf.estimator.RunConfig()
    assert.equals(600, c.save_checkpoints_secs)
    assert.is_nil(c.save_checkpoints_steps)
    assert.equals(5, c.keep_checkpoint_max)
    assert.equals(100, c.log_step_count_steps)
    local d = c:replace({save_checkpoints_steps = 10, model_dir = "m"})
    assert.equals(10, d.save_checkpoints_steps)
    assert.is_nil(d.save_checkpoints_secs)
    assert.equals("m", d.model_dir)
    assert.is_nil(c.model_dir)
    assert.matches("Can not provide both save_checkpoints_steps and save_checkpoints_secs",
                   H.error_of(tf.estimator.RunConfig, {save_checkpoints_steps = 1, save_checkpoints_secs = 1}))
    assert.matches("keep_checkpoint_max must be a non%-negative integer, got %-1",
                   H.error_of(tf.estimator.RunConfig, {keep_checkpoint_max = -1}))
    assert.equals(100, c.save_summary_steps)
    assert.matches("save_summary_steps must be a non%-negative integer, got 1.5",
                   H.error_of(tf.estimator.RunConfig, {save_summary_steps = 1.5}))
  end)
end)

describe("tf.estimator.EstimatorSpec", function()
  it("checks each mode's requirements in TensorFlow's words", function()
    tf.reset_default_graph()
    local loss = tf.reduce_sum(tf.constant({1, 2}))
    local function err(...) return H.without_line(H.error_of(tf.estimator.EstimatorSpec, ...)) end
    assert.equals("tf.estimator.EstimatorSpec: ValueError: Missing train_op.", err("train", {loss = loss}))
    assert.equals("tf.estimator.EstimatorSpec: ValueError: Missing loss.", err("eval", {}))
    assert.equals("tf.estimator.EstimatorSpec: ValueError: Missing predictions.", err("infer", {}))
    assert.matches("mode must be one of tf.estimator.ModeKeys", err("predict", {predictions = loss}))
    assert.matches("ValueError: Loss must be scalar, given: Tensor", err("eval", {loss = tf.constant({1, 2})}))
    assert.matches("Values of eval_metric_ops must be %(metric_value, update_op%) pairs, given: .* for key: acc",
                   err("eval", {loss = loss, eval_metric_ops = {acc = loss}}))
    local other = tf.Graph():as_default(function() return tf.constant(1) end)
    assert.matches("loss must be from the default graph", err("eval", {loss = other}))
    local spec = tf.estimator.EstimatorSpec{mode = tf.estimator.ModeKeys.EVAL, loss = loss}
    assert.equals("eval", spec.mode)
    assert.equals(loss, spec.loss)
  end)
end)

describe("tf.estimator.Estimator", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("trains, checkpointing every N steps and at the end, keeping the last K", function()
    local est = estimator(dir .. "/m")
    assert.equals(est, est:train(function() return full_batch() end, {max_steps = 70}))
    assert.same({"checkpoint", "model.ckpt-40", "model.ckpt-60", "model.ckpt-70"}, ls(dir .. "/m"))
    local w = est:get_variable_value("linear/kernel"):get(0, 0)
    local b = est:get_variable_value("linear/bias"):get(0)
    assert.near(2, w, 0.05)
    assert.near(1, b, 0.05)
    assert.same({"global_step", "linear/bias", "linear/kernel"}, est:get_variable_names())
    -- steps counts from where it is; max_steps already reached does nothing
    est:train(function() return full_batch() end, {steps = 15})
    assert.equals(85, tf.train.load_variable(est:latest_checkpoint(), "global_step"):get())
    est:train(function() return full_batch() end, {max_steps = 80})
    assert.equals(dir .. "/m/model.ckpt-85", est:latest_checkpoint())
    -- the older run's checkpoints count towards keep_checkpoint_max (80: a multiple of 20)
    assert.same({"checkpoint", "model.ckpt-70", "model.ckpt-80", "model.ckpt-85"}, ls(dir .. "/m"))
  end)

  it("writes TensorFlow's summaries: loss and global_step/sec in model_dir, metrics in model_dir/eval", function()
    local est = tf.estimator.Estimator(linear_model, {model_dir = dir, params = {learning_rate = 0.05},
      config = tf.estimator.RunConfig({save_checkpoints_steps = 20, log_step_count_steps = 0,
                                       save_summary_steps = 25})})
    est:train(full_batch, {max_steps = 60})
    local train = scalars_in(dir)
    local steps = {}
    for step in pairs(train.loss) do steps[#steps + 1] = step end
    table.sort(steps)
    assert.same({1, 25, 50, 60}, steps)  -- the first step, every 25th, the last
    assert.is_nil(train["global_step/sec"][1])
    for _, step in ipairs({25, 50, 60}) do assert.truthy(train["global_step/sec"][step] > 0) end
    assert.truthy(train.loss[1] > train.loss[60])
    local r = est:evaluate(full_batch, {steps = 1})
    local eval = scalars_in(dir .. "/eval")
    assert.near(r.loss, eval.loss[60], 1e-6 * r.loss)
    assert.near(r.mae, eval.mae[60], 1e-6 * r.mae)
    est:evaluate(full_batch, {steps = 1, name = "holdout"})
    assert.near(r.mae, scalars_in(dir .. "/eval_holdout").mae[60], 1e-6 * r.mae)
    -- save_summary_steps = 0 writes none
    local quiet = estimator(dir .. "/q", {save_checkpoints_steps = 20, log_step_count_steps = 0,
                                          save_summary_steps = 0})
    quiet:train(full_batch, {max_steps = 20})
    quiet:evaluate(full_batch, {steps = 1})
    assert.same({"checkpoint", "model.ckpt-20"}, H.files_in(dir .. "/q"))
  end)

  it("resumes from the newest checkpoint to the same weights as a run never stopped", function()
    estimator(dir .. "/a"):train(full_batch, {max_steps = 60})
    estimator(dir .. "/b"):train(full_batch, {max_steps = 30})
    local resumed = estimator(dir .. "/b")  -- a new Estimator, as a new program would make
    resumed:train(full_batch, {max_steps = 60})
    for _, name in ipairs({"linear/kernel", "linear/bias"}) do
      assert.same(tf.train.load_variable(dir .. "/a/model.ckpt-60", name):totable(),
                  resumed:get_variable_value(name):totable())
    end
  end)

  it("stops when the input ends and evaluates over the whole input", function()
    local est = estimator(dir)
    est:train(function() return dataset(16):repeat_(3) end)  -- 3 epochs of 4 batches
    assert.equals(dir .. "/model.ckpt-12", est:latest_checkpoint())
    local r = est:evaluate(function() return dataset(16) end)
    -- the metrics by hand, from the saved weights
    local w = est:get_variable_value("linear/kernel"):get(0, 0)
    local b = est:get_variable_value("linear/bias"):get(0)
    local sq, abs = 0, 0
    for i = 1, 64 do
      local e = w * XS[i][1] + b - YS[i][1]
      sq, abs = sq + e * e, abs + math.abs(e)
    end
    assert.near(sq / 64, r.loss, 1e-5)  -- equal batches: the mean of batch means is the mean
    assert.near(abs / 64, r.mae, 1e-5)
    assert.equals(12, r.global_step)
    local two = est:evaluate(function() return dataset(16) end, {steps = 2})
    sq = 0
    for i = 1, 32 do local e = w * XS[i][1] + b - YS[i][1]; sq = sq + e * e end
    assert.near(sq / 32, two.loss, 1e-5)
  end)

  it("predicts one example at a time, or one batch", function()
    local est = estimator(dir)
    est:train(full_batch, {max_steps = 40})
    local w = est:get_variable_value("linear/kernel"):get(0, 0)
    local b = est:get_variable_value("linear/bias"):get(0)
    local n = 0
    for p in est:predict(function() return dataset(10) end) do
      n = n + 1
      assert.near(w * XS[n][1] + b, p.y:get(0), 1e-5)
      assert.near(2 * p.y:get(0), p.twice:get(0), 1e-5)
    end
    assert.equals(64, n)
    local batches = {}
    for p in est:predict(function() return dataset(10) end, {predict_keys = {"y"}, yield_single_examples = false}) do
      batches[#batches + 1] = p.y:shape()[1]
      assert.is_nil(p.twice)
    end
    assert.same({10, 10, 10, 10, 10, 10, 4}, batches)
    assert.matches("Expected to run at least one output from {twice, y}, provided {z}",
                   H.error_of(est.predict, est, function() return dataset(10) end, {predict_keys = {"z"}}))
  end)

  it("refuses what cannot work, with TensorFlow's words where it has them", function()
    local est = estimator(dir)
    assert.matches("Can not provide both steps and max_steps",
                   H.error_of(est.train, est, full_batch, {steps = 1, max_steps = 2}))
    assert.matches("Must specify max_steps > 0, given: 0", H.error_of(est.train, est, full_batch, {max_steps = 0}))
    assert.matches("input_fn must be a function", H.error_of(est.train, est, nil, {max_steps = 1}))
    local nowhere = estimator("/dev/null/model")
    assert.matches("Estimator:train: cannot create the model directory /dev/null/model",
                   H.error_of(nowhere.train, nowhere, full_batch, {max_steps = 1}))
    local outside = tf.constant(XS)
    assert.matches("input_fn returned features from another graph: Tensor%(\"Const[_%d]*:0\".*must make its tensors",
                   H.error_of(est.train, est, function() return outside, tf.constant(YS) end, {max_steps = 1}))
    assert.matches("model_dir are set both in constructor and RunConfig, but with different values",
                   H.error_of(tf.estimator.Estimator, linear_model,
                              {model_dir = "a", config = tf.estimator.RunConfig({model_dir = "b"})}))
    local frozen = tf.estimator.Estimator(function(features, labels, mode)
      local w = tf.Variable(1.0)
      local loss = tf.reduce_mean(tf.square(features * w - labels))
      return tf.estimator.EstimatorSpec(mode, {loss = loss, train_op = tf.train.GradientDescentOptimizer(0.1):minimize(loss)})
    end, {model_dir = dir .. "/frozen", config = tf.estimator.RunConfig({log_step_count_steps = 0})})
    assert.matches("the train_op moved the global step from 0 to 0 in one step; it must add 1",
                   H.error_of(frozen.train, frozen, full_batch, {max_steps = 5}))
    local diverging = tf.estimator.Estimator(linear_model, {model_dir = dir .. "/nan", params = {learning_rate = 1e30},
                                                            config = tf.estimator.RunConfig({log_step_count_steps = 0})})
    assert.matches("NanLossDuringTrainingError: NaN loss during training %(step %d+%)",
                   H.error_of(diverging.train, diverging, full_batch, {max_steps = 50}))
    local bad_metric = tf.estimator.Estimator(function(features, labels, mode)
      local loss = tf.reduce_mean(tf.square(tf.layers.dense(features, 1) - labels))
      return tf.estimator.EstimatorSpec(mode, {loss = loss, eval_metric_ops = {loss = {tf.metrics.mean(loss)}}})
    end, {model_dir = dir .. "/m", config = tf.estimator.RunConfig({log_step_count_steps = 0})})
    assert.matches('Metric with name "loss" is not allowed',
                   H.error_of(bad_metric.evaluate, bad_metric, function() return dataset(16) end))
  end)
end)

describe("the progress line", function()
  local function recorder()
    local out = {}
    return {write = function(_, ...) for _, s in ipairs({...}) do out[#out + 1] = s end end, flush = function() end},
           function() return table.concat(out) end
  end

  it("prints a plain line every N steps when the output is no terminal", function()
    local stream, text = recorder()
    local p = Progress.new({label = "train", first = 0, last = 30, every = 10, stream = stream, tty = false})
    for step = 1, 30 do p:update(step, 1 / step) end
    p:finish(30, 1 / 30, "saved x")
    local lines = {}
    for line in text():gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equals(3, #lines)
    assert.matches("^train  step 10/30  loss 0.1  [%d.]+ steps/s  ETA %d+s$", lines[1])
    assert.matches("^train  step 20/30  loss 0.05  ", lines[2])
    assert.matches("^train  step 30  loss 0.03333  [%d.]+ steps/s  saved x$", lines[3])
    assert.is_nil(text():find("\r", 1, true))
  end)

  it("rewrites one line in place on a terminal", function()
    local stream, text = recorder()
    local p = Progress.new({label = "train", first = 0, last = 1000, every = 100, stream = stream, tty = true})
    p:update(1, 0.5)
    p:finish(1000, 0.25)
    assert.matches("^\rtrain  step 1/1000  loss 0.5  [%d.]+ steps/s  ETA %d+s\27%[K" ..
                   "\rtrain  step 1000  loss 0.25  [%d.]+ steps/s\27%[K\n$", text())
    p:update(2, 0.5)  -- within a tenth of a second of the last: not drawn
    assert.matches("\n$", text())
  end)
end)

describe("the progress line on a terminal (tmux)", function()
  if not H.has_tmux then
    pending("tmux is not installed (Debian package tmux; .ci/run installs it)")
    return
  end

  it("is one line rewritten in place while training, then ended", function()
    local dir = H.tmpdir()
    H.write(dir .. "/train.lua", [[
local tf = require("moonflow")
local est = tf.estimator.Estimator(function(features, labels, mode)
  local loss = tf.reduce_mean(tf.square(tf.layers.dense(features, 1) - labels))
  return tf.estimator.EstimatorSpec(mode, {loss = loss,
    train_op = tf.train.GradientDescentOptimizer(0.01):minimize(loss, {global_step = tf.train.get_global_step()})})
end, {model_dir = "]] .. dir .. [[/model", config = tf.estimator.RunConfig({log_step_count_steps = 50})})
est:train(function() return tf.ones({8, 2}), tf.zeros({8, 1}) end, {max_steps = 3000})
print("finished")
]])
    local term = H.terminal("progress")
    term:start("luajit '" .. dir .. "/train.lua'; sleep 60")
    local shown = term:wait_for("finished")
    term:kill()
    local lines = {}
    for l in shown:gmatch("[^\n]+") do if l:find("train  step", 1, true) then lines[#lines + 1] = l end end
    assert.equals(1, #lines, shown)
    assert.matches("^train  step 3000  loss [%d.e-]+  [%d.]+ steps/s  saved .*/model/model.ckpt%-3000$", lines[1])
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
