-- data/prefetch.lua — reading ahead: the runs of a traced map or filter
-- function (data/trace.lua) submitted to the worker thread of its private
-- session (C.mf_callable_run_async, src/exec/async.c) ahead of the consumer.
--
-- LuaJIT has one thread, and Lua code (sources, generators, slicing,
-- batching, shuffling) runs only on it. The bulk of a pipeline's work,
-- though, is usually its traced map and filter functions, and those run in C:
-- prefetch runs them ahead on a worker thread. Every dataset's open(ctx,
-- ahead) passes on `ahead`, how many of its elements its consumer wants in
-- flight (prefetch asks for n; batch(b) asks its input for n*b elements, or
-- n blocks of b rows (data/block.lua); shuffle, repeat, take, skip, cache and
-- filter pass it on; map's num_parallel_calls asks for that many). A map or
-- filter given `ahead` reads that many elements (a fused map-and-batch that
-- many blocks, data/rowwise.lua) ahead of its consumer: it pulls the raw
-- inputs (Lua, memcpy) at once and submits the runs of its traced function,
-- one job per input, run in order; handing an input's results on waits for
-- its job (usually long finished: it ran while the training step did).
-- So the worker runs exactly the traced functions' C kernels; everything
-- else stays on the calling thread, and a pipeline without map or filter is
-- passed through. Results are those of the synchronous pipeline, element for
-- element: the private session runs the same jobs in the same order, an error
-- (of the function, or of the input pulled ahead, after which nothing more is
-- read ahead until it is handed on) is raised at the element it belongs to,
-- and the end likewise. Work read ahead but never used (a take() that stops,
-- a re-initialization, which cancels the jobs not yet started) has still
-- advanced the stateful ops of the function (random ops), as in TensorFlow.
-- A function with tf.lua_func or tf.Print calls back into Lua, so it runs on
-- the calling thread, unprefetched.
--
-- Reading ahead pays only where it is faster. Handing a run to the worker
-- costs the consumer a few microseconds (waking the thread, more on a loaded
-- machine), and the worker's kernels compete with the consumer's for the
-- cores (with OpenBLAS's own threads on two cores, a matmul map read ahead
-- made training steps slower). So the runs are measured (M.runs): runs
-- shorter on average than M.min_async_seconds stay on the calling thread
-- (a map-and-batch over small rows usually does), and longer ones are tried
-- both ways, read ahead only while the consumer's cycle is measurably
-- shorter that way (TensorFlow's autotuning likewise picks prefetch depths
-- and parallelism from measurements). And a job the consumer reaches before
-- the worker started it runs on the consumer's thread (mf_async_wait), so
-- reading ahead never waits for the worker's thread to be scheduled.
local ffi = require("ffi")
local core = require("moonflow.core")
local Session = require("moonflow.session")
local materialize = require("moonflow.data.component").materialize
local run_traced = require("moonflow.data.trace").run
local C = core.C
local fail = core.fail

local now = require("moonflow.clock")

local to_lua, to_value, release_holds = Session.to_lua, Session.to_value, Session.release_holds

local M = {}

-- Jobs submitted to worker threads so far (for tests: tf.data._async_runs).
M.async_runs = 0
-- Runs per trial of each way (0: always ahead), runs between trials, and
-- the mean run time below which runs stay on the consumer's thread.
M.probe_runs = 8
M.retrial_runs = 500
M.min_async_seconds = 30e-6

-- Submits the run of `async` (trace's) over element e; returns the job (a
-- cdata whose finalizer cancels or waits for it, keeping the fed values
-- alive until then). Raises what the synchronous run would raise for a bad
-- feed: the values are converted as Session:make_callable converts them.
local function submit(async, e, n, feeds, what)
  local args = {}
  for i = 1, n do args[i] = materialize(e[i]) end
  local holds = {}
  for i = 1, n do
    local ok, ptr, hold = pcall(to_value, args[i], async.args[i].dtype, async.args[i])
    if not ok then
      release_holds(holds, 1, i - 1)
      fail(what .. ": feed for " .. async.args[i].name .. ": " .. tostring(ptr))
    end
    feeds[i - 1], holds[i] = ptr, hold
  end
  local job = C.mf_callable_run_async(async.callable, feeds, core.status)  -- retains the feeds
  release_holds(holds, 1, n)
  if job == nil then core.check() end
  M.async_runs = M.async_runs + 1
  return ffi.gc(job, function(p)
    C.mf_async_free(p)
    args = nil  -- (the upvalue keeps the fed arrays alive until the job is over)
  end)
end

-- Waits for a job; its results as Lua values (what the callable returns), or
-- raises "what: <the run's error>".
function M.finish(job, fetches, nout, what)
  ffi.gc(job, nil)
  local rc = C.mf_async_wait(job, fetches, core.status)
  local msg = rc ~= 0 and ffi.string(C.mf_status_message(core.status)) or nil
  C.mf_async_free(job)
  if msg then fail(what .. ": " .. msg) end
  local r = {}
  for i = 1, nout do r[i] = to_lua(fetches[i - 1]) end
  return r
end

local function free_job(job)
  if job then
    ffi.gc(job, nil)
    C.mf_async_free(job)
  end
end

-- next() over next_in reading `depth` elements ahead: each input element
-- is submitted at once, and next() returns the oldest as (element, job).
-- An input error or the input's end is queued in its place and stops the
-- reading ahead until next() reaches it (then raises it / returns nil, and
-- the next call reads on, as the synchronous pipeline would call next_in
-- again). The iterator's restart discards what is queued (ctx.readers).
function M.read_ahead(ctx, next_in, depth, async, n, what)
  local queue, head, tail, stopped = {}, 1, 0, false
  local feeds = core.value_ptrs(math.max(n, 1))
  local function pull()
    local ok, e = pcall(next_in)
    local entry
    if not ok then entry = {err = e}
    elseif e == nil then entry = {finished = true}
    else
      local ok2, job = pcall(submit, async, e, n, feeds, what)
      entry = ok2 and {elem = e, job = job} or {err = job}
    end
    if entry.err or entry.finished then stopped = true end
    tail = tail + 1
    queue[tail] = entry
  end
  local function discard()
    for i = head, tail do free_job(queue[i].job); queue[i] = nil end
    head, tail, stopped = 1, 0, false
  end
  -- Weak: a reader dropped (a finished repeat pass) takes its entry along;
  -- its jobs' finalizers cancel them.
  if ctx.readers then ctx.readers[discard] = true end
  local function next_entry()
    local _ = discard
    if head > tail then pull() end
    local entry = queue[head]
    queue[head] = nil
    head = head + 1
    -- Keep `depth` jobs in flight while the consumer works on this one.
    while not stopped and tail - head + 1 < depth do pull() end
    if entry.err ~= nil then stopped = false; error(entry.err, 0) end
    if entry.finished then stopped = false; return nil end
    return entry.elem, entry.job
  end
  -- set_depth(d) changes how far it reads ahead (0: no further than asked);
  -- pending() is how many inputs it holds, pulled but not handed on.
  return next_entry, function(d) depth = d end, function() return tail - head + 1 end
end

-- The median of a list of numbers (sorted in place); nil when empty.
local function median(list)
  table.sort(list)
  return list[math.floor((#list + 1) / 2)]
end

-- The ways a run goes: on the consumer's thread, or read ahead.
local HERE, AHEAD = 1, 2

-- next() over next_in, each input's traced run done (t: trace's prepare;
-- n inputs, nout results): returns input, ok, results (a list) or the
-- run's error ("what: ..."); nil at the end. Errors of next_in are raised.
-- Given `ahead`, the runs are read ahead that deep when measurements say it
-- pays (see the top of this file): a trial of M.probe_runs runs here, timing
-- the runs and the consumer's cycle (from one call of next() to the next:
-- the run or the wait for it, and whatever the consumer did meanwhile);
-- unless the runs are too short to hand off, a trial of as many read ahead;
-- then the way of the shorter median cycle (ahead only if 10% shorter, and
-- only while the median of each M.probe_runs cycles ahead stays below the
-- trial's here), tried again every M.retrial_runs runs (the machine's load
-- changes). `tuning` keeps the measurements and the choice from one pass
-- over the input to the next (a table the caller keeps per iterator, in
-- ctx.node). M.probe_runs = 0 reads ahead always (tests).
function M.runs(ctx, next_in, ahead, t, n, nout, what, tuning)
  local function run_here()
    local e = next_in()
    if e == nil then return nil end
    return e, pcall(run_traced, t.call, e, n, what)
  end
  if not ahead or not t.async then return run_here end
  local reader, set_depth, pending = nil, nil, nil
  local fetches = core.value_ptrs(math.max(nout, 1))
  local function run_ahead()
    if not reader then reader, set_depth, pending = M.read_ahead(ctx, next_in, ahead, t.async, n, what) end
    local e, job = reader()
    if e == nil then return nil end
    return e, pcall(M.finish, job, fetches, nout, what)
  end
  if M.probe_runs == 0 then return run_ahead end
  -- way: of the trial under way, `left` runs long; chosen: after it, for
  -- `since` runs; cycles: the trial's, per way; here_cycle: the last trial's
  -- median here; window: the cycles ahead since the last watch.
  local s = tuning
  if not s.way then
    s.way, s.left, s.since, s.cycles, s.run_seconds, s.timed, s.window = HERE, M.probe_runs, 0, {{}, {}}, 0, 0, {}
  end
  return function()
    local t0 = now()
    if s.last_way then table.insert(s.cycles[s.last_way], t0 - s.last) end
    if s.chosen == AHEAD and s.last then
      -- Watched: ahead turning slower than the trial here ends at once.
      s.window[#s.window + 1] = t0 - s.last
      if #s.window == M.probe_runs then
        if median(s.window) > s.here_cycle then s.chosen = HERE end
        s.window = {}
      end
    end
    s.last = t0
    if not s.chosen and s.left == 0 then  -- a trial is over
      if s.way == HERE and s.timed > 0 and s.run_seconds / s.timed >= M.min_async_seconds then
        s.way, s.left = AHEAD, M.probe_runs
      else
        -- Ahead only when clearly faster: a wrong choice lasts until the next trial.
        local ahead_cycle = median(s.cycles[AHEAD])
        s.here_cycle = median(s.cycles[HERE])
        local faster = s.way == AHEAD and ahead_cycle and s.here_cycle and ahead_cycle < 0.9 * s.here_cycle
        s.chosen, s.since, s.window = faster and AHEAD or HERE, 0, {}
      end
    end
    if s.chosen then
      s.since = s.since + 1
      if s.since > M.retrial_runs then
        s.chosen, s.way, s.left, s.cycles, s.run_seconds, s.timed = nil, HERE, M.probe_runs, {{}, {}}, 0, 0
      end
    end
    local this = s.chosen or s.way
    s.last_way = not s.chosen and this or nil
    if not s.chosen then s.left = s.left - 1 end
    if reader then set_depth((s.chosen or s.way) == AHEAD and ahead or 0) end
    -- Inputs already read ahead go first, whichever way is chosen.
    if this == AHEAD or (reader and pending() > 0) then return run_ahead() end
    if s.chosen then return run_here() end
    local e = next_in()
    if e == nil then return nil end
    local r0 = now()
    local ok, r = pcall(run_traced, t.call, e, n, what)
    s.run_seconds, s.timed = s.run_seconds + (now() - r0), s.timed + 1
    return e, ok, r
  end
end

return M
