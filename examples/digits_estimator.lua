-- digits_estimator.lua — examples/digits.lua's MLP on the learn API: flags
-- and tf.app.run for the command line, HParams for the hyperparameters, a
-- model function for tf.estimator.Estimator, and learn_runner running an
-- Experiment that trains and then evaluates on the held-out images.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/digits_estimator.lua [flags]
-- Flags (--help lists them): --model_dir DIR, --data PATH, --train_steps N,
-- --hparams "learning_rate=0.01,hidden_units=128,batch_size=32", --stop_at N.
--
-- Training resumes: the Estimator checkpoints into model_dir every 100
-- steps and when it stops, and a new run starts from the newest checkpoint.
-- Stopped at --stop_at 440 and run again, it ends with the weights and the
-- accuracy of a run never stopped, because the input is a function of the
-- step: the training batches come from a seeded shuffle, and the input
-- function skips the batches that the checkpointed steps used.
local tf = require("moonflow")
package.path = (arg and arg[0] and arg[0]:match("^(.*)[/\\]") or ".") .. "/?.lua;" .. package.path
local digits = require("digits_data")

local flags = tf.flags
flags.DEFINE_string("model_dir", "/tmp/digits_estimator", "where the checkpoints go")
flags.DEFINE_string("data", digits.DEFAULT_DATA, "the digits CSV (digits.csv.gz of python3-sklearn)")
flags.DEFINE_integer("train_steps", 880, "training steps (20 epochs of 44 batches of 32, as examples/digits.lua)")
flags.DEFINE_integer("stop_at", 0, "stop training at this step, as an interrupted run would (0: train_steps)")
flags.DEFINE_string("hparams", "", "hyperparameter overrides, such as learning_rate=0.005,hidden_units=64")
local FLAGS = flags.FLAGS

-- Logits of the 64-128-10 MLP, its loss and training op, and the accuracy metric.
local function model_fn(features, labels, mode, params)
  local hidden = tf.layers.dense(features, params.hidden_units, {activation = tf.nn.relu})
  local logits = tf.layers.dense(hidden, digits.CLASSES)
  local classes = tf.argmax(logits, {axis = 1, output_type = tf.int32})
  if mode == tf.estimator.ModeKeys.PREDICT then
    return tf.estimator.EstimatorSpec(mode, {predictions = {classes = classes, probabilities = tf.nn.softmax(logits)}})
  end
  local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = labels, logits = logits}))
  local train_op = tf.train.AdamOptimizer(params.learning_rate):minimize(loss,
    {global_step = tf.train.get_global_step()})
  return tf.estimator.EstimatorSpec(mode, {loss = loss, train_op = train_op,
                                           eval_metric_ops = {accuracy = {tf.metrics.accuracy(labels, classes)}}})
end

local function main()
  local hparams = tf.contrib.training.HParams({learning_rate = 0.01, hidden_units = 128, batch_size = 32})
  hparams:parse(FLAGS.hparams)
  math.randomseed(1)  -- the split: the same 20% held out as examples/digits.lua
  local images, labels = digits.load(FLAGS.data)
  local train_x, train_y, test_x, test_y = digits.split(images, labels, 0.2)
  print(string.format("digits: %d images, %d for training, %d held out for testing", images:shape()[1],
                      train_x:shape()[1], test_x:shape()[1]))
  local latest = tf.train.latest_checkpoint(FLAGS.model_dir)
  print(latest and "resuming from " .. latest or "training from scratch")

  -- Batches of a seeded shuffle, repeated; the batches that the steps of
  -- the newest checkpoint used are skipped.
  local function train_input_fn(params, config)
    local done = tf.train.latest_checkpoint(config.model_dir)
    local start = done and tonumber(done:match("%-(%d+)$")) or 0
    return tf.data.Dataset.from_tensor_slices({train_x, train_y})
      :shuffle(train_x:shape()[1], {seed = 1})
      :repeat_()
      :batch(params.batch_size)
      :skip(start)
  end
  local function eval_input_fn() return tf.data.Dataset.from_tensor_slices({test_x, test_y}):batch(128) end

  local function experiment_fn(run_config, hp)
    local estimator = tf.estimator.Estimator(model_fn, {config = run_config, params = hp})
    return tf.contrib.learn.Experiment(estimator, train_input_fn, eval_input_fn,
                                       {train_steps = FLAGS.stop_at > 0 and FLAGS.stop_at or FLAGS.train_steps})
  end
  local result = tf.contrib.learn.learn_runner.run(experiment_fn, {hparams = hparams,
    run_config = tf.estimator.RunConfig({model_dir = FLAGS.model_dir, tf_random_seed = 1,
                                         save_checkpoints_steps = 100, keep_checkpoint_max = 3})})
  print(string.format("global step %d", result.global_step))
  print(string.format("test accuracy %.4f", result.accuracy))
  print(string.format("test loss %.9g", result.loss))
end

tf.app.run(main)
