-- tf.metrics: (value, update_op) pairs over local variables, checked
-- batch by batch against scikit-learn and NumPy (spec/fixtures/metrics.py
-- made spec/fixtures/metrics.lua) and against hand computations.
local tf = require("moonflow")
local H = require("spec.helpers")
local fixtures = require("spec.fixtures.metrics")

-- Feeds a fixture's batches to the update op one by one; checks the update
-- op's result and then the value against the reference after each.
local function check_stream(case, build, tol)
  tf.reset_default_graph()
  local feeds_of, value, update_op = build()
  local sess = tf.Session()
  sess:run(tf.local_variables_initializer())
  assert.equals(0, sess:run(value))
  for i, batch in ipairs(case.batches) do
    local got = sess:run(update_op, feeds_of(batch))
    assert(math.abs(got - case.after[i]) <= tol, string.format("batch %d: update_op %.9g, reference %.9g", i, got,
                                                               case.after[i]))
    local v = sess:run(value)
    assert(math.abs(v - case.after[i]) <= tol, string.format("batch %d: value %.9g, reference %.9g", i, v,
                                                             case.after[i]))
  end
  return sess
end

local function placeholders(dtypes)
  local ph = {}
  for name, dtype in pairs(dtypes) do ph[name] = tf.placeholder(dtype, {-1}, name) end
  local function feeds_of(batch)
    local f = {}
    for name, p in pairs(ph) do f[p] = batch[name] end
    return f
  end
  return ph, feeds_of
end

