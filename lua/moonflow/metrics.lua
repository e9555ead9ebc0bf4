-- metrics.lua — tf.metrics: streaming metrics as in TensorFlow 1.x. Each
-- returns two tensors, (value, update_op): update_op folds one batch into
-- the metric's local variables (collections LOCAL_VARIABLES and
-- METRIC_VARIABLES, not trainable, zeros at tf.local_variables_initializer())
-- and gives the metric so far; value reads the metric without updating. The
-- variables live in a variable scope of the metric's name ("accuracy/total",
-- "accuracy_1/total", ...), so two metrics never share state.
--
-- tf.metrics.mean(values, weights): sum(w * v) / sum(w); 0 before any weight.
-- tf.metrics.accuracy(labels, predictions, weights): the mean of
--   predictions == labels.
-- tf.metrics.auc(labels, predictions, weights, num_thresholds, ..., curve,
--   ..., summation_method): TensorFlow's approximation: true and false
--   positives and negatives counted at num_thresholds thresholds spread
--   over [0, 1] (plus one just below 0 and one just above 1), the ROC (or
--   precision-recall) curve through those points summed by the trapezoidal
--   rule (or the lower or upper Riemann sum: "minoring", "majoring").
--   Predictions must lie in [0, 1] (checked when the update runs).
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local dtypes = core.dtypes

local fail, options = core.fail, args.options

local MEAN_OPTIONS = {"weights", "metrics_collections", "updates_collections", "name", empty = true}
local ACCURACY_OPTIONS = MEAN_OPTIONS
local AUC_OPTIONS = {"weights", "num_thresholds", "metrics_collections", "updates_collections", "curve", "name",
                     "summation_method", empty = true}

local KEPSILON = 1e-7

