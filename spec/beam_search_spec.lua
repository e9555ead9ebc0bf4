-- The cookbook's beam search (examples/beam_search.lua) on a toy recurrent
-- model, against the same model evaluated in plain Lua.
local tf = require("moonflow")
local H = require("spec.helpers")
setup(H.growth_off)
teardown(H.growth_restore)
local BS = dofile("examples/beam_search.lua")

-- The toy model in plain Lua, from the session's weights: step(state, id)
-- returns the next state and the log-probabilities of the classes.
local function lua_model(sess)
  local w = {}
  for _, v in ipairs(tf.global_variables()) do w[v.op.name:match("[^/]+$")] = sess:run(v):totable() end
  local A, E, W = w.A, w.E, w.W
  local hidden, vocab = #A, #W[1]
  return function(state, id)
    local nxt = {}
    for j = 1, hidden do
      local s = E[id + 1][j]
      for k = 1, hidden do s = s + state[k] * A[k][j] end
      nxt[j] = math.tanh(s)
    end
    local logits, m = {}, -math.huge
    for c = 1, vocab do
      local s = 0
      for k = 1, hidden do s = s + nxt[k] * W[k][c] end
      logits[c] = s
      m = math.max(m, s)
    end
    local z = 0
    for c = 1, vocab do z = z + math.exp(logits[c] - m) end
    local logp = {}
    for c = 1, vocab do logp[c] = logits[c] - m - math.log(z) end
    return nxt, logp
  end
end

-- The summed log-probability of a token sequence, counting tokens up to and
-- including the first end token (the cookbook's mask).
local function sequence_logprob(step, state, ids, begin_id, end_id)
  local total, prev, alive = 0, begin_id, true
  for _, id in ipairs(ids) do
    local logp
    state, logp = step(state, prev)
    if alive then total = total + logp[id + 1] end
    if id == end_id then alive = false end
    prev = id
  end
  return total
end

-- Reproducible initial states [batch, hidden].
local function initial_states(batch, hidden)
  local out = {}
  for b = 1, batch do
    out[b] = {}
    for j = 1, hidden do out[b][j] = math.sin(b * 7 + j * 3) end
  end
  return out
end

local function build(batch, hidden, vocab, beam, length, end_id, loop)
  local init = tf.constant(tf.array(initial_states(batch, hidden)))
  local search = loop and BS.rnn_beam_search_loop or BS.rnn_beam_search
  return init, search(BS.toy_model(hidden, vocab, 7), init, length, beam, 0, end_id)
end

describe("examples/beam_search.lua", function()
  before_each(function() tf.reset_default_graph() end)

  it("finds the most likely sequences exactly when the beam holds every prefix", function()
    local batch, hidden, vocab, length = 2, 5, 3, 3
    local beam = vocab ^ (length - 1)
    local init, ids, logprobs = build(batch, hidden, vocab, beam, length, vocab)
    assert.same({batch, beam, length}, ids:get_shape():as_list())
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local r = sess:run({ids, logprobs})
    local step = lua_model(sess)
    for b = 1, batch do
      -- every sequence, scored in Lua
      local all = {}
      for c1 = 0, vocab - 1 do for c2 = 0, vocab - 1 do for c3 = 0, vocab - 1 do
        local seq = {c1, c2, c3}
        all[#all + 1] = {seq = seq, lp = sequence_logprob(step, initial_states(batch, hidden)[b], seq, 0, vocab)}
      end end end
      table.sort(all, function(x, y) return x.lp > y.lp end)
      for k = 1, beam do
        assert.same(all[k].seq, r[1]:totable()[b][k])
        assert.near(all[k].lp, r[2]:totable()[b][k], 1e-4)
      end
    end
  end)

  it("reports each beam's log-probability, counting tokens up to the end token", function()
    local batch, hidden, vocab, beam, length = 2, 8, 6, 3, 5
    local init, ids, logprobs = build(batch, hidden, vocab, beam, length, vocab - 1)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local r = sess:run({ids, logprobs})
    local step = lua_model(sess)
    for b = 1, batch do
      local prev = math.huge
      for k = 1, beam do
        local seq = r[1]:totable()[b][k]
        local lp = r[2]:totable()[b][k]
        assert.near(sequence_logprob(step, initial_states(batch, hidden)[b], seq, 0, vocab - 1), lp, 1e-4)
        assert.is_true(lp <= prev)  -- best first
        prev = lp
      end
    end
  end)

  it("with a beam of one decodes greedily", function()
    local batch, hidden, vocab, length = 3, 6, 5, 6
    local init, ids = build(batch, hidden, vocab, 1, length, vocab)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local got = sess:run(ids):totable()
    local step = lua_model(sess)
    for b = 1, batch do
      local state, prev, seq = initial_states(batch, hidden)[b], 0, {}
      for _ = 1, length do
        local logp
        state, logp = step(state, prev)
        local best = 1
        for c = 2, vocab do if logp[c] > logp[best] then best = c end end
        prev = best - 1
        seq[#seq + 1] = prev
      end
      assert.same(seq, got[b][1])
    end
  end)

  it("gives the same beams as one tf.while_loop with TensorArrays", function()
    local batch, hidden, vocab, beam, length = 2, 8, 6, 3, 5
    local init = tf.constant(tf.array(initial_states(batch, hidden)))
    local model = BS.toy_model(hidden, vocab, 7)
    local ids, logprobs = BS.rnn_beam_search(model, init, length, beam, 0, vocab - 1)
    local len = tf.placeholder(tf.int32, {})
    local loop_ids, loop_logprobs = BS.rnn_beam_search_loop(model, init, len, beam, 0, vocab - 1)
    assert.equal(3, #tf.global_variables())  -- the loop reused the model's three variables
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local r = sess:run({ids, logprobs, loop_ids, loop_logprobs}, {[len] = length})
    assert.same(r[1]:totable(), r[3]:totable())
    assert.same(r[2]:totable(), r[4]:totable())
    -- the loop's length is a tensor: a shorter search is the prefix of the search tree
    local short = sess:run(loop_ids, {[len] = 2})
    assert.same({batch, beam, 2}, short:shape())
  end)
end)
