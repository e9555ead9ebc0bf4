-- bench/run.lua — moonflow's benchmarks, each beside a peer measured in the
-- same run. `make bench` runs it (LUA_PATH, MOONFLOW_LIB, CC, CFLAGS and
-- BENCH_BUILD set by the Makefile). Peers that are not installed are skipped
-- with a note; the bench itself never fails on a missing peer.
--
-- Timing: best of REPS repetitions of a batch, per call, with
-- clock_gettime(CLOCK_MONOTONIC); the best repetition is the one least
-- disturbed by other processes.
local ffi = require("ffi")
local tf = require("moonflow")

ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *ts);
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void peer_axpb(const float *x, float *y, int64_t n);
]]

local CLOCK_MONOTONIC = 1
local ts = ffi.new("bench_timespec")
local function now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- Seconds per call of fn: best of `reps` batches of `iters` calls.
local function best(fn, iters, reps)
  fn()  -- warm up: plans, buffers, JIT traces
  local t_best = math.huge
  for _ = 1, reps do
    local t0 = now()
    for _ = 1, iters do fn() end
    local t = (now() - t0) / iters
    if t < t_best then t_best = t end
  end
  return t_best
end

-- Seconds per call of fa and of fb, timed in alternating batches so that a
-- load change on the machine hits both sides alike.
local function best_pair(fa, fb, iters, reps)
  fa(); fb()
  local ta, tb = math.huge, math.huge
  for _ = 1, reps do
    ta = math.min(ta, best(fa, iters, 1))
    tb = math.min(tb, best(fb, iters, 1))
  end
  return ta, tb
end

local build = os.getenv("BENCH_BUILD") or "build"
local cc = os.getenv("CC") or "cc"
local cflags = os.getenv("CFLAGS") or "-O2"

-- Peers ------------------------------------------------------------------------
-- The C peers, compiled now with the library's compiler and flags.
local function load_c_peers()
  local so = build .. "/bench_peers.so"
  os.remove(so)
  -- LuaJIT's popen close does not report the exit status: the echo does.
  local p = io.popen(string.format("%s %s -shared -fPIC -o %s bench/peers.c 2>&1 && echo BENCH_CC_OK",
                                   cc, cflags, so))
  local out = p:read("*a")
  p:close()
  if not out:find("BENCH_CC_OK") then return nil, "cannot compile bench/peers.c: " .. out:gsub("\n", " ") end
  local loaded, lib = pcall(ffi.load, so:find("/") == 1 and so or "./" .. so)
  if not loaded then return nil, tostring(lib) end
  return lib
end

local function load_blas()
  for _, name in ipairs({"openblas", "libopenblas.so.0"}) do
    local ok, lib = pcall(ffi.load, name)
    if ok then return lib end
  end
  return nil, "libopenblas not found"
end

-- Runs a Python peer script; returns a table of "key value" lines it printed,
-- or nil and why. Debian's python3 first: a pyenv shim may lack the packages.
local function python_peer(script)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local why = "python3 not found"
  for _, py in ipairs({"/usr/bin/python3", "python3"}) do
    local p = io.popen(py .. " " .. path .. " 2>&1")
    local out = p:read("*a")
    p:close()
    local results = {}
    for k, v in out:gmatch("(%S+) ([%d%.eE+-]+)\n") do results[k] = tonumber(v) end
    if next(results) then os.remove(path); return results end
    local err = out:match("(%w*Error[^\n]*)") or out:match("([^\n]+)")
    if err then why = err end
  end
  os.remove(path)
  return nil, why
end

local PY_TIMER = [[
import time
def best(fn, iters, reps):
    fn()
    b = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        b = min(b, (time.perf_counter() - t0) / iters)
    return b
]]

local TORCH_SCRIPT = PY_TIMER .. [[
import torch
torch.set_num_threads(1)
x = torch.tensor(3.0)
print("torch_add", best(lambda: x + 1, 20000, 7))
]]

local NUMPY_SCRIPT = PY_TIMER .. [[
import numpy as np
x = np.random.rand(10_000_000).astype(np.float32)
y = np.empty_like(x)
def inplace():
    np.multiply(x, 2, out=y)
    np.add(y, 1, out=y)
print("numpy_expr", best(lambda: x * 2 + 1, 5, 5))
print("numpy_inplace", best(inplace, 5, 5))
]]

