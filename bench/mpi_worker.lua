-- bench/mpi_worker.lua — one rank of the MPI bench rows (bench/run.lua runs
-- it under mpirun): `allreduce PEER_LIB` times moonflow's allreduce of 1 KB
-- to 64 MB of float32 against MPI_Allreduce in a C loop (bench/mpi_peer.c);
-- `train` times steps of an MLP whose global batch the ranks split, `overlap`
-- those steps with the averaging overlapped and synchronous. Every
-- rank runs the same calls (no calibration that could differ between ranks);
-- a batch's time is the slowest rank's; rank 0 prints "row <what> <seconds
-- per call>..." lines, the median of REPS interleaved batches.
package.path = "bench/?.lua;" .. package.path
local ffi = require("ffi")
local tf = require("moonflow")
local mpi = require("moonflow.mpi")
local H = require("harness")

mpi.init()
local quick = os.getenv("BENCH_QUICK") == "1"
local REPS = quick and 3 or 7
local case = arg[1]

-- The slowest rank's seconds.
local slowest_of = {}
local function slowest(t)
  slowest_of[1] = slowest_of[1] or tf.placeholder(tf.float64, {})
  local p = slowest_of[1]
  slowest_of[2] = slowest_of[2] or tf.Session()
  slowest_of[3] = slowest_of[3] or tf.reduce_max(mpi.allgather(tf.reshape(p, {1})))
  return slowest_of[2]:run(slowest_of[3], {[p] = t})
end

-- Median seconds per call of each contender, run in turn REPS times.
local function interleave(contenders, calls)
  local samples = {}
  for i = 1, #contenders do samples[i] = {} end
  for _ = 1, REPS do
    for i, run in ipairs(contenders) do
      mpi.barrier()
      samples[i][#samples[i] + 1] = slowest(run(calls)) / calls
    end
  end
  local out = {}
  for i = 1, #contenders do out[i] = H.median(samples[i]) end
  return out
end

if case == "allreduce" then
  ffi.cdef("double mpi_peer_allreduce(const float *in, float *out, int n, int calls);")
  local peer = ffi.load(arg[2])
  local sess = tf.Session()
  for _, bytes in ipairs({1024, 16 * 1024, 256 * 1024, 4 * 1024 * 1024, 64 * 1024 * 1024}) do
    local n = bytes / 4
    local x = tf.Variable(tf.fill({n}, 1.5))
    local y = mpi.allreduce(x, false)
    sess:run(x.initializer)
    local step = sess:make_callable(y)
    local into = tf.Array.new(tf.float32, {n})
    local input = tf.Array.new(tf.float32, {n})
    -- Calls per batch: about 256 MB of data per batch, at least 3.
    local calls = math.max(3, math.floor((quick and 16 or 256) * 1024 * 1024 / bytes))
    if calls > 2000 then calls = 2000 end
    step() -- plan and buffers
    local t = interleave({
      function(k) local t0 = H.now() for _ = 1, k do step() end return H.now() - t0 end,
      function(k) return peer.mpi_peer_allreduce(input:data(), into:data(), n, k) end,
    }, calls)
    if mpi.rank() == 0 then print(string.format("row %d %.9g %.9g", bytes, t[1], t[2])) end
  end
else
  -- The MLP 784-512-512-10, global batch 256 split over the ranks. `train`:
  -- the DistributedOptimizer's defaults. `overlap`: the same steps with the
  -- averaging overlapped (fusion_threshold 1 MiB: one buffer per layer's
  -- kernel, so the last layers' allreduces run during the backward pass of the
  -- first) and synchronous (one fused allreduce after the backward pass), in
  -- turn in this one job.
  local global_batch = 256
  local b = global_batch / mpi.size()
  local x = tf.placeholder(tf.float32, {b, 784})
  local labels = tf.placeholder(tf.int32, {b})
  local function train_op(scope, options)
    return tf.variable_scope(scope, function()
      tf.set_random_seed(1)
      local h = tf.layers.dense(tf.layers.dense(x, 512, {activation = tf.nn.relu}), 512, {activation = tf.nn.relu})
      local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = labels,
                                                                                 logits = tf.layers.dense(h, 10)}))
      return mpi.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.1), options):minimize(loss)
    end)
  end
  local runs = case == "train" and {train_op("default")} or
               {train_op("overlapped", {fusion_threshold = 1024 * 1024}), train_op("synchronous", {overlap = false})}
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  sess:run(mpi.broadcast_global_variables(0))
  local xs, ys = tf.Array.new(tf.float32, {b, 784}), tf.Array.new(tf.int32, {b})
  for i = 0, b * 784 - 1 do xs:data()[i] = (i % 97) / 97 end
  for i = 0, b - 1 do ys:data()[i] = i % 10 end
  local contenders = {}
  for i, op in ipairs(runs) do
    local step = sess:make_callable(op, {x, labels})
    step(xs, ys)
    contenders[i] = function(k) local t0 = H.now() for _ = 1, k do step(xs, ys) end return H.now() - t0 end
  end
  local t = interleave(contenders, quick and 3 or 20)
  for i = 1, #t do t[i] = string.format("%.9g", t[i]) end
  if mpi.rank() == 0 then print("row " .. case .. " " .. table.concat(t, " ")) end
end
