-- tf.flags (absl's syntax and errors) and tf.app.run (parsing, main's
-- result as the exit status, --help, parse errors).
local tf = require("moonflow")
local H = require("spec.helpers")

local function flags()
  local fv = tf.flags.FlagValues()
  tf.flags.DEFINE_string("data_dir", "/tmp/data", "where the data lives", {flag_values = fv})
  tf.flags.DEFINE_integer("steps", 100, "training steps", {flag_values = fv})
  tf.flags.DEFINE_float("lr", 0.01, "learning rate", {flag_values = fv})
  tf.flags.DEFINE_boolean("verbose", false, "say more", {flag_values = fv})
  return fv
end

describe("tf.flags", function()
  it("parses absl's syntax and returns what is not a flag", function()
    local fv = flags()
    local rest = fv({[0] = "train.lua", "--steps=7", "input.csv", "-lr", "0.5", "--verbose", "--data_dir", "d",
                     "--", "--steps=9"})
    assert.same({[0] = "train.lua", "input.csv", "--steps=9"}, rest)
    assert.equals(7, fv.steps)
    assert.equals(0.5, fv.lr)
    assert.is_true(fv.verbose)
    assert.equals("d", fv.data_dir)
    fv({"--noverbose", "--steps", "-3"})
    assert.is_false(fv.verbose)
    assert.equals(-3, fv.steps)
    fv({"--verbose=false"})
    assert.is_false(fv.verbose)
    assert.same({data_dir = "d", steps = -3, lr = 0.5, verbose = false}, fv:flag_values_dict())
    fv.steps = 11
    assert.equals(11, fv.steps)
    fv:unparse_flags()
    assert.is_false(fv:is_parsed())
    fv({})
    assert.equals(100, fv.steps)
  end)

  it("refuses what absl refuses, setting nothing", function()
    local fv = flags()
    local function err(...) return H.without_line(H.error_of(fv, ...)) end
    assert.equals("tf.flags.FLAGS: UnparsedFlagAccessError: Trying to access flag --steps before flags were parsed " ..
                  "(run tf.app.run(main) or FLAGS(arg) first)", H.without_line(H.error_of(function() return fv.steps end)))
    assert.equals("tf.flags: UnrecognizedFlagError: Unknown command line flag 'epochs'", err({"--epochs=3"}))
    assert.equals("tf.flags: IllegalFlagValueError: flag --steps=2.5: invalid literal for int() with base 10: '2.5'",
                  err({"--lr=1", "--steps=2.5"}))
    assert.equals("tf.flags: IllegalFlagValueError: flag --lr=fast: could not convert string to float: 'fast'",
                  err({"--lr=fast"}))
    assert.equals("tf.flags: IllegalFlagValueError: flag --verbose=maybe: Non-boolean argument to boolean flag",
                  err({"--verbose=maybe"}))
    assert.equals("tf.flags: Flag --steps must have a value other than None (it is the last argument)",
                  err({"--steps"}))
    fv({})
    assert.equals(0.01, fv.lr)  -- --lr=1 came before the bad value: not set either
    assert.matches("tf.flags.FLAGS: IllegalFlagValueError: flag %-%-steps=0.5: expected an integer",
                   H.error_of(function() fv.steps = 0.5 end))
    assert.matches("tf.flags.FLAGS: AttributeError: no flag %-%-epochs is defined",
                   H.error_of(function() return fv.epochs end))
    assert.matches("tf.flags.DEFINE_integer: DuplicateFlagError: The flag 'steps' is defined twice. First from " ..
                   "[^ ]*flags_spec.lua:%d+, Second from [^ ]*flags_spec.lua:%d+",
                   H.error_of(function() tf.flags.DEFINE_integer("steps", 1, "again", {flag_values = fv}) end))
    assert.matches("tf.flags.DEFINE_integer: IllegalFlagValueError: the default of flag %-%-n must be an integer, got 0.5",
                   H.error_of(tf.flags.DEFINE_integer, "n", 0.5, "n", {flag_values = fv}))
    assert.matches("the flag name 'get_help' is reserved",
                   H.error_of(tf.flags.DEFINE_string, "get_help", "", "", {flag_values = fv}))
  end)
end)

describe("tf.app.run", function()
  local dir, script
  setup(function()
    dir = H.tmpdir()
    script = dir .. "/app.lua"
    H.write(script, [[
local tf = require("moonflow")
tf.flags.DEFINE_integer("steps", 100, "training steps")
tf.flags.DEFINE_string("name", "model", "what to call it")
local FLAGS = tf.flags.FLAGS
tf.app.run(function(argv)
  print(string.format("steps=%d name=%s rest=%s", FLAGS.steps, FLAGS.name, table.concat(argv, ",")))
  if FLAGS.name == "fail" then error("main failed") end
  return FLAGS.steps == 3 and 3 or nil
end)
]])
  end)
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("parses the flags of arg, runs main with the rest and exits with its result", function()
    local out, status = H.run_script(script, "--steps=5 a b --name x")
    assert.equals(0, status)
    assert.equals("steps=5 name=x rest=a,b\n", out)
    out, status = H.run_script(script, "--steps 3")
    assert.equals(3, status)
    assert.equals("steps=3 name=model rest=\n", out)
    out, status = H.run_script(script, "--name fail")
    assert.equals(1, status)
    assert.matches("main failed", out, 1, true)
  end)

  it("prints the flags for --help and the parse error otherwise", function()
    local out, status = H.run_script(script, "--help")
    assert.equals(0, status)
    assert.matches("USAGE: " .. script .. " [flags]", out, 1, true)
    assert.matches("  --steps: training steps\n    (default: 100)\n    (an integer)\n", out, 1, true)
    assert.matches("  --name: what to call it\n    (default: 'model')\n", out, 1, true)
    out, status = H.run_script(script, "--steps=many")
    assert.equals(1, status)
    assert.equals("FATAL Flags parsing error: IllegalFlagValueError: flag --steps=many: invalid literal for int() " ..
                  "with base 10: 'many'\nPass --helpshort or --helpfull to see help on flags.\n", out)
  end)
end)