describe("tf.metrics", function()
  -- Each reference case: its metric on placeholders of the fixture's fields.
  local cases = {
    {"accuracy matches scikit-learn's accuracy_score", "accuracy", {labels = tf.int32, predictions = tf.int32},
     function(p) return tf.metrics.accuracy(p.labels, p.predictions) end, 1e-6},
    {"accuracy matches scikit-learn's accuracy_score with sample weights", "accuracy_weighted",
     {labels = tf.int32, predictions = tf.int32, weights = tf.float32},
     function(p) return tf.metrics.accuracy(p.labels, p.predictions, p.weights) end, 1e-6},
    {"mean matches NumPy's weighted average", "mean_weighted", {values = tf.float32, weights = tf.float32},
     function(p) return tf.metrics.mean(p.values, {weights = p.weights}) end, 1e-5},
    -- predictions at bin centres: the thresholds cover every prediction
    {"auc matches scikit-learn's roc_auc_score", "auc", {labels = tf.int32, predictions = tf.float32},
     function(p) return tf.metrics.auc(p.labels, p.predictions) end, 1e-5},
    {"auc matches scikit-learn's roc_auc_score with sample weights", "auc_weighted",
     {labels = tf.int32, predictions = tf.float32, weights = tf.float32},
     function(p) return tf.metrics.auc(p.labels, p.predictions, p.weights) end, 1e-5},
  }
  for _, case in ipairs(cases) do
    local title, fixture, dtypes, metric, tol = unpack(case)
    it(title .. ", batch by batch", function()
      check_stream(fixtures[fixture], function()
        local p, feeds_of = placeholders(dtypes)
        return feeds_of, metric(p)
      end, tol)
    end)
  end

  it("auc's precision-recall curve and Riemann sums, by hand", function()
    -- Three thresholds: just below 0, 0.5, just above 1. Labels 1, 0, 1, 0
    -- with predictions 0.9, 0.8, 0.3, 0.1: above 0.5 are one positive and one
    -- negative. (tp, fn, tn, fp) per threshold: (2,0,0,2), (1,1,1,1), (0,2,2,0).
    local labels, preds = {1, 0, 1, 0}, {0.9, 0.8, 0.3, 0.1}
    local e = 1e-7
    local rec = {(2 + e) / (2 + e), (1 + e) / (2 + e), e / (2 + e)}
    local fpr = {2 / (2 + e), 1 / (2 + e), 0}
    local prec = {(2 + e) / (4 + e), (1 + e) / (2 + e), 1}
    local function sum(x, y, h)
      local s = 0
      for i = 1, 2 do s = s + (x[i] - x[i + 1]) * h(y[i], y[i + 1]) end
      return s
    end
    local trapezoid = function(a, b) return (a + b) / 2 end
    local cases = {
      {{curve = "PR"}, sum(rec, prec, trapezoid)},
      {{summation_method = "minoring"}, sum(fpr, rec, math.min)},
      {{summation_method = "majoring"}, sum(fpr, rec, math.max)},
      {{}, sum(fpr, rec, trapezoid)},
    }
    for _, case in ipairs(cases) do
      tf.reset_default_graph()
      local opts = case[1]
      opts.num_thresholds = 3
      local value, update_op = tf.metrics.auc(tf.constant(labels, tf.int32), tf.constant(preds), opts)
      local sess = tf.Session()
      sess:run(tf.local_variables_initializer())
      assert.near(case[2], sess:run(update_op), 1e-6)
      assert.near(case[2], sess:run(value), 1e-6)
    end
  end)

  it("keeps its state in local variables of a scope of its own", function()
    tf.reset_default_graph()
    local x = tf.placeholder(tf.float32, {-1})
    tf.metrics.mean(x)
    local _, update = tf.metrics.mean(x, {metrics_collections = {"m"}, updates_collections = {"u"}})
    tf.metrics.accuracy(x, x, {name = "acc"})
    local names = {}
    for _, v in ipairs(tf.local_variables()) do names[#names + 1] = v.op.name end
    assert.same({"mean/total", "mean/count", "mean_1/total", "mean_1/count", "acc/total", "acc/count"}, names)
    assert.same(tf.local_variables(), tf.get_collection(tf.GraphKeys.METRIC_VARIABLES))
    assert.same({}, tf.global_variables())
    assert.same({}, tf.trainable_variables())
    assert.equals(update, tf.get_collection("u")[1])
    assert.equals(1, #tf.get_collection("m"))
    -- tf.local_variables_initializer starts a metric over
    local sess = tf.Session()
    sess:run(tf.local_variables_initializer())
    assert.equals(2, sess:run(update, {[x] = {1, 3}}))
    assert.near(14 / 3, sess:run(update, {[x] = {10}}), 1e-6)
    sess:run(tf.local_variables_initializer())
    assert.equals(10, sess:run(update, {[x] = {10}}))
  end)

  it("refuses bad arguments with TensorFlow's words", function()
    tf.reset_default_graph()
    local x = tf.placeholder(tf.float32, {3})
    local y = tf.placeholder(tf.float32, {4})
    assert.matches("tf.metrics.accuracy: ValueError: Shapes %(3,%) and %(4,%) are incompatible",
                   H.error_of(tf.metrics.accuracy, x, y))
    assert.matches("tf.metrics.mean: ValueError: weights can not be broadcast to values. values.shape=%(3,%), " ..
                   "weights.shape=%(4,%)", H.error_of(tf.metrics.mean, x, y))
    assert.matches("tf.metrics.auc: ValueError: curve must be either ROC or PR, XY unknown",
                   H.error_of(tf.metrics.auc, x, x, {curve = "XY"}))
    assert.matches("num_thresholds must be an integer of at least 2, got 1",
                   H.error_of(tf.metrics.auc, x, x, {num_thresholds = 1}))
    assert.matches("tf.metrics.auc: unknown option 'bogus'", H.error_of(tf.metrics.auc, x, x, {bogus = 1}))
    -- predictions outside [0, 1] fail the update, naming the bound
    local _, update = tf.metrics.auc(tf.constant({1, 0}, tf.int32), tf.constant({0.5, 1.5}))
    local sess = tf.Session()
    sess:run(tf.local_variables_initializer())
    assert.matches("predictions must be in %[0, 1%]", H.error_of(sess.run, sess, update))
  end)
end)
