-- moonflow.mpi: the specs run spec/mpi/worker.lua under
-- `mpirun -np K --oversubscribe --allow-run-as-root` on this machine's
-- loopback and read what each rank printed ("rank R ok CHECK", "rank R
-- done"). Without Open MPI (mpirun, and libmoonflow_mpi.so, which make
-- builds where mpicc is) they are pending with the reason.
local core = require("moonflow.core")
local H = require("spec.helpers")
local tf = require("moonflow")

local build = core.library_path:match("^(.*)/libmoonflow%.so$") or "build"
local mpi_lib = build .. "/libmoonflow_mpi.so"

local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == 0 end
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function missing()
  if not have("mpirun") then return "needs Open MPI's mpirun (apt-get install openmpi-bin libopenmpi-dev)" end
  if not exists(mpi_lib) then return "needs " .. mpi_lib .. " (make builds it where mpicc is installed)" end
end

-- Runs the worker case on k ranks; returns its output, whether mpirun exited 0, and the seconds taken.
local function mpirun(k, case, env)
  local started = os.time()
  local out, status = H.shell(string.format(
    "%s MOONFLOW_MPI_LIB='%s' timeout 300 mpirun -np %d --oversubscribe --allow-run-as-root " ..
    "luajit spec/mpi/worker.lua %s", env or "", mpi_lib, k, case))
  return out, status == 0, os.difftime(os.time(), started)
end

-- Asserts that every one of k ranks finished and printed `checks` ok lines at least.
local function all_done(out, k, checks)
  for r = 0, k - 1 do
    assert.truthy(out:find("rank " .. r .. " done\n", 1, true), "rank " .. r .. " did not finish:\n" .. out)
    local n = 0
    for _ in out:gmatch("rank " .. r .. " ok [^\n]*\n") do n = n + 1 end
    assert.is_true(n >= checks, string.format("rank %d made %d checks, expected %d:\n%s", r, n, checks, out))
  end
end

