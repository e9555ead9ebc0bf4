-- args_spec.lua — the one argument parser (args.options) and the one error
-- style (core.fail) every Lua module uses.
local tf = require("moonflow")
local args = require("moonflow.args")
local core = require("moonflow.core")
local H = require("spec.helpers")

describe("args.options", function()
  local names = {"axis", "keepdims", "name"}

  it("takes the options positionally, in a trailing table, or both", function()
    assert.same({axis = 1, keepdims = true}, args.options("f", names, 1, true))
    assert.same({axis = 1, name = "n"}, args.options("f", names, {axis = 1, name = "n"}))
    assert.same({axis = 1, keepdims = true, name = "n"}, args.options("f", names, 1, {keepdims = true, name = "n"}))
    assert.same({name = "n"}, args.options("f", names, nil, nil, "n"))
    assert.same({axis = 2}, args.options("f", names, 2, nil, nil))  -- trailing nils are not arguments
  end)

  it("refuses unknown options, an option given twice and too many arguments, naming the function", function()
    assert.matches("f: unknown option 'axes' (expected one of: axis, keepdims, name)",
                   H.error_of(args.options, "f", names, {axes = 1}), 1, true)
    assert.matches("f: 'axis' is given both positionally and as an option",
                   H.error_of(args.options, "f", names, 1, {axis = 2}), 1, true)
    assert.matches("f: too many arguments (4 optional ones given, at most 3)",
                   H.error_of(args.options, "f", names, 1, true, "n", 4), 1, true)
    assert.matches("f: too many arguments (2 optional ones given, at most 1)",
                   H.error_of(args.options, "f", {"a", "b", positional = 1}, 1, 2), 1, true)
  end)

  it("reads an empty table as a list unless the option set says empty", function()
    assert.same({axis = {}}, args.options("f", names, {}))
    assert.same({}, args.options("f", {"seed", "name", empty = true}, {}))
  end)

  it("hands back the keys it does not know with rest", function()
    local o, rest = args.options("f", {"name", rest = true}, {name = "n", units = 3})
    assert.same({name = "n"}, o)
    assert.same({units = 3}, rest)
  end)

  it("name_of reads a name given as a string or as {name=}", function()
    assert.equal("n", args.name_of("n", "f"))
    assert.equal("n", args.name_of({name = "n"}, "f"))
    assert.is_nil(args.name_of(nil, "f"))
    assert.matches("f: unknown option 'nmae'", H.error_of(args.name_of, {nmae = "n"}, "f"), 1, true)
  end)
end)

describe("core.fail", function()
  it("ends the message with the user's line, whatever the depth it is raised at", function()
    local line = H.this_line() + 1
    local err = H.error_of(function() local y = tf.reduce_sum(tf.constant({1}), {axes = 0}); return y end)
    assert.equal("tf.reduce_sum: unknown option 'axes' (expected one of: axis, keepdims, name, reduction_indices, " ..
                 "keep_dims) (at spec/args_spec.lua:" .. line .. ")", err)
    line = H.this_line() + 1
    err = H.error_of(function() local y = tf.nn.softmax(tf.constant({1}), {axis = 0.5}); return y end)
    assert.equal("tf.nn.softmax: axis must be an integer, got 0.5 (at spec/args_spec.lua:" .. line .. ")", err)
  end)

  it("names one line: a message that ends naming one is raised as it is", function()
    local line = H.this_line() + 1
    local err = H.error_of(function() core.fail("inner") end)
    assert.equal("inner (at spec/args_spec.lua:" .. line .. ")", err)
    assert.equal(err, H.error_of(function() core.fail(err) end))
    assert.equal("outer: " .. err, H.error_of(function() core.fail("outer: " .. err) end))
  end)
end)