-- Rows -------------------------------------------------------------------------
local rows = {}
local function row(name, ours, unit, peer, peer_value, ratio, note)
  rows[#rows + 1] = {name, ours, unit, peer or "", peer_value or "", ratio or "", note or ""}
end
local function us(t) return string.format("%.2f", t * 1e6) end
local function fmt_ratio(r) return string.format(r < 0.1 and "%.3fx" or "%.2fx", r) end

-- Runs a benchmark body; a moonflow op missing or failing becomes a row saying so.
local function section(name, fn)
  local ok, err = pcall(fn)
  if not ok then row(name, "n/a", "", "", "", "", "failed: " .. tostring(err):gsub("\n.*", "")) end
end

local torch, torch_why = python_peer(TORCH_SCRIPT)

-- 1, 2: per-run overhead of a one-op graph with a scalar feed.
local run_t, call_t
section("sess:run y = x + 1 (scalar feed)", function()
  tf.reset_default_graph()
  local x = tf.placeholder(tf.float32, {})
  local y = x + 1
  local sess = tf.Session()
  assert(sess:run(y, {[x] = 2}) == 3, "y = x + 1 gave a wrong value")
  local feeds = {[x] = 2}
  run_t = best(function() sess:run(y, feeds) end, 20000, 7)
  local f = sess:make_callable(y, {x})
  assert(f(2) == 3, "callable gave a wrong value")
  call_t = best(function() f(2) end, 50000, 7)
end)
local TF1_RUN_US = 90
if run_t then
  row("sess:run y = x + 1 (scalar feed)", us(run_t), "us/call", "TF 1.x session.run (published)",
      "~" .. TF1_RUN_US, fmt_ratio(run_t * 1e6 / TF1_RUN_US), "TF not installed: not measured here")
  if torch then
    row("", "", "", "PyTorch eager x + 1", us(torch.torch_add), fmt_ratio(run_t / torch.torch_add))
  else
    row("", "", "", "PyTorch eager x + 1", "skipped", "", torch_why)
  end
end
if call_t then
  row("make_callable y = x + 1", us(call_t), "us/call", torch and "PyTorch eager x + 1" or "",
      torch and us(torch.torch_add) or "", torch and fmt_ratio(call_t / torch.torch_add) or "")
end

-- 3: matmul 1024x1024 float32 against cblas_sgemm on the same data.
section("matmul 1024x1024 float32", function()
  local N = 1024
  local flops = 2 * N * N * N
  tf.reset_default_graph()
  local a = tf.Array.new(tf.float32, {N, N})
  local b = tf.Array.new(tf.float32, {N, N})
  for i = 0, N * N - 1 do a._data[i] = (i % 7) * 0.25; b._data[i] = (i % 5) * 0.5 end
  local pa, pb = tf.placeholder(tf.float32, {N, N}), tf.placeholder(tf.float32, {N, N})
  local c = tf.matmul(pa, pb)
  local f = tf.Session():make_callable(c, {pa, pb})
  local blas, why = load_blas()
  if not blas then
    local ours = best(function() f(a, b) end, 10, 7)
    row("matmul 1024x1024 float32", string.format("%.1f", flops / ours * 1e-9), "GFLOP/s", "cblas_sgemm",
        "skipped", "", why)
    return
  end
  -- The peer's buffers are C memory too, so the Lua heap stays as small as ours.
  local out_array = tf.Array.new(tf.float32, {N, N})
  local out = out_array._data
  local CblasRowMajor, CblasNoTrans = 101, 111
  local ours, peer = best_pair(function() f(a, b) end, function()
    blas.cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1, a._data, N, b._data, N, 0, out, N)
  end, 10, 7)
  local ours_gf = flops / ours * 1e-9
  local got = f(a, b)
  local k = 12345
  assert(math.abs(got._data[k] - out[k]) <= 1e-3 * math.abs(out[k]), "matmul disagrees with sgemm")
  assert(out_array:size() == N * N)  -- keeps `out` alive until here
  row("matmul 1024x1024 float32", string.format("%.1f", ours_gf), "GFLOP/s", "cblas_sgemm (same BLAS, direct)",
      string.format("%.1f", flops / peer * 1e-9), fmt_ratio(ours / peer), "time ratio; 1.00x = no overhead")
end)

-- 4: y = x * 2 + 1 over 10M float32.
section("y = x * 2 + 1, 10M float32", function()
  local N = 10000000
  tf.reset_default_graph()
  local xa = tf.Array.new(tf.float32, {N})
  for i = 0, N - 1 do xa._data[i] = i % 1000 end
  local x = tf.placeholder(tf.float32, {N})
  local y = x * 2 + 1
  local sess = tf.Session()
  local f = sess:make_callable(y, {x})
  assert(f(xa)._data[999] == 1999, "y = x * 2 + 1 gave a wrong value")
  local allocs0, runs = sess:num_allocations(), 0
  local function ours_fn() runs = runs + 1; f(xa) end
  local peers, why = load_c_peers()
  local ours, t
  if peers then
    local out_array = tf.Array.new(tf.float32, {N})
    local out = out_array._data
    ours, t = best_pair(ours_fn, function() peers.peer_axpb(xa._data, out, N) end, 5, 7)
    assert(out[999] == 1999 and out_array:size() == N)  -- keeps `out` alive until here
  else
    ours = best(ours_fn, 5, 7)
  end
  row("y = x * 2 + 1, 10M float32", string.format("%.2f", ours * 1e3), "ms", "", "", "",
      string.format("%.1f GB/s (8 bytes/element); %d buffers allocated in %d runs", N * 8 / ours * 1e-9,
                    sess:num_allocations() - allocs0, runs))
  if peers then
    row("", "", "", "C loop (" .. cc .. " " .. cflags .. ")", string.format("%.2f", t * 1e3), fmt_ratio(ours / t))
  else
    row("", "", "", "C loop", "skipped", "", why)
  end
  local np, np_why = python_peer(NUMPY_SCRIPT)
  if np then
    row("", "", "", "NumPy x * 2 + 1", string.format("%.2f", np.numpy_expr * 1e3), fmt_ratio(ours / np.numpy_expr))
    row("", "", "", "NumPy in place (out=)", string.format("%.2f", np.numpy_inplace * 1e3),
        fmt_ratio(ours / np.numpy_inplace))
  else
    row("", "", "", "NumPy", "skipped", "", np_why)
  end
end)

