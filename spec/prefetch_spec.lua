-- Dataset:prefetch: traced map and filter functions run ahead on a worker
-- thread (C.mf_callable_run_async); elements, errors and the end are those of
-- the pipeline without prefetch.
local tf = require("moonflow")
local ffi = require("ffi")
local H = require("spec.helpers")
local C = require("moonflow.core").C
local prefetch = require("moonflow.data.prefetch")

local Dataset = tf.data.Dataset

local outcomes, rows = H.outcomes, H.rows

local function run_all(ds, limit)
  local sess = tf.Session()
  return outcomes(sess, ds:make_one_shot_iterator():get_next(), limit)
end

-- make(prefetch) builds the pipeline; asserts both give the same outcomes and
-- that the prefetched one ran its functions on the worker (jobs > 0).
local function same_with_prefetch(make, limit)
  local before = tf.data._async_runs
  local plain = run_all(make(false), limit)
  assert.equal(before, tf.data._async_runs, "no prefetch: nothing runs on a worker")
  local ahead = run_all(make(true), limit)
  assert.is_true(tf.data._async_runs > before, "prefetch: the functions ran on the worker")
  assert.same(plain, ahead)
  return plain
end


describe("Dataset:prefetch", function()
  -- Every run goes ahead, however short (see "times its first runs" below).
  local probe_runs, min_async_seconds = prefetch.probe_runs, prefetch.min_async_seconds
  before_each(function()
    tf.reset_default_graph()
    prefetch.probe_runs = 0
  end)
  after_each(function() prefetch.probe_runs, prefetch.min_async_seconds = probe_runs, min_async_seconds end)

  it("gives the same elements as no prefetch for map pipelines", function()
    local got = same_with_prefetch(function(p)
      local ds = Dataset.from_tensor_slices(rows(23, 4)):map(function(x) return tf.tanh(x) * 3 + 1 end)
      return p and ds:prefetch(3) or ds
    end)
    assert.equal(23, #got)
    -- map, shuffle, batch, repeat: the typical input pipeline
    got = same_with_prefetch(function(p)
      local ds = Dataset.from_tensor_slices({rows(17, 3), tf.array(H.values(17), tf.float32)})
        :map(function(x, y) return tf.reshape(x, {3, 1}):matmul(tf.reshape(x, {1, 3})), y * 2 end)
        :shuffle(5, {seed = 11}):batch(4):repeat_(3)
      return p and ds:prefetch(2) or ds
    end)
    assert.equal(15, #got)
    assert.same({4, 3, 3}, {#got[1][1], #got[1][1][1], #got[1][1][1][1]})
    assert.equal(1, #got[5][1])  -- 17 = 4*4 + 1 per pass
    -- a map of a map, a filter after a map, a map after a filter, dict elements
    got = same_with_prefetch(function(p)
      local ds = Dataset.range(40)
        :map(function(i) return {v = tf.cast(i, tf.float32) * 0.5, odd = tf.equal(i % 2, 1)} end)
        :filter(function(e) return tf.logical_not(e.odd) end)
        :map(function(e) return {v = e.v + 1, sq = e.v * e.v} end)
        :filter(function(e) return tf.less(e.sq, 300) end)
      return p and ds:prefetch(tf.data.experimental.AUTOTUNE) or ds
    end)
    assert.equal(18, #got)
    assert.same({v = 2, sq = 1}, got[2])
    -- take, skip, cache and an unbatched tail
    same_with_prefetch(function(p)
      local ds = Dataset.range(30):map(function(i) return tf.cast(i, tf.float32) ^ 2 end)
        :cache():skip(3):take(20):batch(6)
      return p and ds:prefetch(4) or ds
    end)
    -- prefetch in the middle and twice
    same_with_prefetch(function(p)
      local ds = Dataset.range(12):map(function(i) return i * 3 end)
      if p then ds = ds:prefetch(1) end
      ds = ds:filter(function(i) return tf.not_equal(i % 2, 0) end):batch(2)
      return p and ds:prefetch(2) or ds
    end)
  end)

  it("raises a map's error at the element it belongs to, and goes on after it", function()
    local function gen()
      local shapes = {4, 4, 3, 4, 5, 4}
      local i = 0
      return function()
        i = i + 1
        if not shapes[i] then return nil end
        local t = {}
        for k = 1, shapes[i] do t[k] = i * 10 + k end
        return tf.array(t)
      end
    end
    local got = same_with_prefetch(function(p)
      local ds = Dataset.from_generator(gen, tf.float32, {-1})
        :map(function(x) return tf.reshape(x, {2, 2}) * 2 end)
      return p and ds:prefetch(4) or ds
    end)
    assert.equal(6, #got)
    assert.same({{22, 24}, {26, 28}}, got[1])
    assert.is_string(got[3].error)
    assert.matches("Dataset:map: ", got[3].error, 1, true)
    assert.matches("reshape", got[3].error:lower(), 1, true)
    assert.is_string(got[5].error)
    assert.same({{122, 124}, {126, 128}}, got[6])
    -- inside a batch: the batch in progress is lost, the next starts after the error
    got = same_with_prefetch(function(p)
      local ds = Dataset.from_generator(gen, tf.float32, {-1})
        :map(function(x) return tf.reshape(x, {2, 2}) end):batch(2)
      return p and ds:prefetch(2) or ds
    end)
    assert.equal(4, #got)
    assert.is_string(got[2].error)
    assert.is_string(got[3].error)
    assert.equal(2, #got[1])
    assert.equal(1, #got[4])  -- e4 went with the failing e5; e6 is alone
  end)

  it("reads the blocks of a fused map-and-batch ahead: same batches, errors and end", function()
    local fused = tf.data._fused_blocks
    local got = same_with_prefetch(function(p)
      local ds = Dataset.from_tensor_slices(rows(23, 4)):map(function(x) return tf.tanh(x) * 3 + 1 end):batch(5)
      return p and ds:prefetch(2) or ds
    end)
    assert.same({5, 5, 5, 5, 3}, {#got[1], #got[2], #got[3], #got[4], #got[5]})
    assert.equal(fused + 10, tf.data._fused_blocks)
    -- An error inside the function loses its batch; the rows after it go on.
    got = same_with_prefetch(function(p)
      local values = tf.array({{4, 2}, {3, 0}, {1, 1}, {5, 5}, {2, 1}, {0, 1}, {7, 7}}, tf.int32)
      local ds = Dataset.from_tensor_slices(values)
        :map(function(x) return tf.floordiv(10, x) end):batch(2)
      return p and ds:prefetch(3) or ds
    end)
    assert.equal(4, #got)
    assert.matches("Dataset:map: FloorDiv: Integer division by zero", got[1].error, 1, true)
    assert.same({{10, 10}, {2, 2}}, got[2])
    assert.matches("Integer division by zero", got[3].error, 1, true)
    assert.same({{1, 1}}, got[4])
  end)

  it("maps num_parallel_calls elements ahead as prefetch does, fused or not", function()
    local got = same_with_prefetch(function(p)
      return Dataset.from_tensor_slices(rows(9, 3)):map(function(x) return tf.reduce_sum(x * x) end, p and 3 or nil)
    end)
    assert.equal(9, #got)
    assert.equal(5 * 5 + 3 * 3, got[1])  -- row 1 is {5, -3, 0}
    got = same_with_prefetch(function(p)
      return Dataset.from_tensor_slices(rows(9, 3))
        :map(function(x) return x * x end, {num_parallel_calls = p and tf.data.experimental.AUTOTUNE or nil}):batch(4)
    end)
    assert.same({25, 9, 0}, got[1][1])
    assert.equal(1, #got[3])
  end)

  it("discards the blocks read ahead when the iterator is re-initialized", function()
    local it = Dataset.from_tensor_slices(rows(20, 3)):map(function(x) return x * 2 end):batch(4):prefetch(3)
      :make_initializable_iterator()
    local x = it:get_next()
    local sess = tf.Session()
    sess:run(it.initializer)
    local first = sess:run(x):totable()
    sess:run(x)
    sess:run(it.initializer)
    local all = outcomes(sess, x)
    assert.equal(5, #all)
    assert.same(first, all[1])
    assert.same({10, -6, 0}, all[1][1])  -- row 1 is {5, -3, 0}
  end)

  it("times its first runs and reads ahead only runs long enough to pay for a thread hand-off", function()
    -- (its choice between the two ways, by the consumer's cycle times, depends on the machine's load)
    prefetch.probe_runs = 2
    local function make()
      return Dataset.from_tensor_slices(rows(12, 4)):map(function(x) return x + 1 end):prefetch(2)
    end
    prefetch.min_async_seconds = 1  -- no run of this map takes a second
    local before = tf.data._async_runs
    local slow = run_all(make())
    assert.equal(12, #slow)
    assert.equal(before, tf.data._async_runs)
    -- Any run is worth handing off: after two runs here, two go ahead (more
    -- if the consumer's cycles were shorter that way).
    prefetch.min_async_seconds = 0
    local ahead = run_all(make())
    assert.same(slow, ahead)
    assert.is_true(tf.data._async_runs >= before + 2)
  end)

  it("raises an error of the input at its element, and reads no further ahead before it", function()
    local calls
    local function make(p)
      calls = 0
      local ds = Dataset.from_generator(function()
        local i = 0
        return function()
          i = i + 1
          calls = calls + 1
          if i == 3 then error("generator broke at 3", 0) end
          if i > 6 then return nil end
          return i
        end
      end, tf.float32):map(function(x) return x * x end)
      return p and ds:prefetch(8) or ds
    end
    local sess = tf.Session()
    local nxt = make(true):make_one_shot_iterator():get_next()
    assert.equal(1, sess:run(nxt))
    assert.equal(3, calls)  -- read ahead up to the failing call, not past it
    assert.equal(4, sess:run(nxt))
    assert.matches("generator broke at 3", H.error_of(sess.run, sess, nxt), 1, true)
    assert.equal(16, sess:run(nxt))
    local got = same_with_prefetch(make)
    assert.same({1, 4, {error = "generator broke at 3"}, 16, 25, 36}, got)
  end)

  it("restarts cleanly when the iterator is re-initialized mid-epoch", function()
    local function pipeline(p)
      local ds = Dataset.from_tensor_slices(rows(20, 8))
        :map(function(x) return tf.reduce_sum(tf.reshape(x, {2, 4}):matmul(tf.reshape(x, {4, 2}))) end)
        :shuffle(6, {seed = 5}):batch(3)
      return p and ds:prefetch(3) or ds
    end
    local function epochs(p)
      local it = pipeline(p):make_initializable_iterator()
      local nxt = it:get_next()
      local sess = tf.Session()
      local out = {}
      for round = 1, 3 do
        sess:run(it.initializer)
        for _ = 1, round do out[#out + 1] = sess:run(nxt):totable() end  -- cut short
      end
      sess:run(it.initializer)
      for _, v in ipairs(outcomes(sess, nxt)) do out[#out + 1] = v end
      return out
    end
    local before = tf.data._async_runs
    local plain = epochs(false)
    local ahead = epochs(true)
    assert.is_true(tf.data._async_runs > before)
    assert.same(plain, ahead)
    assert.equal(1 + 2 + 3 + 7, #ahead)
  end)

  it("frees an iterator whose jobs are still in flight", function()
    local before = tf.data._async_runs
    for _ = 1, 3 do
      local sess = tf.Session()
      local ds = Dataset.from_tensor_slices(rows(64, 16))
        :map(function(x) return tf.reshape(x, {4, 4}):matmul(tf.reshape(x, {4, 4})) end):prefetch(16)
      local nxt = ds:make_one_shot_iterator():get_next()
      assert.same({4, 4}, sess:run(nxt):shape())
    end
    assert.is_true(tf.data._async_runs - before >= 3 * 16)
    tf.reset_default_graph()
    collectgarbage()
    collectgarbage()
  end)

  it("runs functions that call back into Lua on the calling thread", function()
    local before = tf.data._async_runs
    local ds = Dataset.range(5):map(function(i)
      return tf.lua_func(function(v) return tf.array(v:get() + 100, tf.int64) end, {i}, tf.int64)
    end):prefetch(2)
    assert.same({100, 101, 102, 103, 104}, run_all(ds))
    assert.equal(before, tf.data._async_runs)
  end)

  it("survives jobs finishing while their results are awaited (a cheap map, many elements)", function()
    -- A waiter that found its job unfinished once read the job's worker just
    -- as the worker cleared it, and crashed; 20000 quick jobs hit that window.
    local nxt = tf.data.Dataset.range(20000):map(function(x) return x * 2 end):prefetch(2)
      :make_one_shot_iterator():get_next()
    local sess = tf.Session()
    local n, sum = 0, 0
    while true do
      local ok, v = pcall(sess.run, sess, nxt)
      if not ok then
        assert.matches("End of sequence", v)
        break
      end
      n, sum = n + 1, sum + v
    end
    assert.equal(20000, n)
    assert.equal(2 * 19999 * 20000 / 2, sum)
  end)

  it("checks its argument", function()
    assert.matches("buffer_size must be a positive integer",
                   H.error_of(function() return Dataset.range(3):prefetch(0) end))
    assert.same({0, 1, 2}, run_all(Dataset.range(3):prefetch(2)))
  end)
end)

describe("C.mf_callable_run_async", function()
  before_each(function() tf.reset_default_graph() end)

  local function setup()
    local x = tf.placeholder(tf.float32, {64, 64})
    local y = x:matmul(x) + 1
    local sess = tf.Session()
    local ports = ffi.new("mf_output[2]")
    ports[0].op, ports[0].index = x.op.ptr, 0
    ports[1].op, ports[1].index = y.op.ptr, 0
    local status = C.mf_status_new()
    local call = C.mf_session_make_callable(sess.ptr, ports, 1, ports + 1, 1, nil, 0, status)
    assert.is_not_nil(call)
    local v = {}
    for i = 1, 64 do
      v[i] = {}
      for j = 1, 64 do v[i][j] = ((i * j) % 13 - 6) / 8 end
    end
    return sess, call, status, tf.array(v), x, y
  end

  it("runs a callable on another thread and hands the results over in wait", function()
    local sess, call, status, value, x, y = setup()
    local feeds = ffi.new("mf_tensor*[1]", value.ptr)
    local job = C.mf_callable_run_async(call, feeds, status)
    assert.is_not_nil(job)
    -- This thread does not enter the engine until the job is done: only
    -- another thread can have run it. (A bounded spin, so a broken worker
    -- fails the test instead of hanging it.)
    local spins = 0
    while not C.mf_async_done(job) do
      spins = spins + 1
      assert.is_true(spins < 2e9, "the job never finished on its own")
    end
    local out = ffi.new("mf_tensor*[1]")
    assert.equal(0, C.mf_async_wait(job, out, status))
    local got = tf.Array.wrap(out[0])
    assert.same(sess:run(y, {[x] = value}):totable(), got:totable())
    -- once only
    assert.equal(C.MF_FAILED_PRECONDITION, C.mf_async_wait(job, out, status))
    C.mf_async_free(job)
    C.mf_status_free(status)
  end)

  it("reports the run's error in wait, orders synchronous runs after the jobs, and cancels", function()
    local sess, call, status, value, x, y = setup()
    local feeds = ffi.new("mf_tensor*[1]")
    local job = C.mf_callable_run_async(call, feeds, status)  -- no feed value
    local out = ffi.new("mf_tensor*[1]")
    assert.equal(C.MF_INVALID_ARGUMENT, C.mf_async_wait(job, out, status))
    assert.matches("no value given for feed", ffi.string(C.mf_status_message(status)), 1, true)
    C.mf_async_free(job)
    feeds[0] = value.ptr
    local jobs = {}
    for i = 1, 8 do jobs[i] = C.mf_callable_run_async(call, feeds, status) end
    local want = sess:run(y, {[x] = value}):totable()  -- waits for the eight
    for i = 1, 8 do assert.is_true(C.mf_async_done(jobs[i])) end
    for i = 1, 8 do
      assert.equal(0, C.mf_async_wait(jobs[i], out, status))
      assert.same(want, tf.Array.wrap(out[0]):totable())
      C.mf_async_free(jobs[i])
    end
    -- freed before they ran: cancelled; closing cancels the rest
    for i = 1, 8 do jobs[i] = C.mf_callable_run_async(call, feeds, status) end
    for i = 8, 5, -1 do C.mf_async_free(jobs[i]) end
    sess:close()
    for i = 1, 4 do
      assert.is_true(C.mf_async_done(jobs[i]))
      local rc = C.mf_async_wait(jobs[i], out, status)
      assert.is_true(rc == 0 or rc == C.MF_CANCELLED)
      if rc == 0 then C.mf_tensor_release(out[0]) end
      C.mf_async_free(jobs[i])
    end
    assert.is_true(C.mf_callable_run_async(call, feeds, status) == nil)
    assert.equal(C.MF_FAILED_PRECONDITION, C.mf_status_code(status))
    C.mf_status_free(status)
  end)
end)
