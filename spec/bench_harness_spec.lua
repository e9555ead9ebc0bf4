-- The bench's machinery (bench/harness.lua, bench/report.lua, bench/peers.py)
-- on fake timings: the order contenders run in, medians, ratios and targets,
-- the report's table and chart, and the Python peer protocol. Nothing here is
-- timed.
package.path = "bench/?.lua;" .. package.path
local H = require("harness")
local report = require("report")

-- A contender whose batches take the given seconds in turn (per call), and
-- that records its label in `order` each time it runs.
local function fake(label, seconds, order, options)
  local k = 0
  local c = {label = label, units = options and options.units, target = options and options.target}
  c.run = function(calls)
    k = k + 1
    if order then order[#order + 1] = label end
    return seconds[math.min(k, #seconds)] * calls
  end
  return c
end

describe("bench harness", function()
  local saved_reps, saved_batch, saved_settle
  before_each(function()
    saved_reps, saved_batch, saved_settle = H.reps, H.batch_seconds, H.settle_seconds
    -- one call of a fake takes >= batch_seconds / 4, so calibration runs one
    -- call; fakes leave no threads spinning, so no pause between them
    H.reps, H.batch_seconds, H.settle_seconds = 3, 1, 0
    H.rows = {}
  end)
  after_each(function() H.reps, H.batch_seconds, H.settle_seconds = saved_reps, saved_batch, saved_settle end)

  it("takes the median of an odd and an even number of values", function()
    assert.are.equal(2, H.median({3, 1, 2}))
    assert.are.equal(2.5, H.median({4, 1, 3, 2}))
    assert.are.equal(7, H.median({7}))
    assert.has_error(function() H.median({}) end, "median of no values")
  end)

  it("runs contenders in turn, round after round, and takes each one's median", function()
    local order = {}
    -- the first value is the calibration call, then one per round
    local a = fake("a", {1, 5, 1, 3}, order)
    local b = fake("b", {2, 2, 8, 4}, order, {units = 4})
    local medians = H.interleave({a, b})
    assert.are.same({"a", "b", "a", "b", "a", "b", "a", "b"}, order)
    assert.are.equal(3, medians[1])      -- median of 5, 1, 3
    assert.are.equal(4 / 4, medians[2])  -- median of 2, 8, 4 per call, 4 units per call
  end)

  it("calibrates the calls per batch to about batch_seconds", function()
    local calls_seen = {}
    local c = {label = "fast", run = function(calls)
      calls_seen[#calls_seen + 1] = calls
      return calls * 0.01
    end}
    H.interleave({c})
    -- 1 call (0.01 s), 4, 16 (0.16 s), 64 (0.64 s >= 1 / 4): 100 calls per batch
    assert.are.same({1, 4, 16, 64, 100, 100, 100}, calls_seen)
  end)

  it("gives a contender that fails a reason and no time", function()
    local c = {label = "broken", run = function() return nil, "boom" end}
    local medians = H.interleave({fake("ok", {1}), c})
    assert.are.equal(1, medians[1])
    assert.is_nil(medians[2])
    assert.are.equal("failed: boom", c.why)
  end)

  it("reports ratios, targets, the best of a group and peers that could not run", function()
    local ours, peers = H.compare{
      name = "thing", unit = "ms", goal = 3e-3,
      figure = function(t) return string.format("%.1f", t * 1e3) end,
      ours = fake("moonflow", {2e-3}),
      peers = {fake("slow peer", {8e-3}, nil, {target = 1.5}),
               fake("fast peer", {1e-3}, nil, {target = 0.8}),
               H.best_of("grouped", {fake("1 thread", {6e-3}), fake("2 threads", {4e-3})}),
               {label = "absent", why = "not installed"}}}
    assert.are.equal(2e-3, ours)
    assert.are.equal(4e-3, peers.grouped)
    local rows = H.rows
    assert.are.equal(5, #rows)
    assert.are.same({"thing", "2.0", "ms", "<= 3.0 ms", true},
                    {rows[1].name, rows[1].value, rows[1].unit, rows[1].target, rows[1].met})
    assert.are.same({"slow peer", "8.0", 4, true}, {rows[2].peer, rows[2].peer_value, rows[2].ratio, rows[2].met})
    assert.are.same({"fast peer", 0.5, false}, {rows[3].peer, rows[3].ratio, rows[3].met})
    assert.are.same({"grouped", 2, "best: 2 threads"}, {rows[4].peer, rows[4].ratio, rows[4].note})
    assert.are.same({"absent", "not run", "not installed"}, {rows[5].peer, rows[5].peer_value, rows[5].note})
  end)

  it("turns a failing section into a row saying why", function()
    H.section("doomed", function() error("no such op\nstack") end)
    assert.are.equal("doomed", H.rows[1].name)
    assert.matches("failed: .*no such op$", H.rows[1].note)
  end)

  it("reads a rate's goal as a least figure", function()
    H.compare{name = "rows", unit = "M rows/s", rate = true, goal = 1 / 2e6,
              figure = function(t) return string.format("%.1f", 1 / t / 1e6) end,
              ours = fake("moonflow", {1 / 4e6})}
    assert.are.same({"4.0", ">= 2.0 M rows/s", true}, {H.rows[1].value, H.rows[1].target, H.rows[1].met})
  end)

  it("runs only the sections one of BENCH_ONLY's patterns matches", function()
    local saved_only, ran = H.only, {}
    H.only = "tf%.data,^matmul 256"
    for _, name in ipairs({"tf.data map", "matmul 256x256", "matmul 1024x1024", "tf.data batch", "tfxdata"}) do
      H.section(name, function() ran[#ran + 1] = name end)
    end
    H.only = saved_only
    assert.are.same({"tf.data map", "matmul 256x256", "tf.data batch"}, ran)
  end)

  it("keeps a slow contender's calibration call and runs only the rounds its budget allows", function()
    local order = {}
    -- one call takes 2 s (a batch is 1 s here): 3 rounds would take 6 s, over the budget of 5
    local slow = fake("slow", {2, 4, 9}, order, {units = 2})
    slow.budget = 5
    local medians = H.interleave({fake("a", {1, 1, 1, 1}, order), slow})
    assert.are.same({"a", "slow", "a", "slow", "a", "a"}, order)
    assert.are.equal(3 / 2, medians[2])  -- median of 2 (the calibration) and 4, per unit
    assert.are.equal(2, slow.samples)
    H.compare{name = "slow thing", unit = "s", figure = tostring, ours = fake("moonflow", {1}),
              peers = {H.contender("slow peer", {budget = 5}, function(calls) return 2 * calls end)}}
    assert.are.equal("median of 2 within its 5 s budget", H.rows[2].note)
  end)

  it("sums the seconds a self-timed contender's calls report", function()
    local calls = 0
    local c = H.timed_contender("builds", function() calls = calls + 1; return 0.5 end, {units = 10})
    assert.are.equal(1.5, c.run(3))
    assert.are.equal(3, calls)
    assert.are.same({"builds", 10}, {c.label, c.units})
  end)
end)

describe("bench report", function()
  local rows = {
    {name = "matmul", value = "60.0", unit = "GFLOP/s"},
    {peer = "cblas | direct", peer_value = "57.0", ratio = 0.95, target = 0.95, met = true},
    {peer = "NumPy", peer_value = "15.0", ratio = 4},
    {name = "a < b & c", value = "3", unit = "ms", target = "<= 2 ms", met = false},
    {peer = "C", peer_value = "1.5", ratio = 0.05},
  }

  it("prints an aligned table with ratios and targets", function()
    local text = report.text(rows)
    local lines = {}
    for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(7, #lines)
    assert.matches("^benchmark", lines[1])
    assert.matches("^%-+  %-+", lines[2])
    assert.matches("0%.95x  >= 0%.95x met", lines[4])
    assert.matches("4%.00x", lines[5])
    assert.matches("<= 2 ms missed", lines[6])
    assert.matches("0%.050x", lines[7])
    -- the ratio column is right-aligned: "4.00x" ends where "0.95x" ends
    assert.are.equal(lines[4]:find("0.95x", 1, true) + 4, lines[5]:find("4.00x", 1, true) + 4)
  end)

  it("writes markdown with the intro and escaped cells", function()
    local md = report.markdown(rows, {"intro line"})
    assert.matches("^intro line\n\n| benchmark | moonflow |", md)
    assert.matches("|---|---|---|---|---|---|---|---|\n", md, 1, true)
    assert.matches("| cblas \\| direct | 57.0 | 0.95x | >= 0.95x met |", md, 1, true)
    local n = 0
    for _ in md:gmatch("\n|") do n = n + 1 end
    assert.are.equal(2 + #rows, n)
  end)

  it("summarises the rows with targets under their benchmark's figure", function()
    assert.are.equal(table.concat({
      "| benchmark | moonflow | peer | peer's figure | peer/moonflow | target |",
      "|---|---|---|---|---|---|",
      "| matmul | 60.0 GFLOP/s | cblas \\| direct | 57.0 | 0.95x | >= 0.95x met |",
      "| a < b & c | 3 ms |  |  |  | <= 2 ms missed |",
      ""}, "\n"), report.targets_markdown(rows))
  end)

  it("replaces what lies between two markers", function()
    local text = "intro\n<!-- b -->\nold figures\n<!-- e -->\nrest\n"
    assert.are.equal("intro\n<!-- b -->\nnew\n<!-- e -->\nrest\n", report.splice(text, "<!-- b -->", "<!-- e -->", "new\n"))
    assert.is_nil(report.splice("no markers", "<!-- b -->", "<!-- e -->", "new\n"))
    assert.is_nil(report.splice("<!-- e --> <!-- b -->", "<!-- b -->", "<!-- e -->", "new\n"))
  end)

  it("charts every comparison as a bar on a log2 axis centred on 1x", function()
    local comparisons = report.comparisons(rows)
    assert.are.same({{label = "matmul vs cblas | direct", ratio = 0.95, target = 0.95},
                     {label = "matmul vs NumPy", ratio = 4},
                     {label = "a < b & c vs C", ratio = 0.05}}, comparisons)
    local svg = report.svg({{label = "x < y", ratio = 4, target = 2}, {label = "z", ratio = 0.25},
                            {label = "even", ratio = 1, target = 2}}, "T", "S")
    assert.matches("^<svg xmlns=\"http://www.w3.org/2000/svg\"", svg)
    assert.matches("</svg>\n$", svg)
    assert.matches(">x &lt; y</text>", svg, 1, true)
    -- axis 1/4x .. 4x over x = 520 .. 940: 1x at 730, 4x at 940, 2x at 835
    assert.matches('<rect x="730.0" y="66" width="210.0" height="14" fill="#3a8f4f"/>', svg, 1, true)
    assert.matches('<rect x="520.0" y="88" width="210.0" height="14" fill="#d9822b"/>', svg, 1, true)
    assert.matches('<line x1="835.0" y1="63" x2="835.0" y2="83" stroke="#000" stroke-width="2">', svg, 1, true)
    -- the figure goes past the bar, or past the target's tick where that is further
    assert.matches('<text x="944.0" y="77">4.00x</text>', svg, 1, true)
    assert.matches('<text x="839.0" y="121">1.00x</text>', svg, 1, true)
    assert.matches(">1/4x</text>", svg, 1, true)
    assert.matches(">4x</text>", svg, 1, true)
  end)
end)

-- What python3 prints running `source` (peers.py's serve loop on workloads
-- the source registers).
local function python_output(source)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(source)
  f:close()
  local p = io.popen("python3 " .. script .. " 2>&1")
  local out = p:read("*a")
  p:close()
  os.remove(script)
  return out
end

describe("bench Python peers", function()
  local saved_python, saved_log
  before_each(function()
    saved_python, saved_log = H.python, H.python_log
    H.python_log = os.tmpname()
  end)
  after_each(function()
    H.close_python_peers()
    os.remove(H.python_log)
    H.python, H.python_log = saved_python, saved_log
  end)

  it("starts a peer process that reports versions and errors over the pipe", function()
    H.python = "python3"
    local proc = assert(H.python_peer("json"))
    local p = io.popen("python3 -c 'import json; print(json.__version__)'")
    local version = p:read("*l")
    p:close()
    assert.are.equal(version, proc.version)
    local c = H.python_contender("json", "nothing", "no_such_workload", {1, 2})
    assert.is_nil(c.run)
    assert.matches("no workload named no_such_workload", c.why, 1, true)
    local _, why = H.python_peer("no_such_module_for_the_bench")
    assert.are.equal("not installed in python3 (make bench-peers installs it)", why)
  end)

  it("sums a self-timed workload's seconds and reads the figures it measured", function()
    -- peers.py's serve loop on a workload registered here, through python3
    local out = python_output([[
import sys
sys.path.insert(0, "bench")
import peers
made = []
@peers.workload
def fake_build(seconds):
    def call():
        made.append(1)
        timed.figures["calls"] = len(made)
        return seconds
    timed = peers.Timed(call)
    return timed
lines = ["setup a fake_build 0.25", "run a 4", "figure a calls", "figure a bytes", "quit"]
peers.serve(lines, print)
]])
    assert.are.equal("ok\nok 1\nok 4\nerr KeyError: 'workload a has measured no bytes'\n", out)
  end)

  it("runs a workload's finish at the end of each batch, inside its time", function()
    local out = python_output([==[
import sys, time
sys.path.insert(0, "bench")
import peers
calls, finishes = [], []
@peers.workload
def fake_gpu():
    return (lambda: calls.append(1)), None, (lambda: (finishes.append(1), time.sleep(0.05)))
replies = []
peers.serve(["setup a fake_gpu", "run a 3", "run a 2", "quit"], replies.append)
print(replies[0], [float(r.split()[1]) >= 0.05 for r in replies[1:]], len(calls), len(finishes))
]==])
    assert.are.equal("ok [True, True] 5 2\n", out)
  end)

  it("says when the Python interpreter is missing", function()
    H.python = "/nonexistent/python3"
    local proc, why = H.python_peer("peer_in_a_missing_python")
    assert.is_nil(proc)
    assert.are.equal("/nonexistent/python3 not found", why)
  end)
end)

describe("bench CUDA peers", function()
  it("finds nvcc under CUDA_HOME, else on PATH, and says when there is none", function()
    local home = os.tmpname()
    os.remove(home)
    assert.is_true(os.execute("mkdir -p " .. home .. "/bin && printf '#!/bin/sh\\n' > " .. home .. "/bin/nvcc && " ..
                              "chmod +x " .. home .. "/bin/nvcc") == 0)
    assert.are.same({home .. "/bin/nvcc", home}, {H.find_nvcc(home, "/nonexistent")})
    assert.are.same({home .. "/bin/nvcc", home}, {H.find_nvcc("", "/nonexistent:" .. home .. "/bin")})
    os.execute("rm -rf " .. home)
    local nvcc, why = H.find_nvcc(home, "/nonexistent:/usr/share")
    assert.is_nil(nvcc)
    assert.are.equal("nvcc not found (neither $CUDA_HOME/bin/nvcc nor on $PATH)", why)
  end)

  it("skips the CUDA peers' build cleanly when nvcc is missing", function()
    local lib, why = H.cuda_peers(os.getenv("BENCH_BUILD") or "build", "/nonexistent", "/nonexistent")
    assert.is_nil(lib)
    assert.are.equal("nvcc not found (neither $CUDA_HOME/bin/nvcc nor on $PATH)", why)
  end)

  it("builds bench/cuda_peers.cu without warnings and makes peers or says why not", function()
    if not H.find_nvcc() then
      pending("no nvcc: bench/cuda_peers.cu is built only where nvcc is")
      return
    end
    local build = os.tmpname()
    os.remove(build)
    assert.is_true(os.execute("mkdir -p " .. build) == 0)
    local lib, why = H.cuda_peers(build)
    os.execute("rm -rf " .. build)  -- the loaded library stays mapped
    assert.is_not_nil(lib, why)
    local ffi = require("ffi")
    local err = ffi.new("char[?]", H.WHY_SIZE)
    local peer = H.cuda_contender(lib, "axpb", lib.cuda_peer_axpb_new(1000, err, H.WHY_SIZE), err)
    if peer.why then  -- no GPU here: a CUDA error, not a crash
      assert.matches("^cuda%a+", peer.why)
      assert.is_nil(peer.run)
      return
    end
    assert.is_true(peer.run(4) > 0)
    local out = ffi.new("float[1000]")
    peer.output(0, 1000, out)
    for i = 0, 999 do assert.are.equal(i * 2 + 1, out[i]) end
    peer.close()
  end)
end)