-- 5: the loop of how-not-to-program-the-tensorflow-graph.txt done right: a
-- prebuilt increment_x = tf.assign(x, x + 1) run a million times.
section("1M sess:run(tf.assign(x, x + 1)), built once", function()
  local N = 1000000
  tf.reset_default_graph()
  local x = tf.Variable(0, {name = "x"})
  local increment_x = tf.assign(x, x + 1)
  local sess = tf.Session()
  sess:run(x.initializer)
  local t = best(function() for _ = 1, N do sess:run(increment_x) end end, 1, 3)
  assert(sess:run(x) == 4 * N, "the increments went astray")
  row("1M sess:run(tf.assign(x, x + 1)), built once", string.format("%.2f", t), "s",
      "TF 1.x session.run (published)", "~" .. string.format("%.0f", TF1_RUN_US * N * 1e-6),
      fmt_ratio(t / (TF1_RUN_US * N * 1e-6)),
      string.format("%.2f us/run; no op created; %d buffers allocated, all in the first run", t / N * 1e6,
                    sess:num_allocations()))
end)

-- 6: the text's bad loop, x = x + 1 a million times without running anything:
-- the cost of building ops, in time and memory (the process's resident size,
-- which holds the C graph and the Lua objects, and the Lua heap alone).
local function rss_bytes()
  local f = io.open("/proc/self/statm", "r")
  if not f then return nil end
  local pages = f:read("*n")
  pages = f:read("*n")
  f:close()
  return pages * 4096
end
section("creating 1M ops (x = x + 1)", function()
  local OPS = 1000000
  tf.reset_default_graph()
  collectgarbage()
  collectgarbage()
  local rss0, heap0 = rss_bytes(), collectgarbage("count") * 1024
  local x = tf.Variable(1.0, {name = "x"})
  local g = tf.get_default_graph()
  local n0 = g:num_ops()
  local t0 = now()
  while g:num_ops() - n0 < OPS do x = x + 1 end  -- a Const and an Add per step
  local t = (now() - t0) / (g:num_ops() - n0)
  collectgarbage()
  local rss1, heap1 = rss_bytes(), collectgarbage("count") * 1024
  local ops = g:num_ops() - n0
  local note = "Lua heap " .. string.format("%.0f", (heap1 - heap0) / ops) .. " bytes/op"
  row("creating 1M ops (x = x + 1)", string.format("%.2f", t * 1e6), "us/op", "", "", "",
      rss0 and string.format("%.0f bytes/op resident (%s)", (rss1 - rss0) / ops, note) or note)
  tf.reset_default_graph()
  collectgarbage()
end)

-- 7: tf.while_loop's executor: the cost of one iteration of a scalar loop whose
-- body is two ops (i + 1, x + 1; the condition i < n is a third). The peers'
-- figures are the issue's references, measured on this machine for the same
-- loop: PyTorch eager 2 us, TorchScript 3 us, a TensorFlow tf.function
-- while loop about 20 us per iteration.
local LOOP_PEERS_US = {{"PyTorch eager (reference)", 2}, {"TorchScript (reference)", 3},
                       {"TF tf.function loop (reference)", 20}}
section("while_loop, scalar body of two ops", function()
  local N = 1000000
  tf.reset_default_graph()
  local n = tf.placeholder(tf.int32, {})
  local _, x = tf.while_loop(function(i) return tf.less(i, n) end, function(i, v) return i + 1, v + 1 end,
                             {tf.constant(0, tf.int32), tf.constant(0.0)})
  local sess = tf.Session()
  local run = sess:make_callable(x, {n})
  assert(run(1000) == 1000, "the loop went astray")
  local t = best(function() run(N) end, 1, 3) / N
  for i, peer in ipairs(LOOP_PEERS_US) do
    row(i == 1 and "while_loop, scalar body of two ops" or "", i == 1 and us(t) or "", i == 1 and "us/iteration" or "",
        peer[1], string.format("%.0f", peer[2]), fmt_ratio(t / (peer[2] * 1e-6)),
        i == 1 and string.format("%.0f ns/iteration; 1M iterations per run", t * 1e9) or "")
  end
end)

