-- examples/resume_training.lua: a run killed after step 130 and restarted
-- resumes from the step-100 checkpoint and ends with the same weights, to the
-- last bit, as a run never interrupted.
local H = require("spec.helpers")

local function run(args) return H.run_script("examples/resume_training.lua", args) end

describe("examples/resume_training.lua", function()
  it("resumes a killed run from the latest checkpoint to the same final weights", function()
    local whole_dir, killed_dir = H.tmpdir(), H.tmpdir()
    local whole, rc = run(whole_dir .. " --steps 200 --every 50")
    assert.equals(0, rc, whole)
    assert.matches("started afresh", whole, 1, true)
    local weights = whole:match("weights (%S+)")
    assert.is_truthy(weights, whole)

    local first, rc1 = run(killed_dir .. " --steps 200 --every 50 --die-at 130")
    assert.equals(3, rc1, first)
    assert.matches("saved " .. killed_dir .. "/model.ckpt-100", first, 1, true)
    assert.is_nil(first:match("weights"))

    local second, rc2 = run(killed_dir .. " --steps 200 --every 50")
    assert.equals(0, rc2, second)
    assert.matches("resumed from " .. killed_dir .. "/model.ckpt-100 at step 100", second, 1, true)
    assert.equals(weights, second:match("weights (%S+)"))
    assert.equals(whole:match("final loss (%S+)"), second:match("final loss (%S+)"))
    -- the loss went down: the final fit is better than the first logged one
    assert.is_true(tonumber(whole:match("final loss (%S+)")) < tonumber(whole:match("step 50  loss (%S+)")))
    os.execute("rm -rf '" .. whole_dir .. "' '" .. killed_dir .. "'")
  end)

  it("says what it needs when no directory is given", function()
    local out, rc = run("")
    assert.equals(1, rc)
    assert.matches("name a checkpoint directory", out, 1, true)
  end)
end)
