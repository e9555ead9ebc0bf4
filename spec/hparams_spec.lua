-- tf.contrib.training.HParams: types inferred as TensorFlow's, parse(),
-- JSON, dictionaries, and TensorFlow's errors for unknown names and
-- values of the wrong type.
local tf = require("moonflow")
local H = require("spec.helpers")

local HParams = tf.contrib.training.HParams

describe("tf.contrib.training.HParams", function()
  it("holds typed values as fields and parses overrides", function()
    local hp = HParams({lr = 0.1, layers = 3, activation = "relu", batch_norm = false, sizes = {64, 32}})
    assert.equals(0.1, hp.lr)
    assert.equals(3, hp.layers)
    assert.equals(hp, hp:parse("lr=0.5,layers=4,activation=tanh,batch_norm=true,sizes=[128, 64,32]"))
    assert.equals(0.5, hp.lr)
    assert.equals(4, hp.layers)
    assert.equals("tanh", hp.activation)
    assert.is_true(hp.batch_norm)
    assert.same({128, 64, 32}, hp.sizes)
    -- a float hyperparameter takes a whole number; the last of repeated names wins
    hp:parse("lr=2,lr=0.25,batch_norm=0")
    assert.equals(0.25, hp.lr)
    assert.is_false(hp.batch_norm)
    assert.equals('HParams{activation = "tanh", batch_norm = false, layers = 4, lr = 0.25, sizes = {128, 64, 32}}',
                  tostring(hp))
  end)

  it("refuses what TensorFlow refuses, changing nothing", function()
    local hp = HParams({lr = 0.1, layers = 3, name = "a", sizes = {1, 2}})
    local function err(fn, ...) return H.without_line(H.error_of(fn, ...)) end
    assert.equals("HParams:parse: ValueError: Unknown hyperparameter type for depth", err(hp.parse, hp, "depth=2"))
    assert.equals("HParams:parse: ValueError: Could not parse hparam 'layers' of type 'int' with value '3.5' in " ..
                  "lr=0.2,layers=3.5", err(hp.parse, hp, "lr=0.2,layers=3.5"))
    assert.equals("HParams:parse: ValueError: Could not parse hparam 'lr' of type 'float' with value 'fast' in lr=fast",
                  err(hp.parse, hp, "lr=fast"))
    assert.equals("HParams:parse: ValueError: Malformed hyperparameter value: =3", err(hp.parse, hp, "=3"))
    assert.equals("HParams:parse: ValueError: Must not pass a list for single-valued parameter: layers",
                  err(hp.parse, hp, "layers=[1,2]"))
    assert.equals("HParams:parse: ValueError: Must pass a list for multi-valued parameter: sizes.",
                  err(hp.parse, hp, "sizes=3"))
    assert.equals(0.1, hp.lr)  -- lr=0.2 came before the bad value: not set either
    assert.equals("HParams:set_hparam: ValueError: Could not cast hparam 'layers' of type 'int' from value 2.5",
                  err(hp.set_hparam, hp, "layers", 2.5))
    assert.equals("HParams:set_hparam: ValueError: Could not cast hparam 'name' of type 'str' from value 3",
                  err(hp.set_hparam, hp, "name", 3))
    assert.equals("HParams:set_hparam: ValueError: Could not cast hparam 'lr' of type 'float' from value true",
                  err(hp.set_hparam, hp, "lr", true))
    assert.equals("HParams:set_hparam: KeyError: no hyperparameter 'depth'", err(hp.set_hparam, hp, "depth", 1))
    assert.equals("HParams:add_hparam: ValueError: Hyperparameter name is reserved: parse",
                  err(hp.add_hparam, hp, "parse", 1))
    assert.equals("HParams:add_hparam: ValueError: Hyperparameter name is reserved: lr", err(hp.add_hparam, hp, "lr", 1))
    assert.equals("HParams:add_hparam: ValueError: Multi-valued hyperparameters cannot be empty: e",
                  err(hp.add_hparam, hp, "e", {}))
    assert.matches("HParams:parse: ValueError: Could not parse hparam 'layers' .* %(at [^)]*hparams_spec.lua:%d+%)$",
                   H.error_of(function() hp:parse("layers=x") end))
    assert.equals(3, hp.layers)
  end)

  it("takes a declared type where Lua's number cannot say it", function()
    local hp = HParams({lr = 1}, {lr = "float"})
    hp:parse("lr=0.5")
    assert.equals(0.5, hp.lr)
    assert.equals("HParams:parse: ValueError: Could not parse hparam 'lr' of type 'int' with value '0.5' in lr=0.5",
                  H.without_line(H.error_of(function() HParams({lr = 1}):parse("lr=0.5") end)))
    assert.matches("the type of 'lr' must be \"int\", \"float\", \"bool\" or \"str\"",
                   H.error_of(HParams, {lr = 1}, {lr = "double"}))
    assert.matches("a type is given for 'x', which has no value", H.error_of(HParams, {lr = 1}, {x = "int"}))
  end)

  it("converts to and from JSON and tables, adds and deletes", function()
    local hp = HParams({lr = 0.1, layers = 3, tags = {"a", "b"}})
    assert.equals('{"layers":3,"lr":0.10000000000000001,"tags":["a","b"]}', hp:to_json())  -- exact: 17 digits
    hp:parse_json('{"lr": 0.01, "tags": ["c"]}')
    assert.equals(0.01, hp.lr)
    assert.same({"c"}, hp.tags)
    hp:override_from_dict({layers = 5})
    assert.same({lr = 0.01, layers = 5, tags = {"c"}}, hp:values())
    assert.matches("Could not cast hparam 'layers' of type 'int' from value 0.5",
                   H.error_of(hp.parse_json, hp, '{"layers": 0.5}'))
    hp:add_hparam("dropout", 0.5)
    assert.equals(0.5, hp:get("dropout"))
    hp:del_hparam("dropout")
    assert.is_nil(hp.dropout)
    assert.equals(7, hp:get("dropout", 7))
    hp:parse("")  -- nothing to override
    assert.equals(5, hp.layers)
  end)
end)
