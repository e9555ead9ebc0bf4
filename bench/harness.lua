-- bench/harness.lua — how `make bench` measures: contenders timed interleaved
-- (ours, peer, ours, peer, ...) with the median of several repeats, the C
-- peers compiled for the run, the Python peers as long-lived processes driven
-- over a pipe, and the rows of the report. It knows nothing of moonflow, so
-- its spec runs it on fake contenders.
--
-- A contender is {label =, run = function(calls) -> seconds or nil, why}
-- plus optional `units` (units of work per call: loop iterations, runs) and
-- `target` (the speed ratio an issue asks of moonflow against this peer).
-- One that cannot run carries `why` instead of `run`.
local ffi = require("ffi")

local M = {}

-- BENCH_QUICK=1 shortens every measurement for a smoke run; the full bench
-- takes the median of 7 batches of about 0.2 s per contender.
M.quick = os.getenv("BENCH_QUICK") == "1"
M.reps = M.quick and 3 or 7
M.batch_seconds = M.quick and 0.02 or 0.2
-- A pause before each batch: OpenBLAS's and OpenMP's idle threads spin for
-- a while after their last job (OpenBLAS's up to about 0.1 s), and on a
-- machine with few cores they would take cores from the next contender.
M.settle_seconds = tonumber(os.getenv("BENCH_SETTLE") or "") or 0.1
-- BENCH_ONLY (`make bench ONLY=...`): Lua patterns separated by commas; only
-- the sections whose name one of them matches run.
M.only = os.getenv("BENCH_ONLY")
if M.only == "" then M.only = nil end

local function selected(name)
  if not M.only then return true end
  for pattern in M.only:gmatch("[^,]+") do
    if name:find(pattern) then return true end
  end
  return false
end

ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *ts);
int poll(void *fds, unsigned long nfds, int timeout_ms);
typedef void (*bench_signal_handler)(int);
bench_signal_handler signal(int signum, bench_signal_handler handler);
]]
local CLOCK_MONOTONIC = 1
-- A Python peer that has exited (a missing interpreter exits at once) must not
-- kill this process when it writes the peer's next request: with SIGPIPE
-- (13 on Linux) ignored the write fails, and the reply read after it says
-- how the peer ended.
ffi.C.signal(13, ffi.cast("bench_signal_handler", 1))  -- SIG_IGN
local ts = ffi.new("bench_timespec")
function M.now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