-- 8: what a while loop's gradient keeps from the forward pass: an RNN-like
-- loop h = tanh(h W), 100 steps of a 32x64 float32 state. The stash (the
-- While op's last output reports its bytes) holds one checkpoint of the loop
-- variable per iteration; the intermediates the gradient reads (tanh's
-- output here) are recomputed from it. Keeping them instead, as TensorFlow's
-- stacks do, would double this.
section("while_loop gradient: memory held", function()
  local T, B, H = 100, 32, 64
  tf.reset_default_graph()
  local h0 = tf.placeholder(tf.float32, {B, H})
  local w = tf.random_normal({H, H}, {stddev = 0.1, seed = 1})
  local _, h = tf.while_loop(function(i) return tf.less(i, T) end,
                             function(i, hh) return i + 1, tf.tanh(tf.matmul(hh, w)) end,
                             {tf.constant(0, tf.int32), h0})
  local gw = tf.gradients(tf.reduce_sum(h), {w})[1]
  local sess = tf.Session()
  local feed = {[h0] = tf.Array.new(tf.float32, {B, H})}
  local kept = sess:run({gw, h.op:output(2)}, feed)[2]
  local t = best(function() sess:run(gw, feed) end, 1, 5)
  row("while_loop gradient: memory held", string.format("%.1f", kept / T / 1024), "KiB/iteration", "", "", "",
      string.format("%d steps of h [%dx%d] float32: %.0f KiB kept in all (one state per step); " ..
                    "forward + backward %.2f ms", T, B, H, kept / 1024, t * 1e3))
end)

-- 9, 10: training steps of MLPs, each against PyTorch doing the same step
-- (forward, cross-entropy, backward, update) on the same sizes in the same
-- run. Both use their default threads (OpenBLAS's and PyTorch's), except
-- PyTorch on the digits MLP, which runs fastest on one thread.
local TRAIN_SCRIPT = PY_TIMER .. [[
import torch
torch.manual_seed(0)
def mlp_step(sizes, adam, lr, batch, iters, reps):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = (torch.optim.Adam if adam else torch.optim.SGD)(model.parameters(), lr)
    x = torch.rand(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return best(step, iters, reps)
threads = torch.get_num_threads()
torch.set_num_threads(1)  # its fastest setting for tiny ops; more threads only add sync
print("digits_mlp", mlp_step([64, 128, 10], True, 0.01, 32, 1000, 7))
torch.set_num_threads(threads)
print("mnist_mlp", mlp_step([784, 512, 512, 10], False, 0.1, 128, 50, 7))
]]
local train_peer, train_why = python_peer(TRAIN_SCRIPT)

-- Seconds per training step of an MLP with layer sizes `sizes`.
local function mlp_step_time(sizes, optimizer, batch, iters)
  tf.reset_default_graph()
  tf.set_random_seed(1)
  local x = tf.placeholder(tf.float32, {batch, sizes[1]})
  local y = tf.placeholder(tf.int32, {batch})
  local h = x
  for i = 2, #sizes do
    h = i < #sizes and tf.layers.dense(h, sizes[i], {activation = tf.nn.relu}) or tf.layers.dense(h, sizes[i])
  end
  local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = y, logits = h}))
  local train_op = optimizer:minimize(loss)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  local xs, ys = tf.Array.new(tf.float32, {batch, sizes[1]}), tf.Array.new(tf.int32, {batch})
  for i = 0, batch * sizes[1] - 1 do xs._data[i] = (i * 7919 % 1000) / 1000 end
  for i = 0, batch - 1 do ys._data[i] = i % sizes[#sizes] end
  local step = sess:make_callable(train_op, {x, y})
  local first = sess:run(loss, {[x] = xs, [y] = ys})
  local t = best(function() step(xs, ys) end, iters, 7)
  assert(sess:run(loss, {[x] = xs, [y] = ys}) < first, "training did not lower the loss")
  return t
end

local function training_row(name, ours, peer_key, note)
  local peer = train_peer and train_peer[peer_key]
  row(name, string.format("%.0f", 1 / ours), "steps/s", "PyTorch " .. (peer and "" or "(skipped)"),
      peer and string.format("%.0f", 1 / peer) or "", peer and fmt_ratio(ours / peer) or "",
      peer and note or train_why)
end

section("digits MLP 64-128-10, Adam, batch 32", function()
  local t = mlp_step_time({64, 128, 10}, tf.train.AdamOptimizer(0.01), 32, 1000)
  training_row("digits MLP 64-128-10, Adam, batch 32", t, "digits_mlp",
               string.format("%.1f us/step", t * 1e6))
end)

section("MLP 784-512-512-10, SGD, batch 128", function()
  local t = mlp_step_time({784, 512, 512, 10}, tf.train.GradientDescentOptimizer(0.1), 128, 50)
  training_row("MLP 784-512-512-10, SGD, batch 128", t, "mnist_mlp", string.format("%.2f ms/step", t * 1e3))
end)

-- 11: peak resident memory of the digits training (examples/digits.lua, the
-- MLP), each framework in a process of its own.
local DIGITS_DATA = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
local DIGITS_TORCH = [[
import gzip, resource, numpy as np, torch
torch.manual_seed(1)
d = np.loadtxt(gzip.open("]] .. DIGITS_DATA .. [["), delimiter=",", dtype=np.float32)
x = torch.from_numpy(d[:, :64] / 16)
y = torch.from_numpy(d[:, 64].astype(np.int64))
n_train = len(d) - round(len(d) * 0.2)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), 0.01)
loss_fn = torch.nn.CrossEntropyLoss()
for epoch in range(20):
    order = torch.randperm(n_train)
    for s in range(n_train // 32):
        idx = order[s * 32:(s + 1) * 32]
        opt.zero_grad()
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
print("peak_mib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
]]
section("digits training: peak resident memory", function()
  local probe = io.open(DIGITS_DATA)
  if not probe then
    row("digits training: peak resident memory", "skipped", "", "", "", "", "no " .. DIGITS_DATA ..
        " (apt-get install python3-sklearn)")
    return
  end
  probe:close()
  local p = io.popen("luajit examples/digits.lua mlp --quiet --out " .. os.tmpname():match("^(.*)/") .. " 2>&1")
  local out = p:read("*a")
  p:close()
  local ours = tonumber(out:match("peak resident memory ([%d.]+) MiB"))
  assert(ours, "examples/digits.lua printed no peak memory: " .. out)
  local peer, why = python_peer(DIGITS_TORCH)
  row("digits training: peak resident memory", string.format("%.0f", ours), "MiB",
      "PyTorch " .. (peer and "" or "(skipped)"), peer and string.format("%.0f", peer.peak_mib) or "",
      peer and string.format("%.2fx", ours / peer.peak_mib) or "",
      peer and "memory ratio; 20 epochs of the MLP, batch 32, each in its own process" or why)
end)

-- 12: an input pipeline whose map is expensive (a 256x256 float32 matmul and
-- tanh per element) feeding a training-like step (a 256x256 matmul against a
-- variable and a gradient-descent update), with and without prefetch(2),
-- timed in alternating batches: with it the map runs on its session's worker
-- thread while the step runs here, when prefetch measures that to be faster.
-- Both threads call OpenBLAS, whose own threads they then share, so the
-- pipeline is also measured with OpenBLAS on one thread per call.
local function pipeline_step(prefetch)
  return tf.Graph():as_default(function()
    tf.set_random_seed(1)
    local n = 256
    local src = tf.Array.new(tf.float32, {16, n, n})
    for i = 0, 16 * n * n - 1 do src._data[i] = ((i * 7919) % 1000) / 1000 - 0.5 end
    local ds = tf.data.Dataset.from_tensor_slices(src)
      :map(function(x) return tf.tanh(x:matmul(x) * (1 / n)) end):repeat_()
    if prefetch then ds = ds:prefetch(2) end
    local x = ds:make_one_shot_iterator():get_next()
    local w = tf.Variable(tf.random_normal({n, n}, {stddev = 0.05}))
    local loss = tf.reduce_mean(tf.square(x:matmul(w)))
    local train = tf.train.GradientDescentOptimizer(0.01):minimize(loss)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    return sess:make_callable(train)
  end)
end
-- Steps per second without and with prefetch, timed in alternating batches.
local function pipeline_steps_per_s()
  local ta, ts = best_pair(pipeline_step(true), pipeline_step(false), 50, 7)
  return 1 / ts, 1 / ta
end

section("input pipeline: 256x256 matmul map -> step", function()
  local name = "input pipeline: 256x256 matmul map -> step"
  local sync, ahead = pipeline_steps_per_s()
  row(name, string.format("%.0f", ahead), "steps/s", "no prefetch", string.format("%.0f", sync),
      fmt_ratio(sync / ahead),
      "prefetch(2): the map runs on a worker thread during the step when that is faster (time ratio)")
  local blas = load_blas()
  if not blas then return end
  ffi.cdef[[
    void openblas_set_num_threads(int n);
    int openblas_get_num_threads(void);
  ]]
  local threads = blas.openblas_get_num_threads()
  blas.openblas_set_num_threads(1)
  local ok, s1, a1 = pcall(pipeline_steps_per_s)
  blas.openblas_set_num_threads(threads)
  assert(ok, s1)
  row(name .. " (OpenBLAS 1 thread)", string.format("%.0f", a1), "steps/s", "no prefetch",
      string.format("%.0f", s1), fmt_ratio(s1 / a1),
      string.format("default: %d OpenBLAS threads, shared by both threads", threads))
end)

-- Elementwise fusion: chains over 10M float32 with fusion on (one pass over
-- the data) against the same session config with it off (a pass per op),
-- timed in alternating batches, results into a caller's buffer.
section("elementwise fusion, 10M float32", function()
  local N = 10000000
  tf.reset_default_graph()
  local xa = tf.Array.new(tf.float32, {N})
  for i = 0, N - 1 do xa._data[i] = (i % 1000) * 0.001 end
  local out = tf.Array.new(tf.float32, {N})
  local x = tf.placeholder(tf.float32, {N})
  local chains = {{"y = x * 2 + 1", x * 2 + 1}, {"y = tanh(x * a + b) * c", tf.tanh(x * 0.5 + 0.25) * 3}}
  local fused, plain = tf.Session(), tf.Session({elementwise_fusion = false})
  for _, chain in ipairs(chains) do
    local name, y = chain[1], chain[2]
    local f, g = fused:make_callable(y, {x}), plain:make_callable(y, {x})
    local tf_, tp = best_pair(function() f(xa, {out = out}) end, function() g(xa, {out = out}) end, 3, 7)
    local stats = fused:plan_stats(y, {x})
    row(name .. ", fused", string.format("%.2f", tf_ * 1e3), "ms", "unfused (one step per op)",
        string.format("%.2f", tp * 1e3), fmt_ratio(tf_ / tp),
        string.format("%d step(s) fused, %d unfused", stats.num_steps, plain:plan_stats(y, {x}).num_steps))
  end
end)

-- 13: tf.data throughput, each pipeline repeating and consumed by a run that
-- fetches its batch's size. map: x * 2 + 1 over rows of 8 float32, batched by
-- 1024, fused (an elementwise function runs once per batch) against the same
-- function run per element (a Reshape of its result keeps it per element);
-- batch: rows of 64 float32 and an int32 label, batched by 128, against the
-- same rows shuffled first (then the rows are gathered one by one).
local function batch_sizes(ds)
  local nxt = ds:make_one_shot_iterator():get_next()
  local sess = tf.Session()
  return sess:make_callable(tf.size(tf.is_tensor(nxt) and nxt or nxt[1]))
end
section("tf.data map", function()
  tf.reset_default_graph()
  local n, rows_per_batch = 65536, 1024
  local x = tf.Array.new(tf.float32, {n, 8})
  for i = 0, n * 8 - 1 do x._data[i] = (i % 1000) / 100 end
  local function f(v) return v * 2 + 1 end
  local fused = batch_sizes(tf.data.Dataset.from_tensor_slices(x):map(f):batch(rows_per_batch):repeat_())
  local plain = batch_sizes(tf.data.Dataset.from_tensor_slices(x):map(function(v)
    local y = f(v)
    return tf.reshape(y, tf.shape(y))
  end):batch(rows_per_batch):repeat_())
  local tf_, tp = best_pair(fused, plain, 4, 7)
  row("tf.data map(x*2+1):batch(1024), rows of 8 float32", string.format("%.2f", rows_per_batch / tf_ / 1e6),
      "M rows/s", "map per element", string.format("%.3f", rows_per_batch / tp / 1e6), fmt_ratio(tf_ / tp),
      "map-and-batch fusion: one run per batch (time ratio)")
end)
section("tf.data batch", function()
  tf.reset_default_graph()
  local n, rows_per_batch = 65536, 128
  local x, y = tf.Array.new(tf.float32, {n, 64}), tf.Array.new(tf.int32, {n})
  for i = 0, n * 64 - 1 do x._data[i] = i % 17 end
  for i = 0, n - 1 do y._data[i] = i % 10 end
  local slices = tf.data.Dataset.from_tensor_slices({x, y})
  local plain = batch_sizes(slices:batch(rows_per_batch):repeat_())
  local shuffled = batch_sizes(slices:shuffle(10000, {seed = 1}):batch(rows_per_batch):repeat_())
  local tb, ts = best_pair(plain, shuffled, 50, 7)
  row("tf.data batch(128), rows of 64 float32 + int32", string.format("%.2f", rows_per_batch / tb / 1e6),
      "M rows/s", "shuffle(10000) first", string.format("%.2f", rows_per_batch / ts / 1e6), fmt_ratio(tb / ts),
      "consecutive rows are copied as one block; shuffled ones gathered by shuffled row index")
end)

-- 14: the digits MLP (64-128-10, Adam, batch 32) trained from a tf.data
-- pipeline (shuffle, a map scaling the pixels, batch, repeat) with and
-- without prefetch(2), timed in alternating batches of steps.
section("digits training from tf.data", function()
  local name = "digits MLP from tf.data (shuffle, map, batch 32)"
  local pipe = io.popen("gzip -dc " .. DIGITS_DATA .. " 2>/dev/null")
  local lines = {}
  for line in pipe:lines() do if line:find("%d") then lines[#lines + 1] = line end end
  pipe:close()
  if #lines == 0 then
    row(name, "skipped", "", "", "", "", "no " .. DIGITS_DATA .. " (apt-get install python3-sklearn)")
    return
  end
  local n = #lines
  local images, labels = tf.Array.new(tf.float32, {n, 64}), tf.Array.new(tf.int32, {n})
  for r, line in ipairs(lines) do
    local c = 0
    for field in line:gmatch("[^,]+") do
      if c < 64 then images._data[(r - 1) * 64 + c] = tonumber(field) else labels._data[r - 1] = tonumber(field) end
      c = c + 1
    end
  end
  local function training_step(prefetch)
    return tf.Graph():as_default(function()
      tf.set_random_seed(1)
      local ds = tf.data.Dataset.from_tensor_slices({images, labels}):shuffle(n, {seed = 1})
        :map(function(x, y) return x / 16, y end):batch(32):repeat_()
      if prefetch then ds = ds:prefetch(2) end
      local x, y = unpack(ds:make_one_shot_iterator():get_next())
      local h = tf.layers.dense(x, 128, {activation = tf.nn.relu})
      local logits = tf.layers.dense(h, 10)
      local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = y, logits = logits}))
      local train = tf.train.AdamOptimizer(0.01):minimize(loss)
      local sess = tf.Session()
      sess:run(tf.global_variables_initializer())
      return sess:make_callable({loss, train})
    end)
  end
  local ahead, plain = training_step(true), training_step(false)
  local ta, tp = best_pair(ahead, plain, 100, 9)
  row(name, string.format("%.0f", 1 / ta), "steps/s", "no prefetch", string.format("%.0f", 1 / tp), fmt_ratio(ta / tp),
      "prefetch(2) (time ratio); its map stays on this thread while it is too cheap to hand off")
