-- bench/run.lua — moonflow's benchmarks, each measured interleaved with its
-- peers in the same run (bench/harness.lua), reported as a table on stdout
-- and as docs/bench.md and docs/bench.svg (bench/report.lua). `make bench`
-- runs it (LUA_PATH, MOONFLOW_LIB, CC, CFLAGS, BENCH_BUILD and BENCH_PYTHON
-- set by the Makefile); BENCH_QUICK=1 shortens every count for a smoke run
-- and BENCH_ONLY=<Lua patterns, comma-separated> runs only the sections whose
-- name one of them matches;
-- both write their report into the build folder instead of docs/. A peer that
-- cannot run is a row saying why; the bench itself never fails on one.
package.path = "bench/?.lua;" .. package.path
local ffi = require("ffi")
local tf = require("moonflow")
local H = require("harness")
local report = require("report")

local section, compare, lua_contender, py = H.section, H.compare, H.lua_contender, H.python_contender
local quick = H.quick
local build = os.getenv("BENCH_BUILD") or "build"
local cc = os.getenv("CC") or "cc"
local cflags = os.getenv("CFLAGS") or "-O2"
-- A smoke run or a run of some sections (BENCH_ONLY) reports into the build
-- folder; only a full run renews docs/ and README.md.
local out_dir = os.getenv("BENCH_OUT") or ((quick or H.only) and build or "docs")

local function us(t) return string.format("%.2f", t * 1e6) end
local function ms(t) return string.format("%.2f", t * 1e3) end
local function per_second(t) return string.format("%.0f", 1 / t) end
-- 1000000 -> "1M", 20000 -> "20k": the counts in row names.
local function count(n) return n >= 1e6 and string.format("%gM", n / 1e6) or string.format("%gk", n / 1e3) end