function M.median(values)
  assert(#values > 0, "median of no values")
  local sorted = {}
  for i, v in ipairs(values) do sorted[i] = v end
  table.sort(sorted)
  local mid = math.floor(#sorted / 2)
  return #sorted % 2 == 1 and sorted[mid + 1] or (sorted[mid] + sorted[mid + 1]) / 2
end

-- A contender with the options every kind takes: units (of work per call),
-- target, note and budget (the most seconds its repeats may take: one whose
-- single call takes long runs fewer rounds, at least one).
local function contender(label, options, run)
  options = options or {}
  return {label = label, units = options.units, target = options.target, note = options.note,
          budget = options.budget, run = run}
end
M.contender = contender

-- A contender timed in this process: one call of fn is `units` units of work.
function M.lua_contender(label, fn, options)
  return contender(label, options, function(calls)
    local t0 = M.now()
    for _ = 1, calls do fn() end
    return M.now() - t0
  end)
end

-- A contender whose calls time themselves: fn() does untimed work first
-- (freeing the previous call's graph, collecting garbage) and returns the
-- seconds of its timed part.
function M.timed_contender(label, fn, options)
  return contender(label, options, function(calls)
    local seconds = 0
    for _ = 1, calls do seconds = seconds + fn() end
    return seconds
  end)
end

-- Calls per batch so that one batch takes about batch_seconds; the first
-- calls warm up plans, buffers and JIT traces. Also returns the seconds of
-- the first call when it alone took a batch or more (then no more were run).
local function calibrate(c)
  local calls = 1
  local t, why = c.run(calls)
  if not t then return nil, why end
  local single = t >= M.batch_seconds / 4 and t or nil
  while t < M.batch_seconds / 4 and calls < 2 ^ 24 do
    calls = calls * 4
    t, why = c.run(calls)
    if not t then return nil, why end
  end
  return math.max(1, math.floor(calls * M.batch_seconds / math.max(t, 1e-9) + 0.5)), single
end

-- Seconds per unit of each contender: `reps` rounds, each running every
-- contender once in turn, so that a change of load on the machine hits all
-- alike; the median of the rounds. A contender that fails gets `why` and no
-- time. One with a budget whose single calibration call took long keeps
-- that call as its first sample and runs only the rounds its budget allows
-- (c.samples says how many it got).
function M.interleave(contenders)
  local calls, samples, rounds = {}, {}, {}
  for i, c in ipairs(contenders) do
    samples[i], rounds[i] = {}, M.reps
    if c.run then
      local n, single_or_why = calibrate(c)
      if not n then
        c.why = "failed: " .. tostring(single_or_why)
      else
        local single = single_or_why
        calls[i] = n
        if c.budget and single and single * M.reps > c.budget then
          samples[i][1] = single / (c.units or 1)
          rounds[i] = math.max(0, math.floor(c.budget / single) - 1)
        end
      end
    end
  end
  for r = 1, M.reps do
    for i, c in ipairs(contenders) do
      if calls[i] and r <= rounds[i] then
        if M.settle_seconds > 0 then ffi.C.poll(nil, 0, math.floor(M.settle_seconds * 1000)) end
        local t, why = c.run(calls[i])
        if t then
          samples[i][#samples[i] + 1] = t / calls[i] / (c.units or 1)
        else
          calls[i], c.why = nil, "failed: " .. tostring(why)
        end
      end
    end
  end
  local medians = {}
  for i, c in ipairs(contenders) do
    medians[i] = calls[i] and M.median(samples[i]) or nil
    c.samples = calls[i] and #samples[i] or nil
  end
  return medians
end

-- Rows -------------------------------------------------------------------------
-- A row is moonflow's figure, or a peer's figure under the row above it:
-- {name, value, unit, peer, peer_value, ratio, target, met, note}. ratio is
-- the peer's time over moonflow's (or the peer's memory over moonflow's):
-- above 1, moonflow is faster or smaller. target is the ratio an issue asks
-- for; met says whether the run reached it (or an absolute goal).
M.rows = {}

function M.row(r)
  M.rows[#M.rows + 1] = r
  return r
end

-- Runs a benchmark section (unless BENCH_ONLY leaves it out); one that fails
-- becomes a row saying why.
-- M.sections: the name of every section met, run or not.
M.sections = {}
function M.section(name, fn)
  M.sections[#M.sections + 1] = name
  if not selected(name) then return end
  local ok, err = pcall(fn)
  if not ok then M.row{name = name, value = "n/a", note = "failed: " .. tostring(err):gsub("\n.*", "")} end
end

-- Measures ours against peers, interleaved, and adds the rows: moonflow's
-- figure, then one per peer with the speed ratio. spec:
--   name, ours (a contender), peers (contenders; a best_of group counts as one),
--   figure(seconds per unit) -> text, unit
--   goal: the most seconds per unit the issues allow moonflow (optional);
--   rate: the figure is a rate (rows/s), so the goal reads ">=" its figure
--   note: about moonflow's figure; note_of(seconds): the same, from the time
-- Returns moonflow's seconds per unit and each peer's (by label).
function M.compare(spec)
  local all, owner = {spec.ours}, {}
  for _, p in ipairs(spec.peers or {}) do
    for _, c in ipairs(p.choices or {p}) do
      all[#all + 1] = c
      owner[#all] = p
    end
  end
  local medians = M.interleave(all)
  local ours = medians[1]
  if not ours then
    M.row{name = spec.name, value = "n/a", note = spec.ours.why}
    return nil
  end
  local note = spec.note_of and spec.note_of(ours) or spec.note
  M.row{name = spec.name, value = spec.figure(ours), unit = spec.unit,
        target = spec.goal and (spec.rate and ">= " or "<= ") .. spec.figure(spec.goal) .. " " .. spec.unit,
        met = spec.goal and ours <= spec.goal, note = note}
  local peer_times = {}
  for _, p in ipairs(spec.peers or {}) do
    -- a group's best choice stands for it
    local best, best_label, why
    for i = 2, #all do
      if owner[i] == p then
        if medians[i] and (not best or medians[i] < best) then best, best_label = medians[i], all[i].label end
        why = why or all[i].why
      end
    end
    peer_times[p.label] = best
    if best then
      local ratio = best / ours
      local note = p.choices and ("best: " .. best_label) or p.note
      if p.samples and p.samples < M.reps then
        local fewer = string.format("median of %d within its %g s budget", p.samples, p.budget)
        note = note and note .. "; " .. fewer or fewer
      end
      M.row{peer = p.label, peer_value = spec.figure(best), ratio = ratio,
            target = p.target, met = p.target and ratio >= p.target, note = note}
    else
      M.row{peer = p.label, peer_value = "not run", note = why or p.why}
    end
  end
  return ours, peer_times
end

-- A peer measured as the best of several settings (PyTorch's thread counts).
function M.best_of(label, choices, options)
  options = options or {}
  return {label = label, choices = choices, target = options.target}
end

-- Resident memory -------------------------------------------------------------
function M.rss_bytes()
  local f = io.open("/proc/self/statm", "r")
  if not f then return nil end
  f:read("*n")
  local pages = f:read("*n")
  f:close()
  return pages * 4096
end

-- C peers ---------------------------------------------------------------------
ffi.cdef[[
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void peer_axpb(const float *x, float *y, int64_t n);
void peer_axpb_omp(const float *x, float *y, int64_t n, int threads);
void peer_tanh_chain(const float *x, float *y, int64_t n, float a, float b, float c);
void peer_tanh_chain_omp(const float *x, float *y, int64_t n, float a, float b, float c, int threads);
]]

-- A C (or CUDA) file of bench/ compiled now into build/<name>.so with the
-- given compiler and flags (those that make a shared library included), plus
-- extra (link flags); returns the loaded library or nil and why.
local function compiled(source, name, cc, flags, build, extra)
  local so = build .. "/" .. name .. ".so"
  os.remove(so)
  -- LuaJIT's popen close does not report the exit status: the echo does.
  local p = io.popen(string.format("%s %s -o %s %s %s 2>&1 && echo BENCH_CC_OK", cc, flags, so, source, extra))
  local out = p:read("*a")
  p:close()
  if not out:find("BENCH_CC_OK") then return nil, "cannot compile " .. source .. ": " .. out:gsub("\n", " ") end
  local loaded, lib = pcall(ffi.load, so:find("/") == 1 and so or "./" .. so)
  if not loaded then return nil, tostring(lib) end
  return lib
end

-- bench/peers.c, with OpenMP.
function M.c_peers(cc, cflags, build)
  return compiled("bench/peers.c", "bench_peers", cc, cflags .. " -shared -fPIC -fopenmp", build, "-lm")
end

-- bench/frames.c, linked to the build's libmoonflow.so (found again at run
-- time through its rpath) and OpenBLAS.
function M.c_frames(cc, cflags, build)
  return compiled("bench/frames.c", "bench_frames", cc, cflags .. " -shared -fPIC -Isrc/include", build,
                  string.format("-L%s -Wl,-rpath,\"$(cd %s && pwd)\" -lmoonflow -lopenblas", build, build))
end

function M.blas()
  for _, name in ipairs({"openblas", "libopenblas.so.0"}) do
    local ok, lib = pcall(ffi.load, name)
    if ok then return lib end
  end
  return nil, "libopenblas not found"
end

-- CUDA peers ------------------------------------------------------------------
ffi.cdef[[
typedef struct cuda_peer cuda_peer;
cuda_peer *cuda_peer_sgemm_new(int n, char *why, size_t why_size);
cuda_peer *cuda_peer_copy_new(int64_t n, char *why, size_t why_size);
cuda_peer *cuda_peer_axpb_new(int64_t n, char *why, size_t why_size);
double cuda_peer_run(cuda_peer *p, int calls, char *why, size_t why_size);
int cuda_peer_output(cuda_peer *p, int64_t first, int64_t count, float *host, char *why, size_t why_size);
void cuda_peer_free(cuda_peer *p);
int cuda_peer_sync(char *why, size_t why_size);
int cuda_peer_device_name(char *name, size_t name_size, char *why, size_t why_size);
]]

local function executable(path)
  return os.execute(string.format("test -x '%s'", path)) == 0
end

-- nvcc and the CUDA folder it belongs to: $CUDA_HOME/bin/nvcc, else the first
-- nvcc on $PATH (as the Makefile looks for it); nil and why when neither.
-- cuda_home and path default to the environment's CUDA_HOME and PATH.
function M.find_nvcc(cuda_home, path)
  cuda_home, path = cuda_home or os.getenv("CUDA_HOME") or "", path or os.getenv("PATH") or ""
  if cuda_home ~= "" and executable(cuda_home .. "/bin/nvcc") then return cuda_home .. "/bin/nvcc", cuda_home end
  for dir in path:gmatch("[^:]+") do
    if executable(dir .. "/nvcc") then return dir .. "/nvcc", (dir:gsub("/bin/?$", "")) end
  end
  return nil, "nvcc not found (neither $CUDA_HOME/bin/nvcc nor on $PATH)"
end

-- The nvcc targets: the library's (Makefile's CUDA_ARCHS) unless overridden.
M.cuda_archs = os.getenv("CUDA_ARCHS") or
               "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]"

-- bench/cuda_peers.cu compiled with find_nvcc(cuda_home, path)'s nvcc
-- (warnings are errors) and linked to cuBLAS, found again at run time through
-- an rpath into the CUDA folder; returns the loaded library, or nil and why
-- (nvcc missing, a compile error).
function M.cuda_peers(build, cuda_home, path)
  local nvcc, home_or_why = M.find_nvcc(cuda_home, path)
  if not nvcc then return nil, home_or_why end
  cuda_home = home_or_why
  local archs = {}
  for word in M.cuda_archs:gmatch("%S+") do archs[#archs + 1] = "'" .. word:gsub("'", "") .. "'" end  -- [..] unglobbed
  -- nvcc's own programs crash with sanitizer runtimes preloaded (the ASan suite's).
  return compiled("bench/cuda_peers.cu", "bench_cuda_peers", "env -u LD_PRELOAD " .. nvcc,
                  "-O2 -shared -Xcompiler -fPIC -Werror all-warnings " .. table.concat(archs, " "), build,
                  string.format("-lcublas -Xlinker -rpath,%s/lib64", cuda_home))
end

-- A contender of bench/cuda_peers.cu: peer is what a cuda_peer_*_new made
-- (NULL with why written into `why`, a char[WHY_SIZE]). Its calls time
-- themselves with CUDA events. c.output(first, count, host) copies its output
-- out; c.close() frees its device memory now rather than at collection.
M.WHY_SIZE = 512
function M.cuda_contender(lib, label, peer, why, options)
  if peer == nil then return {label = label, why = ffi.string(why)} end
  peer = ffi.gc(peer, lib.cuda_peer_free)
  local c = contender(label, options, function(calls)
    local seconds = lib.cuda_peer_run(peer, calls, why, M.WHY_SIZE)
    if seconds < 0 then return nil, ffi.string(why) end
    return seconds * calls
  end)
  c.output = function(first, count, host)
    assert(lib.cuda_peer_output(peer, first, count, host, why, M.WHY_SIZE) == 0, ffi.string(why))
  end
  c.close = function()
    if peer then lib.cuda_peer_free(ffi.gc(peer, nil)) end
    peer, c.run = nil, nil
    c.why = c.why or "closed"
  end
  return c
end

-- Python peers ----------------------------------------------------------------
-- One process per framework (bench/peers.py), started on first use and kept
-- until close_python_peers. Its replies come back through a named pipe, as
-- LuaJIT's popen is one-way; the shell writes "exit N" there when Python
-- ends, so a crash is read as such rather than waited on forever.
M.python = os.getenv("BENCH_PYTHON") or "python3"
M.python_log = (os.getenv("BENCH_BUILD") or "build") .. "/bench-python.log"
M.peers_script = "bench/peers.py"
local processes = {}

local Process = {}
Process.__index = Process

-- Sends one command; returns the reply's value ("" for a bare ok), or nil
-- and why.
function Process:request(line)
  if self.dead then return nil, self.dead end
  self.stdin:write(line, "\n")
  self.stdin:flush()
  local reply = self.replies:read("*l")
  local status, rest = (reply or ""):match("^(%S+) ?(.*)$")
  if status == "ok" then return rest end
  if status == "err" then return nil, rest end
  self.dead = "python exited (" .. (reply or "no reply") .. "; see " .. M.python_log .. ")"
  return nil, self.dead
end

local function start_python(module)
  local fifo = os.tmpname()
  os.remove(fifo)
  if not os.execute("mkfifo " .. fifo) then return nil, "cannot make a pipe at " .. fifo end
  local cmd = string.format("{ %s -u %s; echo \"exit $?\"; } >%s 2>>%s", M.python, M.peers_script, fifo, M.python_log)
  local proc = setmetatable({module = module, fifo = fifo, next_id = 0}, Process)
  proc.stdin = io.popen(cmd, "w")
  proc.replies = io.open(fifo, "r")
  processes[#processes + 1] = proc
  local version, why = proc:request("version " .. module)
  if not version then
    if why:find("exit 127") then why = M.python .. " not found"
    elseif why:find("ModuleNotFoundError") then
      why = string.format("not installed in %s (make bench-peers installs it)", M.python)
    else why = "cannot import " .. module .. ": " .. why end
    return nil, why
  end
  proc.version = version
  return proc
end

-- The process for a module ("numpy", "torch", "tensorflow"), or nil and why;
-- each is tried once.
local by_module = {}
function M.python_peer(module)
  if by_module[module] == nil then
    local proc, why = start_python(module)
    by_module[module] = proc or {why = why}
  end
  local entry = by_module[module]
  if entry.why then return nil, entry.why end
  return entry
end

-- What became of each Python peer tried: {module, version or nil, why}.
function M.python_peers_status()
  local list = {}
  for module, entry in pairs(by_module) do
    list[#list + 1] = {module = module, version = entry.version, why = entry.why}
  end
  table.sort(list, function(a, b) return a.module < b.module end)
  return list
end

-- A contender running workload(args...) of bench/peers.py in the process of
-- `module`; one that cannot be set up carries why.
function M.python_contender(module, label, workload, args, options)
  local c = contender(label, options)
  local proc, why = M.python_peer(module)
  if not proc then c.why = why; return c end
  proc.next_id = proc.next_id + 1
  local id = "w" .. proc.next_id
  local words = {"setup", id, workload}
  for i, a in ipairs(args or {}) do words[3 + i] = a end
  local ok, setup_why = proc:request(table.concat(words, " "))
  if not ok then c.why = setup_why; return c end
  c.run = function(calls)
    local seconds, run_why = proc:request("run " .. id .. " " .. calls)
    if not seconds then return nil, run_why end
    return tonumber(seconds)
  end
  -- Another figure the workload measured (bytes per op), or nil and why.
  c.figure = function(key)
    local value, figure_why = proc:request("figure " .. id .. " " .. key)
    if not value then return nil, figure_why end
    return tonumber(value)
  end
  return c
end

-- A Python literal list for peers.py's arguments: {784, 512} -> [784,512].
function M.py_list(t) return "[" .. table.concat(t, ",") .. "]" end

-- Ends every Python process; python_peers_status still tells what they were.
function M.close_python_peers()
  for _, proc in ipairs(processes) do
    if not proc.dead then proc.stdin:write("quit\n") end
    proc.stdin:close()
    proc.replies:close()
    os.remove(proc.fifo)
    proc.dead = "closed"
  end
  processes = {}
end

return M
