-- examples/beam_search.lua — beam search over a recurrent model, after the
-- "Beam search" recipe of Effective TensorFlow's cookbook.
--
--   luajit examples/beam_search.lua      decodes with a small toy model
--   require / dofile                     returns the functions (spec/beam_search_spec.lua)
--
-- rnn_beam_search is the cookbook's function written in Lua: a Lua loop over
-- the sequence length, so the graph holds one copy of the step per position.
-- rnn_beam_search_loop is the exercise the text leaves ("try implementing
-- beam search using tf.while_loop; can you make it more efficient with tensor
-- arrays?"): one traced step inside tf.while_loop, which writes each step's
-- token ids and parent beams into TensorArrays (O(1) per step instead of
-- re-gathering the growing id history), then a second loop walks the
-- parents back from the last step to spell out each beam.
local tf = require("moonflow")

local M = {}

-- The cookbook's get_shape: static dimensions where known, else dynamic ones.
function M.get_shape(tensor)
  local static = tensor:get_shape():as_list()
  local dynamic = tf.unstack(tf.shape(tensor))
  local dims = {}
  for i, s in ipairs(static) do dims[i] = s >= 0 and s or dynamic[i] end
  return dims
end

-- The cookbook's batch_gather: output[i] = tensor[i][indices[i]].
function M.batch_gather(tensor, indices)
  local shape = M.get_shape(tensor)
  local flat_shape = {shape[1] * shape[2]}
  for i = 3, #shape do flat_shape[#flat_shape + 1] = shape[i] end
  local flat_first = tf.reshape(tensor, flat_shape)
  local offset_shape = {shape[1]}
  for _ = 2, indices:get_shape().ndims do offset_shape[#offset_shape + 1] = 1 end
  local offset = tf.reshape(tf.range(shape[1]) * shape[2], offset_shape)
  return tf.gather(flat_first, indices + offset)
end

local function initial_beams(initial_state, beam_width, begin_token_id)
  local batch_size = initial_state:get_shape():as_list()[1]
  local state = tf.tile(tf.expand_dims(initial_state, 1), {1, beam_width, 1})
  local first = {1}
  for i = 2, beam_width do first[i] = 0 end
  local sel_sum_logprobs = tf.log(tf.constant({first}))  -- only beam 0 is alive at the start
  local ids = tf.tile(tf.constant({{begin_token_id}}, tf.int32), {batch_size, beam_width})
  local mask = tf.ones({batch_size, beam_width}, tf.float32)
  return batch_size, state, sel_sum_logprobs, ids, mask
end

-- One step: extends every beam by every class and keeps the beam_width best.
-- Returns the new state, summed log-probabilities, ids, parent beams and mask.
local function step(update_fn, state, ids, sel_sum_logprobs, mask, batch_size, beam_width, end_token_id)
  local logits
  state, logits = update_fn(state, ids)
  logits = tf.nn.log_softmax(logits)
  local sum_logprobs = tf.expand_dims(sel_sum_logprobs, 2) + logits * tf.expand_dims(mask, 2)
  local num_classes = logits:get_shape():as_list()[3]
  local indices
  sel_sum_logprobs, indices = tf.nn.top_k(tf.reshape(sum_logprobs, {batch_size, num_classes * beam_width}),
                                          {k = beam_width})
  ids = indices % num_classes
  local beam_ids = tf.floordiv(indices, num_classes)
  state = M.batch_gather(state, beam_ids)
  mask = M.batch_gather(mask, beam_ids) * tf.to_float(tf.not_equal(ids, end_token_id))
  return state, sel_sum_logprobs, ids, beam_ids, mask
end

-- The cookbook's rnn_beam_search(update_fn, initial_state, sequence_length,
-- beam_width, begin_token_id, end_token_id, name): returns sel_ids [batch,
-- beam, sequence_length] (int32) and their summed log-probabilities [batch,
-- beam], best first. update_fn(state, ids) returns the next state and the
-- logits; its variables live in the variable scope `name`.
function M.rnn_beam_search(update_fn, initial_state, sequence_length, beam_width, begin_token_id, end_token_id,
                           name)
  name = name or "rnn"
  local batch_size, state, sel_sum_logprobs, ids, mask = initial_beams(initial_state, beam_width, begin_token_id)
  local sel_ids = tf.zeros({batch_size, beam_width, 0}, tf.int32)
  for i = 0, sequence_length - 1 do
    local beam_ids
    tf.variable_scope(name, {reuse = i > 0 or nil}, function()
      state, sel_sum_logprobs, ids, beam_ids, mask =
        step(update_fn, state, ids, sel_sum_logprobs, mask, batch_size, beam_width, end_token_id)
    end)
    sel_ids = tf.concat({M.batch_gather(sel_ids, beam_ids), tf.expand_dims(ids, 2)}, 2)
  end
  return sel_ids, sel_sum_logprobs
end

-- The same search as one tf.while_loop with TensorArrays (sequence_length
-- may be a tensor).
function M.rnn_beam_search_loop(update_fn, initial_state, sequence_length, beam_width, begin_token_id,
                                end_token_id, name)
  name = name or "rnn"
  local batch_size, state, sel_sum_logprobs, ids, mask = initial_beams(initial_state, beam_width, begin_token_id)
  sel_sum_logprobs = tf.tile(sel_sum_logprobs, {batch_size, 1})  -- a loop variable keeps its shape
  local length = tf.convert_to_tensor(sequence_length, tf.int32)
  local zero = tf.constant(0, tf.int32)
  local _, _, sums, _, _, id_steps, parent_steps = tf.while_loop(
    function(i) return tf.less(i, length) end,
    function(i, st, sums, cur, m, id_ta, parent_ta)
      local beam_ids
      tf.variable_scope(name, {reuse = tf.AUTO_REUSE}, function()
        st, sums, cur, beam_ids, m = step(update_fn, st, cur, sums, m, batch_size, beam_width, end_token_id)
      end)
      return i + 1, st, sums, cur, m, id_ta:write(i, cur), parent_ta:write(i, beam_ids)
    end,
    {zero, state, sel_sum_logprobs, ids, mask, tf.TensorArray(tf.int32, length), tf.TensorArray(tf.int32, length)})
  -- Walk back from the last step: beam k's token at step t is ids[t][beam],
  -- and its beam at step t - 1 is parents[t][beam].
  local last_beams = tf.tile(tf.expand_dims(tf.range(beam_width), 0), {batch_size, 1})
  local _, _, tokens = tf.while_loop(
    function(t) return tf.greater_equal(t, 0) end,
    function(t, beams, out)
      local token = M.batch_gather(id_steps:read(t), beams)
      return t - 1, M.batch_gather(parent_steps:read(t), beams), out:write(t, token)
    end,
    {length - 1, last_beams, tf.TensorArray(tf.int32, length)})
  return tf.transpose(tokens:stack(), {1, 2, 0}), sums
end

-- A toy recurrent model: state' = tanh(state A + E[id]), logits = state' W.
-- Its weights are variables of the current variable scope.
function M.toy_model(hidden, vocab, seed)
  return function(state, ids)
    local init = tf.random_normal_initializer({stddev = 1, seed = seed})
    local A = tf.get_variable("A", {hidden, hidden}, {initializer = init})
    local E = tf.get_variable("E", {vocab, hidden}, {initializer = init})
    local W = tf.get_variable("W", {hidden, vocab}, {initializer = init})
    local shape = M.get_shape(state)
    local flat = tf.reshape(state, {-1, hidden})
    local next_state = tf.tanh(tf.matmul(flat, A) + tf.reshape(tf.gather(E, ids), {-1, hidden}))
    local logits = tf.matmul(next_state, W)
    return tf.reshape(next_state, {shape[1], shape[2], hidden}), tf.reshape(logits, {shape[1], shape[2], vocab})
  end
end

function M.main()
  local batch, hidden, vocab, beam, length = 2, 8, 6, 3, 5
  local initial_state = tf.random_normal({batch, hidden}, {seed = 1})
  local model = M.toy_model(hidden, vocab, 7)
  local ids, logprobs = M.rnn_beam_search(model, initial_state, length, beam, 0, vocab - 1)
  local loop_ids, loop_logprobs = M.rnn_beam_search_loop(model, initial_state, length, beam, 0, vocab - 1)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  local r = sess:run({ids, logprobs, loop_ids, loop_logprobs})
  for b = 1, batch do
    print(string.format("batch %d", b - 1))
    for k = 1, beam do
      print(string.format("  beam %d: ids %s  log-probability %.4f", k - 1,
                          table.concat(r[1]:totable()[b][k], " "), r[2]:totable()[b][k]))
    end
  end
  print("tf.while_loop + TensorArray version agrees: " ..
        tostring(tostring(r[1]) == tostring(r[3]) and tostring(r[2]) == tostring(r[4])))
end

if arg and arg[0] and arg[0]:match("beam_search%.lua$") then M.main() end

return M