-- Runs a command and returns what it printed.
local function output_of(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  return out
end

local function first_line(cmd)
  return (output_of(cmd):match("([^\n]*)"))
end
local cores = tonumber(first_line("nproc")) or 1

-- The machine's load average when the run began: other work on its cores
-- slows every contender, and the report says how much there was.
local function load_average()
  local f = io.open("/proc/loadavg")
  if not f then return "unknown" end
  local one_minute = f:read("*n")
  f:close()
  return string.format("%.1f", one_minute)
end
local load_at_start = load_average()

local c_peers, c_peers_why = H.c_peers(cc, cflags, build)
local blas, blas_why = H.blas()
ffi.cdef[[
  void openblas_set_num_threads(int n);
  int openblas_get_num_threads(void);
]]
local function c_contender(label, fn, options)
  if not c_peers then return {label = label, why = c_peers_why} end
  return lua_contender(label, fn, options)
end

-- PyTorch at its best thread count on this machine for a workload: one
-- thread and one per core are each a contender, the faster stands for PyTorch.
local function torch_best(label, workload, args, options)
  local choices = {}
  for _, threads in ipairs(cores > 1 and {1, cores} or {1}) do
    local a = {}
    for i, v in ipairs(args) do a[i] = v end
    a[#a + 1] = threads
    choices[#choices + 1] = py("torch", threads .. " thread" .. (threads > 1 and "s" or ""), workload, a)
  end
  return H.best_of(label, choices, options)
end

-- A training step (forward, cross-entropy, backward, update) of an MLP with
-- layer sizes `sizes`, built under tf.device(device) (nil: TensorFlow's
-- default placement): returns the step function and a check that it learned.
local function mlp_step(sizes, optimizer, batch, device)
  tf.reset_default_graph()
  tf.set_random_seed(1)
  local x, y, loss, train_op
  tf.device(device, function()
    x = tf.placeholder(tf.float32, {batch, sizes[1]})
    y = tf.placeholder(tf.int32, {batch})
    local h = x
    for i = 2, #sizes do
      h = i < #sizes and tf.layers.dense(h, sizes[i], {activation = tf.nn.relu}) or tf.layers.dense(h, sizes[i])
    end
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = y, logits = h}))
    train_op = optimizer:minimize(loss)
  end)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  local xs, ys = tf.Array.new(tf.float32, {batch, sizes[1]}), tf.Array.new(tf.int32, {batch})
  for i = 0, batch * sizes[1] - 1 do xs._data[i] = (i * 7919 % 1000) / 1000 end
  for i = 0, batch - 1 do ys._data[i] = i % sizes[#sizes] end
  local step = sess:make_callable(train_op, {x, y})
  local first = sess:run(loss, {[x] = xs, [y] = ys})
  return function() step(xs, ys) end, function()
    assert(sess:run(loss, {[x] = xs, [y] = ys}) < first, "training did not lower the loss")
  end
end

-- Issue 17's soak: many runs and training steps with the resident size
-- sampled along the way; it should stay flat once the first runs have
-- warmed plans, buffer pools and the Lua heap up. Growth is counted from the
-- sample at a tenth of the way to the end. It runs first, while the process
-- is small: later sections leave gigabytes behind (the 1M ops).
local SAMPLES = 20
local function soak(name, count, fn)
  collectgarbage()  -- the garbage of building the graph is not the soak's
  collectgarbage()
  local rss, t0 = {}, H.now()
  local per_sample = count / SAMPLES
  for s = 1, SAMPLES do
    for _ = 1, per_sample do fn() end
    rss[s] = H.rss_bytes()
  end
  local seconds = H.now() - t0
  local base, max = rss[SAMPLES / 10], 0
  for _, v in ipairs(rss) do max = math.max(max, v) end
  local growth = rss[SAMPLES] - base
  local FLAT = 1024 * 1024
  H.row{name = name, value = string.format("%.0f", growth / 1024), unit = "KiB RSS growth",
        target = "flat (< 1 MiB)", met = growth < FLAT,
        note = string.format("RSS %.1f MiB after a tenth, %.1f MiB at the end (max %.1f; Lua heap %.1f MiB); " ..
                             "%d samples; %.2f us each", base / 2 ^ 20, rss[SAMPLES] / 2 ^ 20, max / 2 ^ 20,
                             collectgarbage("count") / 1024, SAMPLES, seconds / count * 1e6)}
end

section("soak", function()
  local RUNS, STEPS = quick and 20000 or 1000000, quick and 2000 or 100000
  tf.reset_default_graph()
  local x = tf.placeholder(tf.float32, {16})
  local y = tf.tanh(x * 2 + 1)
  local sess = tf.Session()
  local feeds = {[x] = tf.Array.new(tf.float32, {16})}
  soak("soak: " .. count(RUNS) .. " sess:run, 16-float feed and fetch", RUNS,
       function() sess:run(y, feeds) end)
  local step, check = mlp_step({64, 128, 10}, tf.train.AdamOptimizer(0.01), 32)
  soak("soak: " .. count(STEPS) .. " training steps, digits MLP", STEPS, step)
  check()
end)

-- Per-run overhead of a one-op graph with a scalar feed ----------------------
section("run overhead", function()
  tf.reset_default_graph()
  local x = tf.placeholder(tf.float32, {})
  local y = x + 1
  local sess = tf.Session()
  assert(sess:run(y, {[x] = 2}) == 3, "y = x + 1 gave a wrong value")
  local f = sess:make_callable(y, {x})
  assert(f(2) == 3, "callable gave a wrong value")
  compare{name = "make_callable call, 1-op graph y = x + 1", unit = "us/call", figure = us, goal = 0.2e-6,
          ours = lua_contender("moonflow", function() f(2) end),
          peers = {py("tensorflow", "TF1 Session.make_callable", "tf1_callable_scalar"),
                   py("torch", "PyTorch eager x + 1 (1 thread)", "torch_add_scalar")}}
  local feeds = {[x] = 2}
  compare{name = "sess:run y = x + 1 (scalar feed)", unit = "us/call", figure = us, goal = 0.5e-6,
          ours = lua_contender("moonflow", function() sess:run(y, feeds) end),
          peers = {py("tensorflow", "TF1 Session.run", "tf1_run_scalar"),
                   py("torch", "PyTorch eager x + 1 (1 thread)", "torch_add_scalar")}}
end)

-- Per-frame latency of a small policy net (issue 15): one observation of 8
-- numbers in, 4 out, through two hidden layers of 64, as a game runs it each
-- frame. Every frame is timed on its own (CLOCK_MONOTONIC around the call);
-- the three sides run in turns of FRAMES / FRAME_TURNS frames, so a change
-- of load hits them alike, and each figure is the median or 99th percentile
-- of its FRAMES frames.
ffi.cdef[[
typedef struct frames_capi frames_capi;
frames_capi *frames_capi_open(const char *graph_path, const char *checkpoint_path, const char *input,
                              const char *output, char *why, size_t why_size);
int frames_capi_run(frames_capi *f, const float *inputs, int n_inputs, int first, int frames, float *outputs,
                    double *ns, char *why, size_t why_size);
void frames_capi_close(frames_capi *f);
void frames_cblas(const float *w1, const float *b1, const float *w2, const float *b2, const float *w3,
                  const float *b3, const float *inputs, int n_inputs, int first, int frames, float *outputs,
                  double *ns);
]]
local FRAMES, FRAME_TURNS, FRAME_INPUTS = quick and 10000 or 100000, 10, 1024

local function percentile(ns, n, p)
  local sorted = {}
  for i = 1, n do sorted[i] = ns[i - 1] end
  table.sort(sorted)
  return sorted[math.max(1, math.ceil(n * p))] * 1e-9
end

-- Loaded for the whole run: the C API handle's finalizer calls into it.
local frames_lib, frames_why

section("per-frame latency, 8-64-64-4 net", function()
  frames_lib, frames_why = H.c_frames(cc, cflags, build)
  assert(frames_lib, frames_why)
  tf.reset_default_graph()
  tf.set_random_seed(7)
  local x = tf.placeholder(tf.float32, {1, 8}, "x")
  local h = tf.layers.dense(x, 64, {activation = tf.nn.relu, name = "h1"})
  h = tf.layers.dense(h, 64, {activation = tf.nn.relu, name = "h2"})
  local y = tf.layers.dense(h, 4, {name = "policy"})
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  -- The C API loads the net as a host program would: from its graph file and checkpoint.
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir) == 0, "cannot make " .. dir)
  tf.train.write_graph(tf.get_default_graph(), dir .. "/net.graph")
  tf.train.Saver():save(sess, dir .. "/net.ckpt")
  local why = ffi.new("char[512]")
  local capi = frames_lib.frames_capi_open(dir .. "/net.graph", dir .. "/net.ckpt", x.name, y.name, why, 512)
  os.execute("rm -rf " .. dir)
  assert(capi ~= nil, capi == nil and ffi.string(why))
  capi = ffi.gc(capi, frames_lib.frames_capi_close)
  local weights = sess:run(tf.trainable_variables())  -- kernel, bias of each layer
  local w = {}
  for i, a in ipairs(weights) do w[i] = a:data() end

  local inputs = ffi.new("float[?]", 8 * FRAME_INPUTS)
  for i = 0, 8 * FRAME_INPUTS - 1 do inputs[i] = math.sin(0.37 * i) end
  local f = sess:make_callable(y, {x})
  local observation, action = tf.array({{0, 0, 0, 0, 0, 0, 0, 0}}, tf.float32), tf.array({{0, 0, 0, 0}}, tf.float32)
  local obs, act, options = observation:data(), action:data(), {out = action}
  local now, ts = ffi.C.clock_gettime, ffi.new("bench_timespec")
  local function lua_frames(first, count, outputs, ns)
    for i = first, first + count - 1 do
      now(1, ts)
      local t0 = tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
      ffi.copy(obs, inputs + 8 * (i % FRAME_INPUTS), 32)
      f(observation, options)
      if ns then
        now(1, ts)
        ns[i] = tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec) - t0
      end
      if outputs then ffi.copy(outputs + 4 * i, act, 16) end
    end
  end
  local function capi_frames(first, count, outputs, ns)
    local rc = frames_lib.frames_capi_run(capi, inputs, FRAME_INPUTS, first, count, outputs and outputs + 4 * first,
                                          ns and ns + first, why, 512)
    assert(rc == 0, rc ~= 0 and ffi.string(why))
  end
  local function cblas_frames(first, count, outputs, ns)
    frames_lib.frames_cblas(w[1], w[2], w[3], w[4], w[5], w[6], inputs, FRAME_INPUTS, first, count,
                            outputs and outputs + 4 * first, ns and ns + first)
  end
  local sides = {{label = "Lua callable, {out = arrays}", run = lua_frames},
                 {label = "C API, mf_callable_run_into (bench/frames.c)", run = capi_frames},
                 {label = "cblas_sgemm by hand (bench/frames.c)", run = cblas_frames}}

  -- The same outputs from all three, bit for bit, on every input.
  for _, side in ipairs(sides) do
    side.outputs = ffi.new("float[?]", 4 * FRAME_INPUTS)
    side.run(0, FRAME_INPUTS, side.outputs)
    side.ns = ffi.new("double[?]", FRAMES)
  end
  for i = 0, 4 * FRAME_INPUTS - 1 do
    local want = sides[3].outputs[i]
    assert(sides[1].outputs[i] == want and sides[2].outputs[i] == want,
           string.format("frame outputs differ at %d: Lua %.9g, C API %.9g, cblas %.9g", i, sides[1].outputs[i],
                         sides[2].outputs[i], want))
  end
  assert(sess:run(y, {[x] = {{inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], inputs[5], inputs[6],
                              inputs[7]}}}):get(0, 0) == sides[3].outputs[0], "sess:run disagrees with the frames")

  local turn = FRAMES / FRAME_TURNS
  for _, side in ipairs(sides) do side.run(0, turn) end  -- warm-up: plans, buffers, LuaJIT's traces
  for t = 0, FRAME_TURNS - 1 do
    for _, side in ipairs(sides) do side.run(t * turn, turn, nil, side.ns) end
  end
  frames_lib.frames_capi_close(ffi.gc(capi, nil))
  for _, side in ipairs(sides) do
    side.median, side.p99 = percentile(side.ns, FRAMES, 0.5), percentile(side.ns, FRAMES, 0.99)
  end
  local lua_side, capi_side, cblas_side = sides[1], sides[2], sides[3]
  local outputs_note = "outputs bit-identical across the three on " .. FRAME_INPUTS .. " inputs"
  for _, stat in ipairs({{key = "median", what = "median"}, {key = "p99", what = "99th percentile"}}) do
    local k = stat.key
    local frames = count(FRAMES) .. " frames"
    H.row{name = string.format("%s frame, Lua callable into caller's arrays", stat.what), value = us(lua_side[k]),
          unit = "us/frame", note = k == "median" and outputs_note .. "; " .. frames or frames}
    H.row{peer = capi_side.label, peer_value = us(capi_side[k]), ratio = capi_side[k] / lua_side[k],
          target = 1 / 1.3, met = lua_side[k] <= 1.3 * capi_side[k], note = "issue 15: Lua <= 1.3x the C API"}
    H.row{name = string.format("%s frame, C API into caller's buffers", stat.what), value = us(capi_side[k]),
          unit = "us/frame", note = frames}
    H.row{peer = cblas_side.label, peer_value = us(cblas_side[k]), ratio = cblas_side[k] / capi_side[k],
          target = 1 / 1.2, met = capi_side[k] <= 1.2 * cblas_side[k], note = "issue 15: C API <= 1.2x cblas"}
  end
end)

-- tf.while_loop's executor: one iteration of a scalar loop whose body is two
-- ops (i + 1, v + 1; the condition i < n is a third).
section("while_loop, scalar body of two ops", function()
  local N = quick and 100000 or 1000000
  tf.reset_default_graph()
  local n = tf.placeholder(tf.int32, {})
  local _, v = tf.while_loop(function(i) return tf.less(i, n) end, function(i, w) return i + 1, w + 1 end,
                             {tf.constant(0, tf.int32), tf.constant(0.0)})
  local run = tf.Session():make_callable(v, {n})
  assert(run(1000) == 1000, "the loop went astray")
  local PEER_N = 10000
  compare{name = "while_loop, scalar body of two ops", unit = "us/iteration", figure = us, goal = 0.05e-6,
          ours = lua_contender("moonflow", function() run(N) end, {units = N}),
          note = string.format("%d iterations per run", N),
          peers = {py("tensorflow", "TF1 tf.while_loop", "tf1_while", {PEER_N}, {units = PEER_N}),
                   py("torch", "PyTorch eager Python loop (1 thread)", "torch_scalar_loop", {PEER_N},
                      {units = PEER_N})}}
end)