describe("moonflow.mpi", function()
  it("refuses use before mpi.init() with a clear error", function()
    local why = missing()
    if why then pending(why) return end
    local out, status = H.shell(string.format(
      "MOONFLOW_MPI_LIB='%s' luajit -e 'local mpi = require(\"moonflow.mpi\"); print(pcall(mpi.rank)); " ..
      "print(pcall(mpi.allreduce, 1))'", mpi_lib))
    assert.equal(0, status, out)
    assert.matches("false\t[^\n]*mpi.rank: MPI is not initialized: call mpi.init%(%) first", out)
    assert.matches("false\t[^\n]*mpi.allreduce: MPI is not initialized", out)
  end)

  -- Worker cases and the checks each rank makes at least. collectives: 6
  -- dtypes x 5 shapes broadcast, the 4 numeric dtypes allreduced (sum, and
  -- average for floats), every shape with a dimension allgathered.
  local CASES = {
    {"collectives", "allreduce, allgather and broadcast every dtype and odd shape", 30 + 4 * 5 + 2 * 5 + 6 * 4},
    {"gradients", "gradients match central differences of the job's loss", 10},
    {"bad_input", "refuses bad input with errors naming the op and every rank's value", 12},
    {"control_flow", "runs inside while_loop and cond", 3},
    {"overlap", "overlaps the averaging of gradients with the backward pass, with the synchronous results", 2},
  }
  for _, k in ipairs({2, 3}) do
    for _, c in ipairs(CASES) do
      it(c[2] .. " on " .. k .. " ranks", function()
        local why = missing()
        if why then pending(why) return end
        local out, ok = mpirun(k, c[1])
        assert.is_true(ok, out)
        all_done(out, k, c[3])
        if c[1] == "collectives" then
          assert.truthy(out:find("rank 0 ok allgather bool [1,7,3]", 1, true), out)
          assert.truthy(out:find("rank " .. (k - 1) .. " ok allreduce average float64 []", 1, true), out)
        end
      end)
    end
  end

  it("trains the digits MLP on 2 and 3 ranks to the weights of 1 process with the same global batch", function()
    local why = missing()
    if why then pending(why) return end
    local digits = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
    if not exists(digits) then pending("needs " .. digits .. " (apt-get install python3-sklearn)") return end
    local dir = H.tmpdir()
    local weights = {}
    -- Overlapped (the default) on 1, 2 and 3 ranks; synchronous on 2.
    local runs = {{1, ""}, {2, ""}, {3, ""}, {2, "synchronous"}}
    for _, run in ipairs(runs) do
      local k, mode = run[1], run[2]
      local name = "k" .. k .. mode
      local out, ok = mpirun(k, string.format("train 20 60 '%s/%s' %s", dir, name, mode))
      assert.is_true(ok, out)
      all_done(out, k, 1)
      weights[name] = tf.io.read_npy(dir .. "/" .. name .. ".npy")
      -- Only rank 0 wrote its checkpoint.
      assert.is_true(exists(dir .. "/" .. name .. "-rank0/model"), out)
      for r = 1, k - 1 do assert.is_false(exists(dir .. "/" .. name .. "-rank" .. r .. "/model"), out) end
    end
    local one = weights.k1
    assert.equal(2410, one:size()) -- 64*32 + 32 + 32*10 + 10
    for _, name in ipairs({"k2", "k3", "k2synchronous"}) do
      local p, q = one:data(), weights[name]:data()
      for i = 0, one:size() - 1 do
        assert(math.abs(p[i] - q[i]) <= 1e-5, string.format("%s weight %d: %.9g vs %.9g", name, i, q[i], p[i]))
      end
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("fails the other ranks at the deadline when a rank stops, and ends the job", function()
    local why = missing()
    if why then pending(why) return end
    local out, ok, seconds = mpirun(3, "stop", "MOONFLOW_MPI_TIMEOUT=3")
    assert.is_false(ok, out)
    assert.is_true(seconds < 60, seconds .. " s")
    -- The first waiting rank to time out ends the job as it exits; on a
    -- loaded machine the other may be killed before its deadline, so at
    -- least one of them reports (each one that does, in full).
    local reported = 0
    for _, r in ipairs({0, 2}) do
      if out:find("rank " .. r .. " ok timed out after", 1, true) then
        reported = reported + 1
        assert.truthy(out:find("rank " .. r .. " ok later collectives fail at once", 1, true), out)
      end
    end
    assert.is_true(reported >= 1, out)
    assert.falsy(out:find("rank 1 ok timed out", 1, true), out)
    assert.matches("MpiAllreduce 'after_stop': timed out after 3 s waiting for [^\n]*: not every rank of 3 joined " ..
                   "%(a rank died, stopped", out)
    -- That the job ended is the failed, timely exit above: Open MPI's own
    -- abort notice is not checked, as under load its printing can fail
    -- ("ORTE_ERROR_LOG ... show_help.c").
  end)

  it("fails an overlapped allreduce at the deadline when a rank stops, and ends the job", function()
    local why = missing()
    if why then pending(why) return end
    local out, ok, seconds = mpirun(2, "stop_overlapped", "MOONFLOW_MPI_TIMEOUT=3")
    assert.is_false(ok, out)
    assert.is_true(seconds < 60, seconds .. " s")
    assert.truthy(out:find("rank 0 ok later collectives fail at once", 1, true), out)
    assert.matches("rank 0 error: MpiAllreduceStart 'average_gradients/allreduce_start': timed out after 3 s " ..
                   "waiting for [^\n]*not every rank of 2 joined[^\n]*%[%[node average_gradients/allreduce_wait", out)
    -- The job ended (rank 1, stopped, was ended by mpirun): mpirun failed in
    -- time. Its "MPI_ABORT was invoked" notice is not asked for: under load
    -- Open MPI sometimes fails to print it (ORTE_ERROR_LOG in show_help.c).
  end)

  it("writes checkpoints on rank 0 alone unless write_on_all_ranks", function()
    local why = missing()
    if why then pending(why) return end
    local dir = H.tmpdir()
    local out, ok = mpirun(3, "checkpoints '" .. dir .. "'")
    assert.is_true(ok, out)
    all_done(out, 3, 3)
    assert.is_true(exists(dir .. "/ranks-0/model-5"), out)
    assert.is_true(exists(dir .. "/ranks-0/checkpoint"), out)
    for r = 0, 2 do
      if r > 0 then
        local listing = H.shell("ls -A '" .. dir .. "/ranks-" .. r .. "'")
        assert.equal("", listing, "rank " .. r .. " wrote files")
      end
      assert.is_true(exists(dir .. "/all-" .. r .. "/model"), out)
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("runs README.md's hostfile command, on a hostfile naming this machine", function()
    local why = missing()
    if why then pending(why) return end
    local digits = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
    if not exists(digits) then pending("needs " .. digits .. " (apt-get install python3-sklearn)") return end
    local readme = H.read("README.md")
    local path_line = readme:match("\n%$ (export LUA_PATH=[^\n]+)\n")
    local command = readme:match("\n%$ (mpirun %-np 8 %-%-hostfile hosts [^\n]+)\n")
    assert.truthy(path_line and command, "README.md lost its hostfile commands")
    local dir = H.tmpdir()
    local hosts = assert(io.open(dir .. "/hosts", "w"))
    hosts:write("localhost slots=2\n")
    hosts:close()
    command = command:gsub("%-np 8 %-%-hostfile hosts", "-np 2 --hostfile '" .. dir .. "/hosts' --allow-run-as-root")
    local out, status = H.shell(string.format("env -u MOONFLOW_LIB sh -c \"%s; timeout 300 %s --epochs 2 --out '%s'\"",
                                              path_line:gsub('"', '\\"'), command, dir))
    assert.equal(0, status, out)
    local accuracy = tonumber(out:match("epoch 2: test accuracy (%S+) on 2 ranks"))
    assert.truthy(accuracy and accuracy > 0.8, out)
    assert.truthy(out:find("wrote " .. dir .. "/mpi_train.ckpt", 1, true), out)
    assert.is_true(exists(dir .. "/mpi_train.ckpt"), out)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("ends the job when a rank is killed", function()
    local why = missing()
    if why then pending(why) return end
    local out, ok, seconds = mpirun(3, "kill", "MOONFLOW_MPI_TIMEOUT=10")
    assert.is_false(ok, out)
    assert.is_true(seconds < 60, seconds .. " s")
    assert.matches("process rank 1 [^\n]* exited on signal 9", out)
    assert.falsy(out:find("ok allreduce after the kill", 1, true), out)
  end)
end)
