-- Files written by an earlier release still load: the graph file and the
-- checkpoint that spec/fixtures/release_0_1_0/make.lua wrote with moonflow
-- 0.1.0 (graph files and checkpoints then written by Lua), with the values
-- that release computed from them.
local tf = require("moonflow")
local H = require("spec.helpers")

local dir = "spec/fixtures/release_0_1_0/"
local expected = dofile(dir .. "expected.lua")
local feed = {{1, 2, 3}, {-1, 0.5, 4}}

describe("files of release 0.1.0", function()
  it("import and restore to the values that release computed", function()
    local g = tf.train.import_graph(dir .. "model.graph")
    local sess = tf.Session(g)
    g:as_default(function() sess:run(tf.global_variables_initializer()) end)
    local saver = g:as_default(function() return tf.train.Saver() end)
    saver:restore(sess, dir .. "model.ckpt")
    local t = function(name) return g:get_tensor_by_name(name) end
    local out = sess:run({y = t("y:0"), total = t("total:0"), w = t("dense/w:0"), steps = t("steps:0"),
                          counts = t("counts:0"), mask = t("mask:0"), bytes = t("bytes:0"), wide = t("wide:0")},
                         {[t("x:0")] = feed})
    for _, k in ipairs({"y", "total", "w", "wide", "counts", "bytes"}) do
      H.assert_near_all(expected[k], out[k], 0, k)
    end
    assert.equal(expected.steps, out.steps)
    assert.same(expected.mask, out.mask:totable())
    -- collections, the variable store and attributes come back as written
    assert.equal("y:0", g:get_collection("outputs")[1].name)
    assert.same({"hello", 1.5}, g:get_collection("notes"))
    assert.equal(7, #g:get_collection("variables"))
    assert.equal(6, #g:get_collection("trainable_variables"))
    g:as_default(function()
      tf.variable_scope("dense", {reuse = true}, function()
        assert.equal("dense/w:0", tf.get_variable("w", {3, 2}).name)
      end)
    end)
    assert.equal(math.huge, g:get_operation_by_name("steep"):get_attr("alpha"))
    local nan = g:get_operation_by_name("undefined"):get_attr("alpha")
    assert.is_true(nan ~= nan)
  end)

  it("list the checkpoint's variables with their shapes", function()
    assert.same({{"b", {2}}, {"bytes", {2}}, {"counts", {3}}, {"dense/w", {3, 2}}, {"mask", {2}},
                 {"steps", {}}, {"wide", {2}}}, tf.train.list_variables(dir .. "model.ckpt"))
    H.assert_near_all(expected.w, tf.train.load_variable(dir .. "model.ckpt", "dense/w"), 0, "w")
  end)
end)