-- matmul against cblas_sgemm called directly on the same data in this process.
local CblasRowMajor, CblasNoTrans = 101, 111
for _, N in ipairs({256, 1024}) do
  local name = string.format("matmul %dx%d float32", N, N)
  section(name, function()
    local flops = 2 * N * N * N
    tf.reset_default_graph()
    local a, b = tf.Array.new(tf.float32, {N, N}), tf.Array.new(tf.float32, {N, N})
    for i = 0, N * N - 1 do a._data[i] = (i % 7) * 0.25; b._data[i] = (i % 5) * 0.5 end
    local pa, pb = tf.placeholder(tf.float32, {N, N}), tf.placeholder(tf.float32, {N, N})
    local f = tf.Session():make_callable(tf.matmul(pa, pb), {pa, pb})
    -- The peer's output is C memory too, so the Lua heap stays as small as ours.
    local out_array = tf.Array.new(tf.float32, {N, N})
    local out = out_array._data
    local sgemm = blas and lua_contender("cblas_sgemm (same BLAS, direct)", function()
      blas.cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1, a._data, N, b._data, N, 0, out, N)
    end, {target = 0.95}) or {label = "cblas_sgemm", why = blas_why}
    local gflops = function(t) return string.format("%.1f", flops / t * 1e-9) end
    compare{name = name, unit = "GFLOP/s", figure = gflops,
            ours = lua_contender("moonflow", function() f(a, b) end),
            peers = {sgemm, py("numpy", "NumPy matmul (out=)", "numpy_matmul", {N})}}
    -- The same product into the caller's array, as the peers write theirs:
    -- what a fresh result per call (its buffer, its collection) costs apart.
    local into = {out = tf.Array.new(tf.float32, {N, N})}
    compare{name = name .. ", into the caller's array", unit = "GFLOP/s", figure = gflops,
            ours = lua_contender("moonflow", function() f(a, b, into) end), peers = {sgemm}}
    if blas then
      local k = N * N - 1 - N
      assert(math.abs(f(a, b)._data[k] - out[k]) <= 1e-3 * math.abs(out[k]), "matmul disagrees with sgemm")
    end
  end)
end