return function(tf, ops)
  tf.GraphKeys.METRIC_VARIABLES = "metric_variables"
  tf.metrics = tf.metrics or {}

  -- A zero-filled local float32 variable of `shape`, as TensorFlow's metric_variable.
  local function metric_variable(shape, name)
    return tf.Variable(ops.zeros(shape, dtypes.float32), {
      name = name, trainable = false,
      collections = {tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.METRIC_VARIABLES}})
  end

  -- num / den where den > 0, else 0 (TensorFlow's _safe_div).
  local function safe_div(num, den, name)
    local zero = ops.zeros_like(num)
    return ops.where(ops.greater(den, zero), num / ops.maximum(den, 1e-30), zero, name)
  end

  -- The metric's value and update op added to the collections its caller named.
  local function collect(o, value, update_op)
    for _, key in ipairs(o.metrics_collections or {}) do tf.add_to_collection(key, value) end
    for _, key in ipairs(o.updates_collections or {}) do tf.add_to_collection(key, update_op) end
    return value, update_op
  end

  local function check_collections(o, fname)
    for _, key in ipairs({"metrics_collections", "updates_collections"}) do
      local v = o[key]
      if v ~= nil and not (args.is_plain(v) and v[1] ~= nil or args.is_plain(v) and next(v) == nil) then
        fail(fname .. ": " .. key .. " must be a list of collection names, got " .. args.describe(v))
      end
    end
  end

  -- Weights as float32 broadcast to the shape of `like` (their shapes checked when both are known).
  local function broadcast_weights(weights, like, fname)
    weights = ops.cast(G.convert(weights), dtypes.float32)
    if not weights:get_shape():broadcasts_to(like:get_shape()) then
      fail(string.format("%s: ValueError: weights can not be broadcast to values. values.shape=%s, " ..
                         "weights.shape=%s", fname, tostring(like:get_shape()), tostring(weights:get_shape())))
    end
    return weights * ops.ones_like(like)
  end

  local function mean(values, o, fname, default_name)
    check_collections(o, fname)
    return tf.variable_scope(o.name, {default_name = default_name}, function()
      values = G.convert(values)
      if not values.dtype.is_floating and not values.dtype.is_integer and values.dtype ~= dtypes.bool then
        fail(fname .. ": values must be numbers, got dtype " .. values.dtype.name)
      end
      values = ops.cast(values, dtypes.float32)
      local total = metric_variable({}, "total")
      local count = metric_variable({}, "count")
      local num_values
      if o.weights == nil then
        num_values = ops.cast(ops.size(values), dtypes.float32)
      else
        local weights = broadcast_weights(o.weights, values, fname)
        values = values * weights
        num_values = ops.reduce_sum(weights)
      end
      local update_total = ops.assign_add(total, ops.reduce_sum(values))
      local update_count = ops.assign_add(count, num_values)
      local value = safe_div(total, count, "value")
      local update_op = safe_div(update_total, update_count, "update_op")
      return collect(o, value, update_op)
    end)
  end

  -- tf.metrics.mean(values, weights, metrics_collections, updates_collections, name)
  function tf.metrics.mean(values, ...)
    return mean(values, options("tf.metrics.mean", MEAN_OPTIONS, ...), "tf.metrics.mean", "mean")
  end

  -- Labels and predictions of one shape; predictions cast to the labels' dtype.
  local function labels_and_predictions(labels, predictions, fname)
    labels = G.convert(labels)
    predictions = G.convert(predictions, labels.dtype)
    if not labels:get_shape():is_compatible_with(predictions:get_shape()) then
      fail(string.format("%s: ValueError: Shapes %s and %s are incompatible (labels and predictions)", fname,
                         tostring(labels:get_shape()), tostring(predictions:get_shape())))
    end
    if predictions.dtype ~= labels.dtype then predictions = ops.cast(predictions, labels.dtype) end
    return labels, predictions
  end

  -- tf.metrics.accuracy(labels, predictions, weights, metrics_collections, updates_collections, name)
  function tf.metrics.accuracy(labels, predictions, ...)
    local o = options("tf.metrics.accuracy", ACCURACY_OPTIONS, ...)
    local fname = "tf.metrics.accuracy"
    labels, predictions = labels_and_predictions(labels, predictions, fname)
    local is_correct = ops.cast(ops.equal(predictions, labels), dtypes.float32)
    return mean(is_correct, o, fname, "accuracy")
  end

  local SUMMATIONS = {trapezoidal = true, minoring = true, majoring = true}

  -- tf.metrics.auc(labels, predictions, weights, num_thresholds = 200,
  -- metrics_collections, updates_collections, curve = "ROC", name,
  -- summation_method = "trapezoidal")
  function tf.metrics.auc(labels, predictions, ...)
    local fname = "tf.metrics.auc"
    local o = options(fname, AUC_OPTIONS, ...)
    check_collections(o, fname)
    local curve = o.curve or "ROC"
    if curve ~= "ROC" and curve ~= "PR" then
      fail(fname .. ": ValueError: curve must be either ROC or PR, " .. tostring(curve) .. " unknown")
    end
    local summation = o.summation_method or "trapezoidal"
    if not SUMMATIONS[summation] then
      fail(fname .. ': ValueError: summation_method must be "trapezoidal", "minoring" or "majoring", got ' ..
           args.describe(summation))
    end
    local n = o.num_thresholds or 200
    if not args.is_integer(n) or n < 2 then
      fail(fname .. ": ValueError: num_thresholds must be an integer of at least 2, got " .. args.describe(n))
    end
    labels, predictions = G.convert(labels), G.convert(predictions)
    if not predictions.dtype.is_floating then
      fail(fname .. ": predictions must be probabilities (float32 or float64), got dtype " .. predictions.dtype.name)
    end
    if not labels:get_shape():is_compatible_with(predictions:get_shape()) then
      fail(string.format("%s: ValueError: Shapes %s and %s are incompatible (labels and predictions)", fname,
                         tostring(labels:get_shape()), tostring(predictions:get_shape())))
    end
    return tf.variable_scope(o.name, {default_name = "auc"}, function()
      local thresholds = {-KEPSILON}
      for i = 1, n - 2 do thresholds[#thresholds + 1] = i / (n - 1) end
      thresholds[#thresholds + 1] = 1 + KEPSILON
      predictions = ops.cast(predictions, dtypes.float32)
      local in_range = {
        tf.assert_greater_equal(predictions, 0, {message = "predictions must be in [0, 1]"}),
        tf.assert_less_equal(predictions, 1, {message = "predictions must be in [0, 1]"})}
      -- [thresholds, examples]: is each prediction above each threshold.
      local row = ops.reshape(predictions, {1, -1})
      local pred_is_pos = ops.greater(row, ops.reshape(G.constant(thresholds, dtypes.float32), {-1, 1}))
      local label_is_pos = ops.reshape(ops.cast(labels, dtypes.bool), {1, -1})
      local weights = o.weights ~= nil and ops.reshape(broadcast_weights(o.weights, predictions, fname), {1, -1})
      local counts, updates = {}, {}
      local cells = {tp = {true, true}, fn = {true, false}, tn = {false, false}, fp = {false, true}}
      for _, key in ipairs({"tp", "fn", "tn", "fp"}) do
        local label_pos, pred_pos = cells[key][1], cells[key][2]
        local hit = ops.logical_and(label_pos and label_is_pos or ops.logical_not(label_is_pos),
                                    pred_pos and pred_is_pos or ops.logical_not(pred_is_pos))
        local amount = ops.cast(hit, dtypes.float32)
        if weights then amount = amount * weights end
        local names = {tp = "true_positives", fn = "false_negatives", tn = "true_negatives", fp = "false_positives"}
        counts[key] = metric_variable({n}, names[key])
        updates[key] = tf.control_dependencies(in_range, function()
          return ops.assign_add(counts[key], ops.reduce_sum(amount, 1))
        end)
      end
      local function area(c, name)
        local rec = (c.tp + KEPSILON) / (c.tp + c.fn + KEPSILON)
        local x, y
        if curve == "ROC" then
          x, y = c.fp / (c.fp + c.tn + KEPSILON), rec
        else
          x, y = rec, (c.tp + KEPSILON) / (c.tp + c.fp + KEPSILON)
        end
        local x0, x1 = ops.slice(x, {0}, {n - 1}), ops.slice(x, {1}, {n - 1})
        local y0, y1 = ops.slice(y, {0}, {n - 1}), ops.slice(y, {1}, {n - 1})
        local height
        if summation == "trapezoidal" then height = (y0 + y1) / 2
        elseif summation == "minoring" then height = ops.minimum(y0, y1)
        else height = ops.maximum(y0, y1) end
        return ops.reduce_sum((x0 - x1) * height, {name = name})
      end
      return collect(o, area(counts, "value"), area(updates, "update_op"))
    end)
  end
end