end)

-- Graph building (issue 16), a self-contained section: creating ops from
-- Lua (y = y + 1: a Const and an Add per step) at 10k, 100k and 1M ops, the
-- same through the C API (FFI calls from LuaJIT, no Lua objects), gradient
-- construction on a 100-layer MLP (tf.gradients and minimize) and importing
-- a graph file of 100k ops; each against TensorFlow 1.x graph mode
-- (tensorflow.compat.v1) building the same graph in this run when it can be
-- imported. Times are medians of GRAPH_REPS runs; bytes per op are the growth
-- of the resident size over the first run of each size (sizes go up, so
-- memory freed by a smaller graph is not counted for a larger one).
local GRAPH_REPS = 7
local GRAPH_SIZES = {10000, 100000, 1000000}
local MLP_DEPTH, MLP_WIDTH, IMPORT_OPS = 100, 32, 100000

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

local TF_GRAPH_SCRIPT = [[
import time, statistics, tempfile, os
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
REPS, SIZES, DEPTH, WIDTH, IMPORT_OPS = %d, %s, %d, %d, %d
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def chain(n):
    # Counted here: get_operations() copies the graph's list at every call.
    y, ops = tf.constant(0.0), 1
    while ops < n:
        y, ops = y + 1, ops + 2
    return y
for n in SIZES:
    reps = REPS if n <= 100000 else 1
    times = []
    for r in range(reps):
        with tf.Graph().as_default() as g:
            r0 = rss()
            t0 = time.perf_counter()
            chain(n)
            times.append((time.perf_counter() - t0) / len(g.get_operations()))
            if r == 0:
                print("tf_bytes_%%d %%.1f" %% (n, (rss() - r0) / len(g.get_operations())))
    print("tf_us_%%d %%.3f" %% (n, statistics.median(times) * 1e6))
    print("tf_reps_%%d %%d" %% (n, reps))
def mlp():
    x = tf.placeholder(tf.float32, [None, WIDTH])
    h = x
    for i in range(DEPTH):
        w = tf.Variable(tf.zeros([WIDTH, WIDTH]))
        b = tf.Variable(tf.zeros([WIDTH]))
        h = tf.nn.relu(tf.matmul(h, w) + b)
    return tf.reduce_mean(tf.square(h))
grads, mins = [], []
for r in range(REPS):
    with tf.Graph().as_default():
        loss = mlp()
        t0 = time.perf_counter()
        tf.gradients(loss, tf.trainable_variables())
        grads.append(time.perf_counter() - t0)
    with tf.Graph().as_default():
        loss = mlp()
        t0 = time.perf_counter()
        tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        mins.append(time.perf_counter() - t0)
print("tf_grad_ms %%.3f" %% (statistics.median(grads) * 1e3))
print("tf_minimize_ms %%.3f" %% (statistics.median(mins) * 1e3))
with tf.Graph().as_default() as g:
    x = tf.placeholder(tf.float32, [], name="x")
    c = tf.constant(1.0)
    y, ops = x, 2
    while ops < IMPORT_OPS:
        y, ops = y + c, ops + 1
    gd = g.as_graph_def()
path = os.path.join(tempfile.mkdtemp(), "g.pb")
with open(path, "wb") as f:
    f.write(gd.SerializeToString())
times = []
for r in range(REPS):
    with tf.Graph().as_default():
        t0 = time.perf_counter()
        d = tf.GraphDef()
        with open(path, "rb") as f:
            d.ParseFromString(f.read())
        tf.import_graph_def(d, name="")
        times.append(time.perf_counter() - t0)
os.remove(path)
print("tf_import_s %%.4f" %% statistics.median(times))
]]