-- y = x * 2 + 1 over 10M float32, then again while the script holds 100 MB of
-- other arrays (which once made every run's fresh 40 MB buffers come from
-- mmap and page-fault).
section("y = x * 2 + 1, 10M float32", function()
  local N, HOLD_MIB = 10000000, 100
  tf.reset_default_graph()
  local xa = tf.Array.new(tf.float32, {N})
  for i = 0, N - 1 do xa._data[i] = i % 1000 end
  local x = tf.placeholder(tf.float32, {N})
  local sess = tf.Session()
  local f = sess:make_callable(x * 2 + 1, {x})
  assert(f(xa)._data[999] == 1999, "y = x * 2 + 1 gave a wrong value")
  local out_array = tf.Array.new(tf.float32, {N})
  local out = out_array._data
  local function measure(name, hold_mib)
    local allocs0, runs = sess:num_allocations(), 0
    compare{name = name, unit = "ms", figure = ms,
            ours = lua_contender("moonflow", function() runs = runs + 1; f(xa) end),
            note_of = function(t)
              return string.format("%.1f GB/s (8 bytes/element); %.2f buffers allocated per run", N * 8 / t * 1e-9,
                                   (sess:num_allocations() - allocs0) / runs)
            end,
            peers = {c_contender("C loop, OpenMP 2 threads", function() c_peers.peer_axpb_omp(xa._data, out, N, 2) end,
                                 {target = 0.8}),
                     c_contender("C loop, 1 thread", function() c_peers.peer_axpb(xa._data, out, N) end),
                     py("numpy", "NumPy x * 2 + 1", "numpy_axpb", {N, "False", hold_mib}),
                     py("numpy", "NumPy in place (out=)", "numpy_axpb", {N, "True", hold_mib}),
                     py("tensorflow", "TF1 make_callable", "tf1_axpb", {N, hold_mib})}}
  end
  measure("y = x * 2 + 1, 10M float32", 0)
  local held = {}
  for i = 1, HOLD_MIB do
    held[i] = tf.Array.new(tf.float32, {262144})
    ffi.fill(held[i]._data, 262144 * 4, 1)
  end
  measure("y = x * 2 + 1, 10M float32, holding 100 MB", HOLD_MIB)
  assert(out[999] == 1999 and out_array:size() == N and #held == HOLD_MIB)  -- keeps them alive until here
end)

-- Elementwise fusion: two chains over 10M float32 into a caller's buffer,
-- fused (one pass over the data) against the same session config with
-- fusion off (a pass per op), the chain as one C loop, and NumPy and PyTorch
-- (a pass per op, each into its output with out=).
section("elementwise fusion, 10M float32", function()
  local N = 10000000
  tf.reset_default_graph()
  local xa = tf.Array.new(tf.float32, {N})
  for i = 0, N - 1 do xa._data[i] = (i % 1000) * 0.001 end
  local out_array = tf.Array.new(tf.float32, {N})
  local out, into = out_array._data, {out = out_array}
  local x = tf.placeholder(tf.float32, {N})
  local fused, plain = tf.Session(), tf.Session({elementwise_fusion = false})
  local chains = {
    {name = "y = x * 2 + 1", key = "axpb", y = x * 2 + 1, at = function(v) return v * 2 + 1 end,
     target = 0.8,  -- issue 13's, against the 2-thread OpenMP loop
     c = function() c_peers.peer_axpb(xa._data, out, N) end,
     omp = function() c_peers.peer_axpb_omp(xa._data, out, N, 2) end},
    {name = "y = tanh(x * 0.5 + 0.25) * 3", key = "tanh", y = tf.tanh(x * 0.5 + 0.25) * 3,
     at = function(v) return math.tanh(v * 0.5 + 0.25) * 3 end,
     c = function() c_peers.peer_tanh_chain(xa._data, out, N, 0.5, 0.25, 3) end,
     omp = function() c_peers.peer_tanh_chain_omp(xa._data, out, N, 0.5, 0.25, 3, 2) end},
  }
  for _, chain in ipairs(chains) do
    local f, g = fused:make_callable(chain.y, {x}), plain:make_callable(chain.y, {x})
    for _, run in ipairs({f, g}) do
      run(xa, into)
      local k = N - 1
      assert(math.abs(out[k] - chain.at(xa._data[k])) <= 1e-5, chain.name .. " gave a wrong value")
    end
    local steps, unfused_steps = fused:plan_stats(chain.y, {x}).num_steps, plain:plan_stats(chain.y, {x}).num_steps
    local chain_arg = "'" .. chain.key .. "'"
    compare{name = "elementwise fusion: " .. chain.name .. ", 10M float32", unit = "ms", figure = ms,
            note = string.format("into a caller's buffer; fused: %d step(s), unfused: %d", steps, unfused_steps),
            ours = lua_contender("moonflow, fused", function() f(xa, into) end),
            peers = {lua_contender("moonflow unfused (elementwise_fusion = false)", function() g(xa, into) end),
                     c_contender("C loop, OpenMP 2 threads", chain.omp, {target = chain.target}),
                     c_contender("C loop, 1 thread", chain.c),
                     py("numpy", "NumPy, a pass per op (out=)", "numpy_chain", {chain_arg, N}),
                     torch_best("PyTorch, a pass per op (out=), best thread count", "torch_chain", {chain_arg, N})}}
  end
end)

-- Large kernels on the intra-op thread pool (src/kernels/parallel.h): one
-- thread against a thread per core (the first contender and a peer), NumPy
-- and PyTorch beside them. A session sets OpenBLAS's thread count, which is
-- the process's, when made; each contender sets its own again before it
-- runs, so a 1-thread convolution's gemm runs on one thread too.
local function on_threads(build, feed_shape, feed_value, peers)
  local contenders = {}
  for _, threads in ipairs(cores > 1 and {1, cores} or {1}) do
    tf.reset_default_graph()
    local x = tf.placeholder(tf.float32, feed_shape)
    local sess = tf.Session({intra_op_parallelism_threads = threads})
    local f = sess:make_callable(build(x), {x})
    local c = lua_contender(string.format("moonflow, %d thread%s", threads, threads > 1 and "s" or ""),
                            function() f(feed_value) end)
    local run = c.run
    c.run = function(calls)
      if blas then blas.openblas_set_num_threads(threads) end
      return run(calls)
    end
    contenders[#contenders + 1] = c
  end
  for _, p in ipairs(peers) do contenders[#contenders + 1] = p end
  return {ours = contenders[1], peers = {unpack(contenders, 2)}}
end

local function filled(shape, scale)
  local a = tf.Array.new(tf.float32, shape)
  for i = 0, a:size() - 1 do a._data[i] = (i % 1000) * scale end
  return a
end

section("threaded kernels", function()
  local blas_threads = blas and blas.openblas_get_num_threads()
  local N, ROWS, COLS = quick and 1000000 or 10000000, 4096, 1000
  local sum = on_threads(tf.reduce_sum, {N}, filled({N}, 0.001), {py("numpy", "NumPy sum", "numpy_sum", {N})})
  compare{name = string.format("reduce_sum, %s float32", count(N)), unit = "ms", figure = ms,
          ours = sum.ours, peers = sum.peers}
  local softmax = on_threads(tf.nn.softmax, {ROWS, COLS}, filled({ROWS, COLS}, 0.01),
                             {py("numpy", "NumPy softmax", "numpy_softmax", {ROWS, COLS})})
  compare{name = string.format("softmax %dx%d float32", ROWS, COLS), unit = "ms", figure = ms,
          ours = softmax.ours, peers = softmax.peers}
  local B, S, C = quick and 8 or 32, 64, 32
  local filter = filled({3, 3, C, C}, 0.0001)
  local conv = on_threads(function(x) return tf.nn.conv2d(x, tf.constant(filter), {1, 1, 1, 1}, "SAME") end,
                          {B, S, S, C}, filled({B, S, S, C}, 0.001),
                          {torch_best("PyTorch, best thread count", "torch_conv2d", {B, S, S, C, C})})
  compare{name = string.format("conv2d %dx%dx%dx%d, 3x3, %d out", B, S, S, C, C), unit = "ms", figure = ms,
          ours = conv.ours, peers = conv.peers}
  if blas then blas.openblas_set_num_threads(blas_threads) end
end)

-- A MobileNet-sized depthwise layer (56x56x128, 3x3, SAME, NHWC): its
-- forward op on one thread and on a thread per core, PyTorch's grouped
-- convolution (groups = channels, NCHW) and TF1's DepthwiseConv2dNative.
section("depthwise conv2d", function()
  local blas_threads = blas and blas.openblas_get_num_threads()
  local B, S, C = quick and 2 or 8, 56, 128
  local filter = filled({3, 3, C, 1}, 0.001)
  local dw = on_threads(function(x) return tf.nn.depthwise_conv2d(x, tf.constant(filter), 1, "SAME") end,
                        {B, S, S, C}, filled({B, S, S, C}, 0.001),
                        {torch_best("PyTorch, groups = channels, best thread count", "torch_depthwise", {B, S, S, C}),
                         py("tensorflow", "TF1 DepthwiseConv2dNative", "tf1_depthwise", {B, S, S, C})})
  compare{name = string.format("depthwise_conv2d %dx%dx%dx%d, 3x3", B, S, S, C), unit = "ms", figure = ms,
          ours = dw.ours, peers = dw.peers}
  if blas then blas.openblas_set_num_threads(blas_threads) end
end)

-- The loop of how-not-to-program-the-tensorflow-graph.txt done right: a
-- prebuilt increment_x = tf.assign(x, x + 1) run a million times.
section("1M sess:run(tf.assign(x, x + 1)), built once", function()
  local N = quick and 100000 or 1000000
  tf.reset_default_graph()
  local x = tf.Variable(0, {name = "x"})
  local increment_x = tf.assign(x, x + 1)
  local sess = tf.Session()
  sess:run(x.initializer)
  local total = 0
  compare{name = count(N) .. " sess:run(tf.assign(x, x + 1)), built once", unit = "us/run", figure = us,
          ours = lua_contender("moonflow", function()
            for _ = 1, N do sess:run(increment_x) end
            total = total + N
          end, {units = N}),
          note_of = function() return string.format("%d buffers allocated, all in the first run", sess:num_allocations()) end,
          peers = {py("tensorflow", "TF1 Session.run(increment_x)", "tf1_assign")}}
  assert(sess:run(x) == total, "the increments went astray")
end)

-- What a while loop's gradient keeps from the forward pass: an RNN-like loop
-- h = tanh(h W), 100 steps of a 32x64 float32 state. The stash (the While
-- op's last output reports its bytes) holds one checkpoint of the loop
-- variable per iteration; the intermediates the gradient reads (tanh's output
-- here) are recomputed from it. Keeping them instead, as TensorFlow's stacks
-- do, would double this.
section("while_loop gradient: memory held", function()
  local T, B, HD = 100, 32, 64
  tf.reset_default_graph()
  local h0 = tf.placeholder(tf.float32, {B, HD})
  local w = tf.random_normal({HD, HD}, {stddev = 0.1, seed = 1})
  local _, h = tf.while_loop(function(i) return tf.less(i, T) end,
                             function(i, hh) return i + 1, tf.tanh(tf.matmul(hh, w)) end,
                             {tf.constant(0, tf.int32), h0})
  local gw = tf.gradients(tf.reduce_sum(h), {w})[1]
  local sess = tf.Session()
  local feed = {[h0] = tf.Array.new(tf.float32, {B, HD})}
  local kept = sess:run({gw, h.op:output(2)}, feed)[2]
  local t = H.interleave({lua_contender("moonflow", function() sess:run(gw, feed) end)})[1]
  H.row{name = "while_loop gradient: memory held", value = string.format("%.1f", kept / T / 1024),
        unit = "KiB/iteration",
        note = string.format("%d steps of h [%dx%d] float32: %.0f KiB kept in all (one state per step); " ..
                             "forward + backward %.2f ms", T, B, HD, kept / 1024, t * 1e3)}
end)

-- Training steps of MLPs against PyTorch at its best thread count and
-- TensorFlow 1.x doing the same step on the same sizes.
local MLPS = {
  {name = "digits MLP 64-128-10, Adam, batch 32", sizes = {64, 128, 10}, adam = true, lr = 0.01, batch = 32},
  {name = "MLP 784-512-512-10, SGD, batch 128", sizes = {784, 512, 512, 10}, adam = false, lr = 0.1, batch = 128,
   target = 1.5},
}
for _, m in ipairs(MLPS) do
  section(m.name, function()
    local optimizer = m.adam and tf.train.AdamOptimizer(m.lr) or tf.train.GradientDescentOptimizer(m.lr)
    local step, check = mlp_step(m.sizes, optimizer, m.batch)
    local args = {H.py_list(m.sizes), m.adam and "True" or "False", m.lr, m.batch}
    compare{name = m.name, unit = "steps/s", figure = per_second,
            note_of = function(t) return string.format("%.1f us/step", t * 1e6) end,
            ours = lua_contender("moonflow", step),
            peers = {torch_best("PyTorch, best thread count", "torch_mlp", args, {target = m.target}),
                     py("tensorflow", "TF1 graph mode", "tf1_mlp", args)}}
    check()
  end)
end

-- GPU sections (issue 14) -------------------------------------------------------
-- moonflow on /gpu:0 against the bare CUDA peers (bench/cuda_peers.cu, built
-- with nvcc on first use: cuBLAS, a device-to-device copy, a hand-written
-- kernel) and PyTorch on cuda, all on device 0 of this process's machine.
-- Without a GPU each is a row saying why. The GPU runs asynchronously, so
-- every GPU contender's batch ends waiting for it: the CUDA peers record CUDA
-- events, PyTorch calls torch.cuda.synchronize, and moonflow's batches end with
-- cudaDeviceSynchronize (cuda_peer_sync; the backend shares the device's
-- primary context with the peers' library), so a batch counts all the work
-- its runs queued even if a run returned before its kernels finished.
local gpu_name  -- what the GPU rows' notes call the device: CUDA's name for it

-- Why the GPU sections cannot run, or nil: moonflow lists a GPU when its CUDA
-- backend (build/libmoonflow_cuda.so, made where nvcc is found) loads and
-- finds a device; tf.config.gpu_status() says why not.
local function gpu_missing()
  if #tf.config.list_physical_devices("GPU") > 0 then return nil end
  local why = tf.config.gpu_status()
  return why ~= "" and why or "no GPU"
end

local cuda_lib, cuda_lib_why  -- bench/cuda_peers.cu, built on the first GPU section's demand
local cuda_why = ffi.new("char[?]", H.WHY_SIZE)
local function cuda_peers()
  if not cuda_lib and not cuda_lib_why then
    cuda_lib, cuda_lib_why = H.cuda_peers(build)
    local name = ffi.new("char[256]")
    if cuda_lib and cuda_lib.cuda_peer_device_name(name, 256, cuda_why, H.WHY_SIZE) == 0 then
      gpu_name = ffi.string(name)
    end
  end
  return cuda_lib, cuda_lib_why
end

-- A bare CUDA contender: make(lib, why, why_size) returns a cuda_peer.
local function cuda_contender(label, make, options)
  local lib, why = cuda_peers()
  if not lib then return {label = label, why = why} end
  return H.cuda_contender(lib, label, make(lib, cuda_why, H.WHY_SIZE), cuda_why, options)
end

-- moonflow's side of a GPU row: `calls` calls of fn, then a wait for the GPU
-- (untimed before the batch too, so no earlier work is counted).
local function gpu_contender(label, fn)
  local lib = cuda_peers()
  local function waited()
    return not lib or lib.cuda_peer_sync(cuda_why, H.WHY_SIZE) == 0
  end
  return H.contender(label, nil, function(calls)
    if not waited() then return nil, ffi.string(cuda_why) end
    local t0 = H.now()
    for _ = 1, calls do fn() end
    if not waited() then return nil, ffi.string(cuda_why) end
    return H.now() - t0
  end)
end

local function gpu_note(text)
  return string.format("%s; on %s%s", text, gpu_name or "GPU:0",
                       cuda_peers() and "" or " (no CUDA peers to wait with: moonflow's own end-of-run sync is trusted)")
end

-- n float32 values (i % period) * scale in a host array of `shape`: the data
-- the CUDA and PyTorch peers make on the GPU, exact in float32.
local function pattern(shape, period, scale)
  local a = tf.Array.new(tf.float32, shape)
  for i = 0, a:size() - 1 do a._data[i] = (i % period) * scale end
  return a
end

-- A float32 variable on /gpu:0 and a function(sess) setting it to a host
-- array's values (fed once).
local function gpu_variable(values)
  local v, set
  local fed = tf.placeholder(tf.float32, values:shape())
  tf.device("/gpu:0", function()
    v = tf.Variable(tf.zeros(values:shape()))
    set = tf.assign(v, fed)
  end)
  return v, function(sess) sess:run(set.op, {[fed] = values}) end
end

local GPU_N = 4096
section("GPU matmul 4096x4096 float32", function()
  local name = string.format("GPU matmul %dx%d float32", GPU_N, GPU_N)
  local missing = gpu_missing()
  if missing then H.row{name = name, value = "n/a", note = missing} return end
  local N = GPU_N
  tf.reset_default_graph()
  local a, set_a = gpu_variable(pattern({N, N}, 7, 0.25))
  local b, set_b = gpu_variable(pattern({N, N}, 5, 0.5))
  local product
  tf.device("/gpu:0", function() product = tf.matmul(a, b) end)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  set_a(sess)
  set_b(sess)
  -- What a TF1 user times: the product run as a target, its result left on the GPU.
  local run_product = sess:make_callable(product.op)
  local cublas = cuda_contender("cuBLAS cublasSgemm, bare (bench/cuda_peers.cu)",
                                function(lib, why, size) return lib.cuda_peer_sgemm_new(N, why, size) end,
                                {target = 0.9})
  if cublas.output then  -- the same product as cuBLAS's, every value (both exact: multiples of 1/8)
    local ours, theirs = sess:run(product), ffi.new("float[?]", N * N)
    cublas.output(0, N * N, theirs)
    for i = 0, N * N - 1 do
      assert(ours._data[i] == theirs[i], string.format("the product differs from cuBLAS's at %d: %.9g, cuBLAS %.9g",
                                                       i, ours._data[i], theirs[i]))
    end
  end
  local flops = 2 * N * N * N
  compare{name = name, unit = "TFLOP/s", figure = function(t) return string.format("%.1f", flops / t * 1e-12) end,
          note = gpu_note("both operands variables on /gpu:0, the product run as a target"),
          ours = gpu_contender("moonflow", run_product),
          peers = {cublas, py("torch", "PyTorch torch.mm on cuda (out=)", "torch_cuda_mm", {N})}}
  if cublas.close then cublas.close() end
  sess:close()
end)

local GPU_AXPB_N = 100000000
section("GPU y = x*2+1, 100M float32", function()
  local name = "GPU y = x*2+1, 100M float32"
  local missing = gpu_missing()
  if missing then H.row{name = name, value = "n/a", note = missing} return end
  local N = GPU_AXPB_N
  tf.reset_default_graph()
  local x, set_x = gpu_variable(pattern({N}, 1000, 1))
  local y
  tf.device("/gpu:0", function() y = x * 2 + 1 end)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  set_x(sess)
  do  -- every value checked; the 400 MB fetched go with the block
    local values = sess:run(y)._data
    for i = 0, N - 1 do
      assert(values[i] == (i % 1000) * 2 + 1, string.format("y = x*2+1 gave %.9g at %d", values[i], i))
    end
  end
  -- The result stays on the GPU: y's op is a target.
  local run_y = sess:make_callable(y.op)
  local peers = {
    cuda_contender("device copy bandwidth: cudaMemcpy device to device, 400 MB",
                   function(lib, why, size) return lib.cuda_peer_copy_new(N, why, size) end, {target = 0.8}),
    cuda_contender("hand-written CUDA kernel, one pass (bench/cuda_peers.cu)",
                   function(lib, why, size) return lib.cuda_peer_axpb_new(N, why, size) end),
    py("torch", "PyTorch x * 2 + 1 on cuda", "torch_cuda_axpb", {N})}
  compare{name = name, unit = "GB/s", figure = function(t) return string.format("%.0f", N * 8 / t * 1e-9) end,
          note = gpu_note("x a variable on /gpu:0, y's op a target; 8 bytes per element (read x, write y), " ..
                          "as the copy's bytes read and written"),
          ours = gpu_contender("moonflow", run_y), peers = peers}
  for _, p in ipairs(peers) do
    if p.close then p.close() end
  end
  sess:close()
end)

-- The MLP of the CPU rows with its model on /gpu:0, each step's batch fed
-- from host arrays as a TF1 user feeds it, against the same model on
-- /cpu:0 in this process and PyTorch on cuda (batch copied to the GPU each step).
for _, batch in ipairs({128, 1024}) do
  local name = "GPU MLP 784-512-512-10, SGD, batch " .. batch
  section(name, function()
    local missing = gpu_missing()
    if missing then H.row{name = name, value = "n/a", note = missing} return end
    local sizes, lr = {784, 512, 512, 10}, 0.1
    local gpu_step, gpu_check = mlp_step(sizes, tf.train.GradientDescentOptimizer(lr), batch, "/gpu:0")
    local cpu_step, cpu_check = mlp_step(sizes, tf.train.GradientDescentOptimizer(lr), batch, "/cpu:0")
    compare{name = name, unit = "steps/s", figure = per_second,
            note_of = function(t) return gpu_note(string.format("%.1f us/step; model on /gpu:0, batch fed from host " ..
                                                                "arrays", t * 1e6)) end,
            ours = gpu_contender("moonflow", gpu_step),
            peers = {lua_contender("moonflow on /cpu:0, same process", cpu_step),
                     py("torch", "PyTorch on cuda (batch copied from the host each step)", "torch_cuda_mlp",
                        {H.py_list(sizes), "False", lr, batch})}}
    gpu_check()
    cpu_check()
  end)
end

-- Peak resident memory of the digits training (examples/digits.lua, the MLP),
-- each framework in a process of its own.
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
  local name = "digits training: peak resident memory"
  local probe = io.open(DIGITS_DATA)
  if not probe then
    H.row{name = name, value = "n/a", note = "no " .. DIGITS_DATA .. " (apt-get install python3-sklearn)"}
    return
  end
  probe:close()
  local out = output_of("luajit examples/digits.lua mlp --quiet --out " .. os.tmpname():match("^(.*)/"))
  local ours = tonumber(out:match("peak resident memory ([%d.]+) MiB"))
  assert(ours, "examples/digits.lua printed no peak memory: " .. out)
  H.row{name = name, value = string.format("%.0f", ours), unit = "MiB",
        note = "20 epochs of the MLP, batch 32, each framework in its own process"}
  local script = os.tmpname()
  report.write(script, DIGITS_TORCH)
  local peer_out = output_of(H.python .. " " .. script)
  os.remove(script)
  local peer = tonumber(peer_out:match("peak_mib ([%d.]+)"))
  if peer then
    H.row{peer = "PyTorch", peer_value = string.format("%.0f", peer), ratio = peer / ours,
          note = "ratio of memory: the peer's over moonflow's"}
  else
    H.row{peer = "PyTorch", peer_value = "not run",
          note = peer_out:match("(%w*Error[^\n]*)") or peer_out:match("([^\n]+)") or "no output"}
  end
end)

-- An input pipeline whose map is expensive (a 256x256 float32 matmul and tanh
-- per element) feeding a training-like step (a 256x256 matmul against a
-- variable and a gradient-descent update), with prefetch(2) against without:
-- with it the map runs on its session's worker thread while the step runs
-- here. Both threads call OpenBLAS, whose own threads they then share, so the
-- pipeline is also measured with OpenBLAS on one thread per call.
local function pipeline_step(prefetch)
  local g = tf.Graph()
  return g:as_default(function()
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
    local sess = tf.Session(g)
    sess:run(tf.global_variables_initializer())
    return sess:make_callable(train)
  end)
end

local function pipeline_rows(name, note)
  compare{name = name, unit = "steps/s", figure = per_second, note = note,
          ours = lua_contender("prefetch(2)", pipeline_step(true)),
          peers = {lua_contender("no prefetch", pipeline_step(false))}}
end

section("input pipeline: 256x256 matmul map -> step", function()
  pipeline_rows("input pipeline: 256x256 matmul map -> step, prefetch(2)",
                "the map runs on a worker thread during the step")
  if not blas then return end
  local threads = blas.openblas_get_num_threads()
  blas.openblas_set_num_threads(1)
  local ok, err = pcall(pipeline_rows, "input pipeline, prefetch(2), OpenBLAS 1 thread",
                        string.format("default: %d OpenBLAS threads, shared by both threads", threads))
  blas.openblas_set_num_threads(threads)
  assert(ok, err)
end)

-- tf.data throughput: each pipeline repeats and is consumed by a callable
-- that takes its next batch and fetches the batch's size, against TensorFlow
-- 1.x's tf.data doing the same (a one-shot iterator in a session).
local function batch_sizes(ds)
  local nxt = ds:make_one_shot_iterator():get_next()
  return tf.Session():make_callable(tf.size(tf.is_tensor(nxt) and nxt or nxt[1]))
end
-- Three significant digits: the map per element runs thousands of times slower.
local function million_rows_per_second(t) return string.format("%.3g", 1 / t / 1e6) end

-- map: x * 2 + 1 over rows of 8 float32, batched by 1024, fused (an
-- elementwise function runs once per batch) against the same function run
-- per element (a Reshape of its result keeps it per element).
section("tf.data map", function()
  local n, width, rows = 65536, 8, 1024
  tf.reset_default_graph()
  local x = tf.Array.new(tf.float32, {n, width})
  for i = 0, n * width - 1 do x._data[i] = (i % 1000) / 100 end
  local function f(v) return v * 2 + 1 end
  local fused = batch_sizes(tf.data.Dataset.from_tensor_slices(x):map(f):batch(rows):repeat_())
  local per_element = batch_sizes(tf.data.Dataset.from_tensor_slices(x):map(function(v)
    local y = f(v)
    return tf.reshape(y, tf.shape(y))
  end):batch(rows):repeat_())
  assert(fused() == rows * width and per_element() == rows * width, "a batch of the wrong size")
  compare{name = "tf.data map(x*2+1):batch(1024), rows of 8 float32", unit = "M rows/s",
          figure = million_rows_per_second, rate = true, goal = 1 / 2e6,
          note = "map-and-batch fusion: one run of the map per batch",
          ours = lua_contender("moonflow", fused, {units = rows}),
          peers = {lua_contender("moonflow, the map per element", per_element, {units = rows}),
                   py("tensorflow", "TF1 tf.data", "tf1_data_map", {n, width, rows}, {units = rows})}}
end)

-- batch: rows of 64 float32 and an int32 label, batched by 128, and the same
-- rows shuffled first (then they are gathered one by one).
section("tf.data batch", function()
  local n, width, rows = 65536, 64, 128
  tf.reset_default_graph()
  local x, y = tf.Array.new(tf.float32, {n, width}), tf.Array.new(tf.int32, {n})
  for i = 0, n * width - 1 do x._data[i] = i % 17 end
  for i = 0, n - 1 do y._data[i] = i % 10 end
  local slices = tf.data.Dataset.from_tensor_slices({x, y})
  for _, shuffle in ipairs({0, 10000}) do
    local ds = shuffle > 0 and slices:shuffle(shuffle, {seed = 1}) or slices
    local run = batch_sizes(ds:batch(rows):repeat_())
    assert(run() == rows * width, "a batch of the wrong size")
    compare{name = string.format("tf.data %sbatch(128), rows of 64 float32 + int32",
                                 shuffle > 0 and "shuffle(10000):" or ""),
            unit = "M rows/s", figure = million_rows_per_second, rate = true,
            goal = shuffle == 0 and 1 / 5e6 or nil,
            note = shuffle > 0 and "shuffled rows are gathered by row index"
                   or "consecutive rows are copied as one block",
            ours = lua_contender("moonflow", run, {units = rows}),
            peers = {py("tensorflow", "TF1 tf.data", "tf1_data_batch", {n, width, rows, shuffle}, {units = rows})}}
  end
end)

-- The digits MLP (64-128-10, Adam, batch 32) trained from a tf.data pipeline
-- (shuffle, a map scaling the pixels, batch, repeat) with prefetch(2)
-- against without: issue 13 asks that prefetch be at least as fast.
local function read_digits()
  local pipe = io.popen("gzip -dc " .. DIGITS_DATA .. " 2>/dev/null")
  local lines = {}
  for line in pipe:lines() do if line:find("%d") then lines[#lines + 1] = line end end
  pipe:close()
  if #lines == 0 then return nil end
  local n = #lines
  local images, labels = tf.Array.new(tf.float32, {n, 64}), tf.Array.new(tf.int32, {n})
  for r, line in ipairs(lines) do
    local c = 0
    for field in line:gmatch("[^,]+") do
      if c < 64 then images._data[(r - 1) * 64 + c] = tonumber(field) else labels._data[r - 1] = tonumber(field) end
      c = c + 1
    end
  end
  return images, labels
end

section("digits training from tf.data", function()
  local name = "digits MLP from tf.data (shuffle, map, batch 32), prefetch(2)"
  local images, labels = read_digits()
  if not images then
    H.row{name = name, value = "n/a", note = "no " .. DIGITS_DATA .. " (apt-get install python3-sklearn)"}
    return
  end
  local n = images:shape()[1]
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
  compare{name = name, unit = "steps/s", figure = per_second,
          note_of = function(t) return string.format("%.1f us/step", t * 1e6) end,
          ours = lua_contender("moonflow, prefetch(2)", training_step(true)),
          peers = {lua_contender("moonflow, no prefetch", training_step(false), {target = 1})}}
end)

-- Graph building (issue 16): creating ops from Lua (y = y + 1, a Const and
-- an Add per step, the text's bad loop) at 10k to 1M ops, the same through
-- the C API (FFI calls, no Lua objects), a 100-layer MLP's build, gradients
-- and minimize, and importing a graph file of 100k ops; each against
-- TensorFlow 1.x graph mode (tensorflow.compat.v1) doing the same build.
-- Every build starts in a new graph; freeing the previous one and
-- collecting garbage come first and are not timed, on either side. Bytes per
-- op are the resident size's growth over the first build of each size
-- (sizes go up, so memory a smaller graph freed does not hide a larger
-- one's). It runs last: what it builds stays in the process's resident size.
local GRAPH_SIZES = quick and {10000, 100000} or {10000, 100000, 300000, 1000000}
local MLP_DEPTH, MLP_WIDTH, IMPORT_OPS = 100, 32, 100000
local BYTES_PER_OP_GOAL = 300

-- Collects all garbage twice: objects with finalizers (a graph's handle)
-- free their C memory in the first pass and their Lua memory in the second.
local function collect()
  collectgarbage()
  collectgarbage()
end

-- A timed build of n ops in a new default graph, and what the first one
-- grew the resident size by, per op.
local function chain_build(n)
  local bytes_per_op
  return function()
    tf.reset_default_graph()
    collect()
    local g = tf.get_default_graph()
    local rss0 = H.rss_bytes()
    local t0 = H.now()
    local y = tf.constant(0.0)
    for _ = 1, n / 2 do y = y + 1 end
    local seconds = H.now() - t0
    if not bytes_per_op then
      assert(g:num_ops() == n + 1, "the chain has " .. g:num_ops() .. " ops")
      collectgarbage()
      bytes_per_op = (H.rss_bytes() - rss0) / n
    end
    return seconds
  end, function() return bytes_per_op end
end

-- Ops through the C API, called from LuaJIT's FFI: the engine's own cost.
local function c_api_build(n)
  local core = require("moonflow.core")
  local C, status = core.C, core.status
  local function finish(d)
    C.mf_op_desc_set_origin(d, "bench/run.lua:1")
    local op = C.mf_op_desc_finish(d, status)
    core.check(status)
    return C.mf_op_id(op)
  end
  local g
  return function()
    g = nil
    collect()
    local t0 = H.now()
    g = ffi.gc(C.mf_graph_new(), C.mf_graph_release)
    local y
    for _ = 1, n / 2 do
      local d = C.mf_op_desc_new(g, "Const", nil)
      C.mf_op_desc_set_attr_scalar(d, "value", C.MF_FLOAT32, 1)
      local c = finish(d)
      if y then
        d = C.mf_op_desc_new(g, "Add", nil)
        C.mf_op_desc_add_input_id(d, y, 0)
        C.mf_op_desc_add_input_id(d, c, 0)
        c = finish(d)
      end
      y = c
    end
    return H.now() - t0
  end
end

local function mlp_loss()
  local h = tf.placeholder(tf.float32, {-1, MLP_WIDTH})
  for _ = 1, MLP_DEPTH do
    local w = tf.Variable(tf.zeros({MLP_WIDTH, MLP_WIDTH}))
    local b = tf.Variable(tf.zeros({MLP_WIDTH}))
    h = tf.nn.relu(tf.matmul(h, w) + b)
  end
  return tf.reduce_mean(tf.square(h))
end

-- The MLP built in a new graph, then part ("build", "gradients",
-- "minimize") timed, as peers.py's tf1_mlp_graph does.
local function mlp_graph(part)
  return function()
    tf.reset_default_graph()
    collect()
    local t0 = H.now()
    local loss = mlp_loss()
    local t1 = H.now()
    if part == "build" then return t1 - t0 end
    if part == "gradients" then
      tf.gradients(loss, tf.trainable_variables())
    else
      tf.train.GradientDescentOptimizer(0.1):minimize(loss)
    end
    return H.now() - t1
  end
end

local TF1 = "TF1 graph mode"
-- The most seconds TensorFlow's repeats of one graph-building row may take:
-- it builds ops hundreds of times slower than moonflow, so at the larger
-- sizes it gets fewer repeats, and none where one build would take longer.
local PEER_BUDGET = tonumber(os.getenv("BENCH_PEER_BUDGET") or "") or (quick and 10 or 120)

section("graph building", function()
  local peer_op_seconds, peer_measured_at  -- TensorFlow's time per op at the last size it built
  for _, n in ipairs(GRAPH_SIZES) do
    local build, bytes_per_op = chain_build(n)
    local peer
    if peer_op_seconds and peer_op_seconds * n > PEER_BUDGET then
      peer = {label = TF1, why = string.format("not run: one build would take about %.0f s (%.0f us/op at %s ops), " ..
                                               "over its budget of %g s (BENCH_PEER_BUDGET)", peer_op_seconds * n,
                                               peer_op_seconds * 1e6, count(peer_measured_at), PEER_BUDGET)}
    else
      peer = py("tensorflow", TF1, "tf1_chain", {n}, {units = n, budget = PEER_BUDGET})
    end
    local name = "creating " .. count(n) .. " ops from Lua (y = y + 1)"
    local _, peer_times = compare{name = name, unit = "us/op", figure = us, goal = 2e-6,
                                  ours = H.timed_contender("moonflow", build, {units = n}), peers = {peer}}
    if peer_times and peer_times[TF1] then peer_op_seconds, peer_measured_at = peer_times[TF1], n end
    local ours = bytes_per_op()
    if ours then
      H.row{name = name .. ", memory", value = string.format("%.0f", ours), unit = "bytes/op",
            target = "<= " .. BYTES_PER_OP_GOAL .. " bytes/op", met = ours <= BYTES_PER_OP_GOAL,
            note = "resident size's growth over the first build"}
      local theirs, why = (peer.figure or function() return nil, peer.why end)("bytes_per_op")
      H.row(theirs and {peer = TF1, peer_value = string.format("%.0f", theirs), ratio = theirs / ours,
                        note = "ratio of memory: the peer's over moonflow's"}
            or {peer = TF1, peer_value = "not run", note = why})
    end
  end
  tf.reset_default_graph()
  collect()

  local C_OPS = 100000
  compare{name = "creating " .. count(C_OPS) .. " ops through the C API", unit = "us/op", figure = us,
          goal = 0.5e-6, note = "FFI calls from LuaJIT: a Const and an Add per step, no Lua objects",
          ours = H.timed_contender("moonflow", c_api_build(C_OPS), {units = C_OPS})}
  collect()

  for _, part in ipairs({"build", "gradients", "minimize"}) do
    compare{name = string.format("%d-layer MLP (%d wide): %s", MLP_DEPTH, MLP_WIDTH,
                                 part == "build" and "building it" or part == "gradients" and "tf.gradients"
                                 or "minimize (SGD)"),
            unit = "ms", figure = ms, goal = part ~= "build" and 20e-3 or nil,
            ours = H.timed_contender("moonflow", mlp_graph(part)),
            peers = {py("tensorflow", TF1, "tf1_mlp_graph", {MLP_DEPTH, MLP_WIDTH, "'" .. part .. "'"},
                        {budget = PEER_BUDGET})}}
  end

  -- A graph file of x + c chained, imported into a new graph each time.
  tf.reset_default_graph()
  local g = tf.get_default_graph()
  local y, c = tf.placeholder(tf.float32, {}, "x"), tf.constant(1.0)
  while g:num_ops() < IMPORT_OPS do y = y + c end
  local path = os.tmpname()
  tf.train.write_graph(g, path)
  tf.reset_default_graph()
  local imported
  local ok, err = pcall(compare, {
    name = "importing a graph file of " .. count(IMPORT_OPS) .. " ops", unit = "s",
    figure = function(t) return string.format("%.3f", t) end, goal = 1,
    note = "moonflow reads its JSON graph file, TensorFlow a binary GraphDef",
    ours = H.timed_contender("moonflow", function()
      imported = nil
      collect()
      local t0 = H.now()
      imported = tf.train.import_graph(path)
      return H.now() - t0
    end),
    peers = {py("tensorflow", TF1, "tf1_import", {IMPORT_OPS}, {budget = PEER_BUDGET})}})
  os.remove(path)
  assert(ok, err)
  imported = nil
  collect()
end)

-- MPI (moonflow.mpi, src/mpi/): ranks under mpirun on this machine's loopback,
-- run by bench/mpi_worker.lua, which times them with a schedule every rank
-- shares (each batch's time is the slowest rank's); the peer is Open MPI's
-- own MPI_Allreduce in a C loop (bench/mpi_peer.c) on the same buffers.
local MPI_LIB = build .. "/libmoonflow_mpi.so"
local function mpi_missing()
  if os.execute("command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1") ~= 0 then
    return "no mpirun/mpicc (apt-get install openmpi-bin libopenmpi-dev)"
  end
  local f = io.open(MPI_LIB)
  if not f then return "no " .. MPI_LIB end
  f:close()
end
local function mpirun(np, args)
  local out = output_of(string.format("MOONFLOW_MPI_LIB=%s timeout 900 mpirun -np %d --oversubscribe " ..
                                      "--allow-run-as-root luajit bench/mpi_worker.lua %s", MPI_LIB, np, args))
  local rows_out = {}
  for line in out:gmatch("row ([^\n]*)") do rows_out[#rows_out + 1] = line end
  if #rows_out == 0 then error("mpirun printed no rows: " .. out:sub(1, 300)) end
  return rows_out
end
local function size_name(bytes)
  return bytes >= 1024 * 1024 and string.format("%d MB", bytes / 1024 / 1024) or string.format("%d KB", bytes / 1024)
end

section("MPI allreduce bandwidth, 2 ranks", function()
  local why = mpi_missing()
  if why then H.row{name = "MPI allreduce bandwidth, 2 ranks", value = "n/a", note = why} return end
  local peer = build .. "/mpi_peer.so"
  local out = output_of("mpicc -O2 -shared -fPIC bench/mpi_peer.c -o " .. peer)
  if out ~= "" then error("mpicc: " .. out) end
  for _, line in ipairs(mpirun(2, "allreduce " .. peer)) do
    local bytes, ours, theirs = line:match("^(%d+) (%S+) (%S+)")
    bytes, ours, theirs = tonumber(bytes), tonumber(ours), tonumber(theirs)
    local function gbs(t) return string.format("%.3f", bytes / t / 1e9) end
    H.row{name = "MPI allreduce float32 " .. size_name(bytes) .. ", 2 ranks", value = gbs(ours), unit = "GB/s",
          note = string.format("%.1f us per allreduce, with the exchange of dtypes and shapes", ours * 1e6)}
    H.row{peer = "MPI_Allreduce in a C loop", peer_value = gbs(theirs), ratio = theirs / ours,
          note = string.format("%.1f us", theirs * 1e6)}
  end
end)

section("MPI training steps/s, 1 vs 2 ranks", function()
  local name = "MLP 784-512-512-10, SGD, global batch 256, 2 ranks"
  local why = mpi_missing()
  if why then H.row{name = name, value = "n/a", note = why} return end
  -- The two jobs in turn, 3 times each: the medians of their medians.
  local one, two = {}, {}
  for _ = 1, quick and 1 or 3 do
    one[#one + 1] = tonumber(mpirun(1, "train")[1]:match("^train (%S+)"))
    two[#two + 1] = tonumber(mpirun(2, "train")[1]:match("^train (%S+)"))
  end
  local t1, t2 = H.median(one), H.median(two)
  H.row{name = name, value = per_second(t2), unit = "steps/s",
        note = string.format("%.1f ms/step; each rank 128 rows, one fused allreduce of the gradients", t2 * 1e3)}
  H.row{peer = "1 rank, batch 256", peer_value = per_second(t1), ratio = t1 / t2,
        note = string.format("%.1f ms/step; %d cores shared by the ranks", t1 * 1e3, cores)}
end)

section("MPI training steps/s, overlapped vs synchronous averaging, 2 ranks", function()
  local name = "MLP 784-512-512-10, SGD, global batch 256, 2 ranks, averaging overlapped with the backward pass"
  local why = mpi_missing()
  if why then H.row{name = name, value = "n/a", note = why} return end
  local overlapped, synchronous = mpirun(2, "overlap")[1]:match("^overlap (%S+) (%S+)")
  overlapped, synchronous = tonumber(overlapped), tonumber(synchronous)
  H.row{name = name, value = per_second(overlapped), unit = "steps/s",
        note = string.format("%.1f ms/step; fusion_threshold 1 MiB: the allreduces of the last layers run during " ..
                             "the backward pass of the first", overlapped * 1e3)}
  H.row{peer = "synchronous (overlap=false), same job", peer_value = per_second(synchronous),
        ratio = synchronous / overlapped,
        note = string.format("%.1f ms/step; one fused allreduce after the backward pass; %d cores shared by the ranks",
                             synchronous * 1e3, cores)}
end)

H.close_python_peers()
if #H.rows == 0 then
  io.stderr:write(string.format("BENCH_ONLY=%s matches no section; the sections:\n  %s\n", tostring(H.only),
                                table.concat(H.sections, "\n  ")))
  os.exit(1)
end

-- Report ------------------------------------------------------------------------
local cpu = output_of("grep -m1 'model name' /proc/cpuinfo"):match(":%s*([^\n]+)") or "unknown CPU"
local peers = {string.format("C peers (bench/peers.c, %s %s -fopenmp): %s", cc, cflags,
                             c_peers and "built" or "not run: " .. c_peers_why),
               "OpenBLAS cblas_sgemm: " .. (blas and "loaded" or "not run: " .. blas_why)}
if cuda_lib or cuda_lib_why then
  peers[#peers + 1] = string.format("CUDA peers (bench/cuda_peers.cu, nvcc %s): %s", H.cuda_archs,
                                    cuda_lib and "built, on " .. (gpu_name or "GPU:0") or "not run: " .. cuda_lib_why)
end
for _, p in ipairs(H.python_peers_status()) do
  peers[#peers + 1] = string.format("%s (%s): %s", p.module, H.python,
                                    p.version and p.version or "not run: " .. p.why)
end
local when = os.date("!%Y-%m-%d %H:%M UTC")
local machine = string.format("%s, %s cores (%s)", cpu, cores, first_line("uname -sr"))
local load = string.format("load average %s at the start, %s at the end", load_at_start, load_average())
local intro = {
  string.format("moonflow benchmarks, %s, on %s; %s.", when, machine, load),
  "",
  string.format("Each figure is the median of %d batches of about %.2f s, every contender of a row timed in turn " ..
                "in each round (ours, peer, ours, peer, ...). peer/moonflow is the peer's time over moonflow's " ..
                "(memory for the memory row): above 1, moonflow is faster. Targets are issues 13's, 14's, 15's and 16's.",
                H.reps, H.batch_seconds),
  "",
  "Peers:",
  "",
}
for _, p in ipairs(peers) do intro[#intro + 1] = "- " .. p end
if H.only then
  table.insert(intro, 2, string.format("\nOnly the sections whose name matches one of the Lua patterns `%s` " ..
                                       "(BENCH_ONLY).", H.only))
end


local rows = H.rows
print(table.concat(intro, "\n"))
print()
io.write(report.text(rows))
local md_intro = {unpack(intro)}
table.insert(md_intro, 2, "\n![moonflow against its peers](bench.svg)")
report.write(out_dir .. "/bench.md", report.markdown(rows, md_intro))
report.write(out_dir .. "/bench.svg", report.svg(report.comparisons(rows), "moonflow against its peers",
                                                 when .. ", " .. machine .. "; " .. load))
print(string.format("\nwrote %s/bench.md and %s/bench.svg", out_dir, out_dir))

-- A full run into docs/ also renews README.md's summary, between its markers.
if out_dir == "docs" then
  local f = assert(io.open("README.md"))
  local readme = f:read("*a")
  f:close()
  local summary = table.concat({
    string.format("Last full run: %s, on %s; %s.", when, machine, load),
    "",
    "![moonflow against its peers](docs/bench.svg)",
    "",
    report.targets_markdown(rows),
    "Every row, peer and note: [docs/bench.md](docs/bench.md).",
    ""}, "\n")
  local renewed = report.splice(readme, "<!-- bench:begin -->", "<!-- bench:end -->", summary)
  if renewed then
    report.write("README.md", renewed)
    print("renewed README.md's benchmark summary")
  else
    print("README.md has no <!-- bench:begin --> / <!-- bench:end --> markers: its summary is not renewed")
  end
end
