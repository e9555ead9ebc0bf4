-- spec/mpi/worker.lua — one rank of the MPI specs: spec/mpi_spec.lua runs
-- `mpirun -np K luajit spec/mpi/worker.lua CASE [ARGS]` and reads what every
-- rank prints. Each rank checks its results against values worked out here
-- by hand from what every rank fed (rank r's element i is known to all) and
-- prints "rank R ok CHECK" per check; a failed check raises, so the rank
-- exits non-zero and mpirun with it.
local ffi = require("ffi")
local tf = require("moonflow")
local mpi = require("moonflow.mpi")

local case = arg[1]
mpi.init{timeout = tonumber(os.getenv("MOONFLOW_MPI_TIMEOUT")) or 60}
local rank, size = mpi.rank(), mpi.size()

local function ok(what) io.write(string.format("rank %d ok %s\n", rank, what)); io.flush() end

-- The numbers (booleans as 0/1) of a run's result, in order.
local function flat(v)
  if type(v) == "number" then return {v} end
  if type(v) == "boolean" then return {v and 1 or 0} end
  local out, n = {}, v:size()
  local p = ffi.cast(v.dtype.ctype .. "*", v:data())
  for i = 0, n - 1 do
    local e = p[i]
    out[i + 1] = type(e) == "boolean" and (e and 1 or 0) or tonumber(e)
  end
  return out
end

local function near(want, got, tol, what)
  assert(#want == #got, string.format("%s: %d elements expected, got %d", what, #want, #got))
  for i = 1, #want do
    assert(math.abs(want[i] - got[i]) <= tol * math.max(1, math.abs(want[i])),
           string.format("%s: element %d is %.17g, expected %.17g", what, i, got[i], want[i]))
  end
end

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- Rank r's element i (0-based) of a tensor of dtype.
local function value(dtype, r, i)
  if dtype == tf.bool then return (r + i) % 2 end
  if dtype == tf.uint8 then return (7 * r + i) % 251 end
  local v = (r + 1) * (i + 1)
  if dtype.is_floating then v = v + 0.25 * r end
  return v
end

local function values(dtype, r, shape)
  local out = {}
  for i = 1, numel(shape) do out[i] = value(dtype, r, i - 1) end
  return out
end

-- A constant of rank r's values.
local function const(dtype, r, shape)
  local a = tf.Array.new(dtype, shape)
  local p = ffi.cast(dtype.ctype .. "*", a:data())
  for i = 0, numel(shape) - 1 do
    local v = value(dtype, r, i)
    p[i] = dtype == tf.bool and v == 1 or v
  end
  return tf.constant(a)
end

ffi.cdef("int getpid(void); int kill(int pid, int sig);")
local function signal_self(sig) ffi.C.kill(ffi.C.getpid(), sig) end

local function shape_str(s) return "[" .. table.concat(s, ",") .. "]" end

local function error_of(fn)
  local okay, err = pcall(fn)
  assert(not okay, "expected an error")
  return tostring(err)
end

local function expect_error(fn, patterns, what)
  local err = error_of(fn)
  for _, p in ipairs(patterns) do
    assert(err:find(p, 1, true), string.format("%s: the error lacks %q: %s", what, p, err))
  end
  ok(what)
end

local SHAPES = {{}, {0}, {2, 0}, {5}, {1, 7, 3}}
tf.hygiene.graph_growth = false -- the checks build ops between runs on purpose
local sess = tf.Session()

local cases = {}

function cases.collectives()
  local root = size - 1
  for _, dtype in ipairs({tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.bool}) do
    local reducible = dtype.is_floating or dtype == tf.int32 or dtype == tf.int64
    for _, shape in ipairs(SHAPES) do
      local tag = dtype.name .. " " .. shape_str(shape)
      local x = const(dtype, rank, shape)
      if reducible then
        local want = {}
        for i = 1, numel(shape) do
          want[i] = 0
          for r = 0, size - 1 do want[i] = want[i] + value(dtype, r, i - 1) end
        end
        local got = sess:run(mpi.allreduce(x, false))
        near(want, flat(got), 0, "allreduce sum " .. tag)
        local y = mpi.allreduce(x, false)
        assert(y:get_shape():as_list() and #y:get_shape():as_list() == #shape, "static shape " .. tag)
        ok("allreduce sum " .. tag)
        if dtype.is_floating then
          for i = 1, #want do want[i] = want[i] / size end
          near(want, flat(sess:run(mpi.allreduce(x))), dtype == tf.float32 and 1e-6 or 1e-15, "allreduce average " .. tag)
          ok("allreduce average " .. tag)
        end
      end
      near(values(dtype, root, shape), flat(sess:run(mpi.broadcast(x, root))), 0, "broadcast " .. tag)
      ok("broadcast " .. tag)
      if #shape > 0 then
        -- Rank r gives shape[1] + r rows: the first dims differ.
        local want, total = {}, 0
        for r = 0, size - 1 do
          local mine = {unpack(shape)}
          mine[1] = shape[1] + r
          total = total + mine[1]
          for _, v in ipairs(values(dtype, r, mine)) do want[#want + 1] = v end
        end
        local mine = {unpack(shape)}
        mine[1] = shape[1] + rank
        local y = mpi.allgather(const(dtype, rank, mine))
        local got = sess:run(y)
        local got_shape = got:shape()
        assert(got_shape[1] == total, "allgather rows " .. tag)
        for k = 2, #shape do assert(got_shape[k] == shape[k], "allgather dims " .. tag) end
        near(want, flat(got), 0, "allgather " .. tag)
        ok("allgather " .. tag)
      end
    end
  end
end

-- Gradients: analytical (tf.gradients) against central differences of the
-- job's loss, the sum over the ranks of sum(y * w_r), w_r known to all.
-- One rank's one element is moved at a time; every rank runs every step.
function cases.gradients()
  for _, dtype in ipairs({tf.float32, tf.float64}) do
    local builds = {
      {"allreduce sum", {2, 3}, function(x) return mpi.allreduce(x, false) end},
      {"allreduce average", {1, 7, 3}, function(x) return mpi.allreduce(x) end},
      {"allreduce sum scalar", {}, function(x) return mpi.allreduce(x, false) end},
      {"allgather", {2, 3}, function(x) return mpi.allgather(x) end, true},
      {"broadcast", {2, 3}, function(x) return mpi.broadcast(x, size - 1) end},
    }
    for _, b in ipairs(builds) do
      local name, shape, build, ragged = b[1], b[2], b[3], b[4]
      local mine = {unpack(shape)}
      if ragged then mine[1] = shape[1] + rank end  -- allgather: rank r has shape[1] + r rows
      local x = tf.placeholder(dtype, mine)
      local y = build(x)
      local w = tf.cast(tf.reshape(tf.range(tf.size(y)), tf.shape(y)), dtype) * (0.1 * (rank + 1)) + 0.5
      local loss = mpi.allreduce(tf.reduce_sum(y * w), false)
      local grad = tf.gradients(tf.reduce_sum(y * w), {x})[1]
      local x0 = tf.Array.new(dtype, mine)
      local p = ffi.cast(dtype.ctype .. "*", x0:data())
      for i = 0, numel(mine) - 1 do p[i] = 0.3 * (i + 1) - 0.2 * rank end
      local analytic = flat(sess:run(grad, {[x] = x0}))
      local eps = dtype == tf.float64 and 1e-6 or 1e-2
      for q = 0, size - 1 do
        local n = numel({unpack(shape)}) + (ragged and numel({unpack(shape, 2)}) * q or 0)
        for i = 0, n - 1 do
          local function at(delta)
            if rank == q then p[i] = p[i] + delta end
            local l = sess:run(loss, {[x] = x0})
            if rank == q then p[i] = p[i] - delta end
            return l
          end
          local numeric = (at(eps) - at(-eps)) / (2 * eps)
          if rank == q then
            near({numeric}, {analytic[i + 1]}, dtype == tf.float64 and 1e-6 or 2e-2,
                 string.format("d(loss)/dx %s %s element %d", name, dtype.name, i))
          end
        end
      end
      ok("gradient " .. name .. " " .. dtype.name)
    end
  end
end

function cases.bad_input()
  expect_error(function() mpi.allreduce(tf.constant(true)) end, {"MpiAllreduce", "bool", "float32 or float64"},
               "allreduce of bool")
  expect_error(function() mpi.allreduce(tf.constant(3, tf.int32)) end, {"cannot average a int32 tensor"},
               "average of int32")
  expect_error(function() mpi.allgather(tf.constant(1)) end, {"MpiAllgather", "at least one dimension", "scalar"},
               "allgather of a scalar")
  expect_error(function() mpi.broadcast(tf.constant(1), size) end,
               {"MpiBroadcast", "root must be a rank of the job, 0 to " .. (size - 1) .. ", got " .. size},
               "broadcast from a root out of range")
  expect_error(function() mpi.broadcast(tf.constant(1), 0.5) end, {"mpi.broadcast: root must be a rank"},
               "broadcast from a fractional root")
  expect_error(function() mpi.average_gradients({tf.constant(1)}, 0, "yes") end,
               {"mpi.average_gradients: overlap must be true or false, got"}, "average_gradients overlap not a boolean")
  expect_error(function() mpi.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.1), {overlap = 1}) end,
               {"mpi.DistributedOptimizer: overlap must be true or false, got"}, "DistributedOptimizer overlap not a boolean")
  -- Ranks that fuse different tensors into an overlapped allreduce.
  local fused = mpi.average_gradients({tf.fill({rank + 1}, 1), tf.fill({2}, 1)}, 1024)
  local wanted = {"MpiAllreduceStart 'average_gradients/allreduce_start", "every rank must allreduce tensors of " ..
                  "the same dtypes and shapes: rank 0 has 2 float32 tensors of 3 elements, rank 1 has"}
  for r = 1, size - 1 do
    wanted[#wanted + 1] = "rank " .. r .. " has 2 float32 tensors of " .. (r + 3) .. " elements (shapes unlike rank 0's)"
  end
  expect_error(function() sess:run(fused) end, wanted, "overlapped allreduce of different shapes")
  -- Ranks that disagree: every rank gets an error naming every rank's value, at run time.
  local shapes = {}
  for r = 0, size - 1 do shapes[#shapes + 1] = "rank " .. r .. " has float32 [" .. (r + 1) .. "]" end
  local x = tf.fill({rank + 1}, 1)
  local y = mpi.allreduce(x, {name = "ragged_sum"})
  expect_error(function() sess:run(y) end,
               {"MpiAllreduce 'ragged_sum': every rank must pass the same dtype and shape: " ..
                table.concat(shapes, ", "), "worker.lua"}, "allreduce of different shapes")
  local mixed = tf.cast(tf.fill({2}, 1), rank == 0 and tf.float64 or tf.float32)
  expect_error(function() sess:run(mpi.allgather(mixed)) end,
               {"MpiAllgather", "same dtype and the same dims after the first", "rank 0 has float64 [2]",
                "rank 1 has float32 [2]"}, "allgather of different dtypes")
  expect_error(function() sess:run(mpi.broadcast(x, 0)) end, {"MpiBroadcast", "same dtype and shape"},
               "broadcast of different shapes")
  -- The session and the job stay usable.
  near({size}, flat(sess:run(mpi.allreduce(tf.constant(1), false))), 0, "after the errors")
  ok("usable after errors")
end

-- Inside tf.while_loop and tf.cond (the same path on every rank).
function cases.control_flow()
  local x = tf.placeholder(tf.float64, {3})
  local x0 = tf.array({1 + rank, 2, 3 * rank}, tf.float64)
  -- acc_{i+1} = acc_i + allreduce_sum(x * i), i = 1..3
  local _, acc = tf.while_loop(function(i) return tf.less(i, 4) end,
                               function(i, a) return i + 1, a + mpi.allreduce(x * tf.cast(i, tf.float64), false) end,
                               {tf.constant(1, tf.int32), tf.zeros({3}, tf.float64)})
  local sum = {0, 0, 0}
  for r = 0, size - 1 do
    local v = {1 + r, 2, 3 * r}
    for k = 1, 3 do sum[k] = sum[k] + v[k] end
  end
  local want = {}
  for k = 1, 3 do want[k] = 6 * sum[k] end
  near(want, flat(sess:run(acc, {[x] = x0})), 1e-12, "allreduce in while_loop")
  ok("allreduce in while_loop")
  -- d(sum over ranks of acc . 1)/dx on each rank: sum over ranks of (1 + 2 + 3) = 6 * size
  local g = tf.gradients(tf.reduce_sum(acc), {x})[1]
  near({6 * size, 6 * size, 6 * size}, flat(sess:run(g, {[x] = x0})), 1e-12, "gradient through while_loop")
  ok("gradient of allreduce in while_loop")
  local pred = tf.placeholder(tf.bool, {})
  local c = tf.cond(pred, function() return mpi.allreduce(x, false) end,
                    function() return mpi.broadcast(x, 0) end)
  near(sum, flat(sess:run(c, {[x] = x0, [pred] = true})), 1e-12, "allreduce in cond")
  near({1, 2, 0}, flat(sess:run(c, {[x] = x0, [pred] = false})), 1e-12, "broadcast in cond")
  ok("allreduce and broadcast in cond")
end

-- Overlap: a three-layer net whose first two layers are wide, each gradient
-- its own buffer (fusion_threshold 0). The backward pass computes the last
-- layer's gradients first: their allreduce must begin on the communication
-- thread before the gradient of the first layer's kernel, which takes the
-- big matmuls of the two wide layers' backprop, is handed over. The averaged
-- gradients equal those of the synchronous allreduce.
function cases.overlap()
  tf.set_random_seed(3)
  local x = tf.placeholder(tf.float32, {1024, 512})
  local h = tf.layers.dense(x, 512, {activation = tf.nn.tanh})
  h = tf.layers.dense(h, 512, {activation = tf.nn.tanh})
  local loss = tf.reduce_mean(tf.square(tf.layers.dense(h, 10)))
  local vars = tf.trainable_variables()
  local grads = tf.gradients(loss, vars)
  local overlapped = mpi.average_gradients(grads, 0)
  local synchronous = mpi.average_gradients(grads, 0, false)
  local starts, waits = 0, 0
  for _, op in ipairs(tf.get_default_graph():get_operations()) do
    if op.type == "MpiAllreduceStart" then starts = starts + 1 end
    if op.type == "MpiAllreduceWait" then waits = waits + 1 end
  end
  assert(starts == #vars and waits == #vars, starts .. " starts, " .. waits .. " waits")
  sess:run(tf.global_variables_initializer())
  sess:run(mpi.broadcast_global_variables(0))
  local x0 = tf.Array.new(tf.float32, {1024, 512})
  local p = x0:data()
  for i = 0, 1024 * 512 - 1 do p[i] = math.sin(i * 0.37 + rank) end
  for step = 1, 3 do
    local fetched = sess:run({overlapped, synchronous}, {[x] = x0})
    for k = 1, #vars do
      near(flat(fetched[2][k]), flat(fetched[1][k]), 0, "overlapped gradient " .. k .. " step " .. step)
    end
    local log = mpi.recent_collectives(#vars)
    assert(#log == #vars, #log .. " collectives logged")
    for i = 2, #log do assert(log[i].ticket == log[i - 1].ticket + 1, "tickets in order") end
    -- Handed over in the order the backward pass computed them: last layer's
    -- bias and kernel first, the first layer's kernel last (its gradient ends
    -- the backward pass).
    local first, last = log[1], log[#log]
    assert(first.bytes == 10 * 4 or first.bytes == 512 * 10 * 4, "first buffer holds " .. first.bytes .. " bytes")
    assert(last.bytes == 512 * 512 * 4, "last buffer holds " .. last.bytes .. " bytes")
    assert(first.started < last.submitted,
           string.format("the first allreduce began %.6f s after the last gradient was handed over",
                         first.started - last.submitted))
    io.write(string.format("rank %d step %d: the first allreduce began %.1f ms before the last gradient was " ..
                           "handed over and took %.1f ms\n", rank, step, 1e3 * (last.submitted - first.started),
                           1e3 * (first.finished - first.started)))
  end
  ok("overlapped averages equal synchronous ones")
  ok("first allreduce began before the last gradient was computed")
end

-- The digits MLP: N steps of SGD with a global batch of B rows, each rank
-- feeding its B / size of them; rank 0 writes the final weights to OUT.npy,
-- and a checkpoint through Saver:save (rank 0 alone) under OUT-rankR/.
function cases.train(steps, batch, out, mode)
  steps, batch = tonumber(steps), tonumber(batch)
  local overlap = mode ~= "synchronous"
  assert(batch % size == 0, "the global batch must split evenly over the ranks")
  local data = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
  local rows = {}
  local pipe = assert(io.popen("gzip -dc " .. data))
  for line in pipe:lines() do if line:find("%d") then rows[#rows + 1] = line end end
  pipe:close()
  assert(#rows >= steps * batch, "not enough digits")
  local local_batch = batch / size
  tf.set_random_seed(7)
  local images = tf.placeholder(tf.float32, {local_batch, 64})
  local labels = tf.placeholder(tf.int32, {local_batch})
  local hidden = tf.layers.dense(images, 32, {activation = tf.nn.relu})
  local logits = tf.layers.dense(hidden, 10)
  local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = labels, logits = logits}))
  local opt = mpi.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.5), {overlap = overlap})
  local train = opt:minimize(loss)
  -- The four gradients (two kernels, two biases) are fused into one allreduce.
  local allreduces = 0
  for _, op in ipairs(tf.get_default_graph():get_operations()) do
    if op.type == (overlap and "MpiAllreduceStart" or "MpiAllreduce") then allreduces = allreduces + 1 end
  end
  assert(allreduces == (size > 1 and 1 or 0), allreduces .. " allreduces")
  sess:run(tf.global_variables_initializer())
  sess:run(mpi.broadcast_global_variables(0))
  local x, y = tf.Array.new(tf.float32, {local_batch, 64}), tf.Array.new(tf.int32, {local_batch})
  local px, py = x:data(), y:data()
  local first, last
  for step = 0, steps - 1 do
    for k = 0, local_batch - 1 do
      local row, c = rows[step * batch + rank * local_batch + k + 1], 0
      for field in row:gmatch("[^,]+") do
        if c < 64 then px[k * 64 + c] = tonumber(field) / 16 else py[k] = tonumber(field) end
        c = c + 1
      end
    end
    last = sess:run({train, loss}, {[images] = x, [labels] = y})[2]
    first = first or last
  end
  assert(last < first / 2, string.format("the loss went from %g to %g", first, last))
  local weights = {}
  for _, v in ipairs(tf.trainable_variables()) do weights[#weights + 1] = tf.reshape(v, {-1}) end
  local all = sess:run(tf.concat(weights, 0))
  if rank == 0 then tf.io.write_npy(out .. ".npy", all) end
  os.execute("mkdir -p '" .. out .. "-rank" .. rank .. "'")
  tf.train.Saver():save(sess, out .. "-rank" .. rank .. "/model")
  ok(string.format("trained %d steps, local loss %.3f -> %.3f", steps, first, last))
end

-- Checkpoints: by default only rank 0's Saver:save writes (every rank gets
-- the path back); the others read it after a barrier. With
-- mpi.init{write_on_all_ranks = true} every rank writes. DIR/ranks-R/ and
-- DIR/all-R/ are rank R's directories; the spec looks at what is there.
function cases.checkpoints(dir)
  local v = tf.Variable(tf.constant({1, 2, 3}, tf.float32), {name = "v"})
  sess:run(tf.global_variables_initializer())
  sess:run(tf.assign(v, tf.constant({10, 20, 30}, tf.float32) * (rank + 1)))
  local saver = tf.train.Saver()
  local mine = string.format("%s/ranks-%d", dir, rank)
  os.execute("mkdir -p '" .. mine .. "' '" .. dir .. "/all-" .. rank .. "'")
  local path = saver:save(sess, mine .. "/model", {global_step = 5})
  assert(path == mine .. "/model-5", path)
  ok("save returned " .. path:match("[^/]+$"))
  mpi.barrier()
  saver:restore(sess, dir .. "/ranks-0/model-5")
  near({10, 20, 30}, flat(sess:run(v)), 0, "restored rank 0's checkpoint")
  ok("restored rank 0's checkpoint")
  mpi.init{write_on_all_ranks = true}
  saver:save(sess, dir .. "/all-" .. rank .. "/model")
  ok("saved with write_on_all_ranks")
end

-- Rank 1 stops (SIGSTOP: a hung process or an unreachable machine) before
-- the allreduce; the others fail at the deadline with an error saying so,
-- later collectives fail at once, and the job ends at their exit.
function cases.stop()
  local x = tf.constant({1, 2})
  near({size, 2 * size}, flat(sess:run(mpi.allreduce(x, false))), 0, "before the stop")
  ok("allreduce before the stop")
  if rank == 1 then
    signal_self(19) -- SIGSTOP
  end
  local t0 = os.time()
  local err = error_of(function() sess:run(mpi.allreduce(x, {average = false, name = "after_stop"})) end)
  assert(err:find("MpiAllreduce 'after_stop': timed out after", 1, true), err)
  assert(err:find("a rank died, stopped", 1, true), err)
  io.write("rank " .. rank .. " error: " .. err .. "\n")
  ok("timed out after " .. os.difftime(os.time(), t0) .. " s")
  local again = error_of(function() sess:run(mpi.allreduce(x)) end)
  assert(again:find("MPI is unusable in this process since an earlier collective timed out", 1, true), again)
  ok("later collectives fail at once")
  -- A rank that timed out ends the job as it exits (MPI_Abort): linger as
  -- long as the deadline, so the other waiting rank, whose deadline may fall
  -- a little later on a loaded machine, reports too.
  os.execute("sleep 3")
end

-- Rank 1 stops before an overlapped allreduce: rank 0's wait for it fails
-- at the deadline with the error of the collective on the communication
-- thread, and the job ends at its exit.
function cases.stop_overlapped()
  local x = tf.constant({1, 2})
  local averaged = mpi.average_gradients({x * 2, x * 3}, 0)
  near({2, 4}, flat(sess:run(averaged[1])), 0, "before the stop")
  ok("overlapped allreduce before the stop")
  if rank == 1 then
    signal_self(19) -- SIGSTOP
  end
  local err = error_of(function() sess:run(averaged) end)
  assert(err:find("MpiAllreduceStart 'average_gradients/allreduce_start", 1, true), err)
  assert(err:find("timed out after", 1, true), err)
  io.write("rank " .. rank .. " error: " .. err .. "\n")
  ok("overlapped allreduce timed out")
  local again = error_of(function() sess:run(averaged) end)
  assert(again:find("MPI is unusable in this process since an earlier collective timed out", 1, true), again)
  ok("later collectives fail at once")
end

-- Rank 1 dies (SIGKILL) before the allreduce: mpirun ends the job.
function cases.kill()
  local x = tf.constant({1, 2})
  sess:run(mpi.allreduce(x))
  ok("allreduce before the kill")
  if rank == 1 then
    signal_self(9) -- SIGKILL
  end
  sess:run(mpi.allreduce(x))
  ok("allreduce after the kill")
end

assert(cases[case], "no case " .. tostring(case))
cases[case](select(2, unpack(arg)))
io.write(string.format("rank %d done\n", rank))
