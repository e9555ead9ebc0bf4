-- examples/digits.lua end to end: the UCI digits from Debian's python3-sklearn
-- (which .ci/run installs), an MLP and a convnet each trained to at least 95%
-- held-out accuracy, with a progress bar and an SVG loss curve; and
-- examples/digits_estimator.lua, the MLP on the Estimator API, stopped
-- halfway and resumed from its checkpoint to the same final accuracy.
local DATA = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

local function have_data()
  local f = io.open(DATA)
  if f then f:close() end
  return f ~= nil
end

local H = require("spec.helpers")

-- Returns the example's output and whether it exited 0.
local function run_example(args)
  local out, status = H.run_script("examples/digits.lua", args)
  return out, status == 0
end

describe("examples/digits.lua", function()
  for _, model in ipairs({"mlp", "convnet"}) do
    it("trains the " .. model .. " to at least 95% test accuracy and draws its loss curve", function()
      if not have_data() then pending("needs " .. DATA .. " (apt-get install python3-sklearn)") return end
      local dir = H.tmpdir()
      local out, ok = run_example(model .. " --out " .. dir)
      assert.is_true(ok, out)
      assert.matches("1797 images, 1438 for training, 359 held out", out, 1, true)
      -- one progress bar per epoch, the last one full
      assert.matches("epoch  1/%d+ %[[#.]+%]", out)
      assert.matches("#" .. string.rep("#", 29) .. "%]  *44/44  loss", out)
      local test_acc = tonumber(out:match("test accuracy ([%d.]+)"))
      local train_acc = tonumber(out:match("train accuracy ([%d.]+)"))
      assert.is_true(test_acc >= 0.95, "test accuracy " .. tostring(test_acc))
      assert.is_true(train_acc >= test_acc - 0.05, "train accuracy " .. tostring(train_acc))
      local svg_path = dir .. "/digits-" .. model .. "-loss.svg"
      local f = assert(io.open(svg_path))
      local svg = f:read("*a")
      f:close()
      assert.matches("^<svg ", svg)
      local points = svg:match('points="([^"]*)"')
      local n, first_y, last_y = 0, nil, nil
      for _, y in points:gmatch("([%d.]+),([%d.]+)") do
        n = n + 1
        first_y = first_y or tonumber(y)
        last_y = tonumber(y)
      end
      local epochs = tonumber(out:match("(%d+) epochs in"))
      assert.equals(epochs, n)
      assert.is_true(last_y > first_y, "the loss curve goes down (SVG y grows downwards)")
      os.execute("rm -rf '" .. dir .. "'")
    end)
  end

  it("says how to get the data when the file is missing", function()
    local out, ok = run_example("--data /nonexistent/digits.csv.gz --quiet")
    assert.is_false(ok)
    assert.matches("/nonexistent/digits.csv.gz not found", out, 1, true)
    assert.matches("apt-get install python3-sklearn", out, 1, true)
  end)

  it("rejects an unknown argument with the usage", function()
    local out, ok = run_example("--bogus")
    assert.is_false(ok)
    assert.matches("unknown argument --bogus (use mlp|convnet", out, 1, true)
  end)
end)

describe("examples/digits_estimator.lua", function()
  local function run(args) return H.run_script("examples/digits_estimator.lua", args) end
  local function line(out, prefix)
    return out:match("\n(" .. prefix:gsub("%p", "%%%0") .. "[^\n]*)") or out:match("^(" .. prefix:gsub("%p", "%%%0") .. "[^\n]*)")
  end

  it("trains the MLP to digits.lua's accuracy, and stopped halfway resumes to the same result", function()
    if not have_data() then pending("needs " .. DATA .. " (apt-get install python3-sklearn)") return end
    local dir = H.tmpdir()
    local whole, status = run("--model_dir " .. dir .. "/whole")
    assert.equals(0, status, whole)
    assert.matches("training from scratch", whole, 1, true)
    assert.equals("global step 880", line(whole, "global step"))
    local accuracy = tonumber(whole:match("test accuracy ([%d.]+)"))
    assert.is_true(accuracy >= 0.95, "test accuracy " .. tostring(accuracy))
    assert.matches("train  step 100/880  loss [%d.e-]+  [%d.]+ steps/s  ETA %d+s\n", whole)

    local half
    half, status = run("--model_dir " .. dir .. "/resumed --stop_at 440")
    assert.equals(0, status, half)
    assert.equals("global step 440", line(half, "global step"))
    -- every 100 steps and at the stop, the last 3 kept; beside them the
    -- summaries of training (an event file) and of evaluation (eval/)
    local files = H.files_in(dir .. "/resumed")
    assert.truthy(files[3]:match("^events%.out%.tfevents%."), files[3])
    table.remove(files, 3)
    assert.same({"checkpoint", "eval", "model.ckpt-300", "model.ckpt-400", "model.ckpt-440"}, files)

    local resumed
    resumed, status = run("--model_dir " .. dir .. "/resumed")
    assert.equals(0, status, resumed)
    assert.matches("resuming from " .. dir .. "/resumed/model.ckpt-440", resumed, 1, true)
    assert.is_nil(resumed:find("step 100/880", 1, true))
    assert.matches("train  step 540/880", resumed, 1, true)
    assert.equals("global step 880", line(resumed, "global step"))
    assert.equals(line(whole, "test accuracy"), line(resumed, "test accuracy"))
    assert.equals(line(whole, "test loss"), line(resumed, "test loss"))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("takes its settings as flags and hyperparameters", function()
    local out, status = run("--help")
    assert.equals(0, status)
    assert.matches("--train_steps: training steps", out, 1, true)
    out, status = run("--hparams layers=3")
    assert.equals(1, status)
    assert.matches("Unknown hyperparameter type for layers", out, 1, true)
    out, status = run("--train_steps=many")
    assert.equals(1, status)
    assert.matches("FATAL Flags parsing error: IllegalFlagValueError: flag --train_steps=many", out, 1, true)
  end)
end)