section("graph building", function()
  local sizes = {}
  for i, n in ipairs(GRAPH_SIZES) do sizes[i] = tostring(n) end
  local peer, peer_why = python_peer(string.format(TF_GRAPH_SCRIPT, GRAPH_REPS, "[" .. table.concat(sizes, ", ") .. "]",
                                                   MLP_DEPTH, MLP_WIDTH, IMPORT_OPS))
  local skipped = "skipped: " .. tostring(peer_why)
  local function vs(key, ours, fmt)
    if not peer or not peer[key] then return skipped, "", "" end
    return "TensorFlow 1.x graph mode", string.format(fmt, peer[key]), fmt_ratio(ours / peer[key])
  end

  -- Ops from Lua: y = y + 1 until the graph holds n ops.
  for _, n in ipairs(GRAPH_SIZES) do
    local times, bytes = {}, nil
    for r = 1, GRAPH_REPS do
      tf.reset_default_graph()
      collectgarbage()
      collectgarbage()
      local g = tf.get_default_graph()
      local rss0 = rss_bytes()
      local t0 = now()
      local y = tf.constant(0)
      while g:num_ops() < n do y = y + 1 end
      times[r] = (now() - t0) / g:num_ops()
      if r == 1 then
        collectgarbage()
        bytes = (rss_bytes() - rss0) / g:num_ops()
      end
    end
    local t = median(times)
    local name = string.format("creating %dk ops from Lua (y = y + 1)", n / 1000)
    local peer_name, peer_value, ratio = vs("tf_us_" .. n, t * 1e6, "%.2f")
    row(name, us(t), "us/op", peer_name, peer_value, ratio,
        string.format("%.0f bytes/op resident%s", bytes,
                      peer and peer["tf_bytes_" .. n] and string.format(" (TensorFlow: %.0f; its time from %d run%s)",
                        peer["tf_bytes_" .. n], peer["tf_reps_" .. n], peer["tf_reps_" .. n] == 1 and "" or "s") or ""))
  end
  tf.reset_default_graph()
  collectgarbage()

  -- Ops through the C API, called from LuaJIT's FFI: the engine's own cost.
  local C = require("moonflow.core").C
  local status = require("moonflow.core").status
  local times = {}
  local N = 100000
  for r = 1, GRAPH_REPS do
    local g = ffi.gc(C.mf_graph_new(), C.mf_graph_release)
    local t0 = now()
    local y
    for i = 1, N / 2 do
      local d = C.mf_op_desc_new(g, "Const", nil)
      C.mf_op_desc_set_attr_scalar(d, "value", C.MF_FLOAT32, 1)
      C.mf_op_desc_set_origin(d, "bench/run.lua:1")
      local c = C.mf_op_id(C.mf_op_desc_finish(d, status))
      if y then
        d = C.mf_op_desc_new(g, "Add", nil)
        C.mf_op_desc_add_input_id(d, y, 0)
        C.mf_op_desc_add_input_id(d, c, 0)
        C.mf_op_desc_set_origin(d, "bench/run.lua:1")
        c = C.mf_op_id(C.mf_op_desc_finish(d, status))
      end
      y = c
    end
    times[r] = (now() - t0) / C.mf_graph_num_ops(g)
    g = nil
    collectgarbage()
  end
  row("creating 100k ops through the C API", us(median(times)), "us/op", "", "", "",
      "FFI calls from LuaJIT: a Const and an Add per step, no Lua objects")

  -- Gradients of a 100-layer MLP: tf.gradients, and minimize (gradients and updates).
  local function mlp()
    tf.reset_default_graph()
    local h = tf.placeholder(tf.float32, {-1, MLP_WIDTH})
    for _ = 1, MLP_DEPTH do
      local w = tf.Variable(tf.zeros({MLP_WIDTH, MLP_WIDTH}))
      local b = tf.Variable(tf.zeros({MLP_WIDTH}))
      h = tf.nn.relu(tf.matmul(h, w) + b)
    end
    return tf.reduce_mean(tf.square(h))
  end
  local grads, mins = {}, {}
  for r = 1, GRAPH_REPS do
    local loss = mlp()
    local t0 = now()
    tf.gradients(loss, tf.trainable_variables())
    grads[r] = now() - t0
    loss = mlp()
    t0 = now()
    tf.train.GradientDescentOptimizer(0.1):minimize(loss)
    mins[r] = now() - t0
  end
  local t = median(grads)
  row(string.format("tf.gradients of a %d-layer MLP", MLP_DEPTH), string.format("%.2f", t * 1e3), "ms",
      vs("tf_grad_ms", t * 1e3, "%.2f"))
  t = median(mins)
  row(string.format("minimize of a %d-layer MLP (SGD)", MLP_DEPTH), string.format("%.2f", t * 1e3), "ms",
      vs("tf_minimize_ms", t * 1e3, "%.2f"))

  -- Importing a graph file of 100k ops (x + c, chained).
  tf.reset_default_graph()
  local g = tf.get_default_graph()
  local y, c = tf.placeholder(tf.float32, {}, "x"), tf.constant(1)
  while g:num_ops() < IMPORT_OPS do y = y + c end
  local path = os.tmpname()
  tf.train.write_graph(g, path)
  local imports = {}
  for r = 1, GRAPH_REPS do
    collectgarbage()
    local t0 = now()
    tf.train.import_graph(path)
    imports[r] = now() - t0
  end
  os.remove(path)
  tf.reset_default_graph()
  collectgarbage()
  t = median(imports)
  local peer_name, peer_value, ratio = vs("tf_import_s", t, "%.3f")
  row("importing a graph file of 100k ops", string.format("%.3f", t), "s", peer_name, peer_value, ratio,
      "moonflow reads its JSON graph file, TensorFlow a binary GraphDef")
end)

-- Table ------------------------------------------------------------------------
local header = {"benchmark", "moonflow", "unit", "peer", "peer", "moonflow/peer", "note"}
local widths = {}
for i, h in ipairs(header) do widths[i] = #h end
for _, r in ipairs(rows) do
  for i, cell in ipairs(r) do widths[i] = math.max(widths[i], #tostring(cell)) end
end
local function line(cells)
  local parts = {}
  for i, cell in ipairs(cells) do
    local s = tostring(cell)
    parts[i] = (i == 2 or i == 5 or i == 6) and string.rep(" ", widths[i] - #s) .. s
               or s .. string.rep(" ", widths[i] - #s)
  end
  return (table.concat(parts, "  "):gsub("%s+$", ""))
end
print(string.format("moonflow benchmarks (%s, %s %s)", require("moonflow.core").library_path, cc, cflags))
print("ratios are time ratios: moonflow's time / the peer's time (lower is better)")
print(line(header))
local rule = {}
for i, w in ipairs(widths) do rule[i] = string.rep("-", w) end
print(line(rule))
for _, r in ipairs(rows) do print(line(r)) end
