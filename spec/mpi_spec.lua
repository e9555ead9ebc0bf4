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
    {"bad_input", "refuses bad input with errors naming the op and every rank's value", 9},
    {"control_flow", "runs inside while_loop and cond", 3},
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
    for _, k in ipairs({1, 2, 3}) do
      local out, ok = mpirun(k, string.format("train 20 60 '%s/k%d'", dir, k))
      assert.is_true(ok, out)
      all_done(out, k, 1)
      weights[k] = tf.io.read_npy(dir .. "/k" .. k .. ".npy")
      -- Only rank 0 wrote its checkpoint.
      assert.is_true(exists(dir .. "/k" .. k .. "-rank0/model"), out)
      for r = 1, k - 1 do assert.is_false(exists(dir .. "/k" .. k .. "-rank" .. r .. "/model"), out) end
    end
    local one = weights[1]
    assert.equal(2410, one:size()) -- 64*32 + 32 + 32*10 + 10
    for _, k in ipairs({2, 3}) do
      local p, q = one:data(), weights[k]:data()
      for i = 0, one:size() - 1 do
        assert(math.abs(p[i] - q[i]) <= 1e-5, string.format("k=%d weight %d: %.9g vs %.9g", k, i, q[i], p[i]))
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
    for _, r in ipairs({0, 2}) do
      assert.truthy(out:find("rank " .. r .. " ok timed out after", 1, true), out)
      assert.truthy(out:find("rank " .. r .. " ok later collectives fail at once", 1, true), out)
    end
    assert.matches("MpiAllreduce 'after_stop': timed out after 3 s waiting for [^\n]*: not every rank of 3 joined " ..
                   "%(a rank died, stopped", out)
    assert.truthy(out:find("MPI_ABORT was invoked", 1, true), out)
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
