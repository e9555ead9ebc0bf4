-- examples/embed/: a C program (host.c) runs the net a Lua script
-- (train.lua) trained and saved, through the C API alone (graph file,
-- checkpoint restore, a run by names into its own buffer, a checkpoint
-- save), and prints what Lua printed; the checkpoint it saves holds the
-- values Lua saved. frozen.c runs a frozen TensorFlow model (a GraphDef) the
-- same way.
local tf = require("moonflow")
local core = require("moonflow.core")
local H = require("spec.helpers")

local build = core.library_path:match("^(.*)/libmoonflow%.so$")
local cc = os.getenv("CC") or "cc"
local link_flags = os.getenv("MOONFLOW_LINK_FLAGS") or ""  -- the sanitizers' runtimes, when instrumented
local root = os.getenv("PWD") or "."

describe("examples/embed", function()
  it("the C host gives the outputs of the Lua script that trained the net", function()
    local dir = H.tmpdir()
    local lua_out, status = H.run_script("examples/embed/train.lua", dir)
    assert.equal(0, status, lua_out)
    local out
    out, status = H.shell(string.format("%s -std=c11 -I'%s/src/include' '%s/examples/embed/host.c' '%s/libmoonflow.a' " ..
                                        "%s %s -o '%s/host'", cc, root, root, build, H.static_libs(), link_flags, dir))
    assert.equal(0, status, out)
    local c_out
    c_out, status = H.shell("'" .. dir .. "/host' '" .. dir .. "'")
    assert.equal(0, status, c_out)
    assert.equal(3, select(2, lua_out:gsub("\n", "")))
    assert.equal(lua_out, c_out)
    -- every variable the Lua saver wrote, with the same value, in the C host's checkpoint
    local saved, resaved = dir .. "/policy.ckpt", dir .. "/resaved.ckpt"
    local names = tf.train.list_variables(saved)
    assert.same(names, tf.train.list_variables(resaved))
    assert.is_true(#names >= 6)  -- three kernels and biases, and Adam's slots
    for _, e in ipairs(names) do
      assert.same(tf.train.load_variable(saved, e[1]):totable(), tf.train.load_variable(resaved, e[1]):totable())
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("runs a frozen TensorFlow model (GraphDef) with TensorFlow's outputs (frozen.c)", function()
    local dir = H.tmpdir()
    local values = dofile("spec/fixtures/graphdef/values.lua")
    local out, status = H.shell(string.format("%s -std=c11 -I'%s/src/include' '%s/examples/embed/frozen.c' " ..
                                              "'%s/libmoonflow.a' %s %s -o '%s/frozen'", cc, root, root, build,
                                              H.static_libs(), link_flags, dir))
    assert.equal(0, status, out)
    local numbers = {}
    for _, row in ipairs(values.mlp.x) do numbers[#numbers + 1] = table.concat(row, " ") end
    H.write(dir .. "/x.txt", table.concat(numbers, "\n") .. "\n")
    out, status = H.shell(string.format("'%s/frozen' spec/fixtures/graphdef/mlp.pb x:0 probs:0 4 5 < '%s/x.txt'", dir,
                                        dir))
    assert.equal(0, status, out)
    local got = {}
    for line in out:gmatch("[^\n]+") do
      local row = {}
      for v in line:gmatch("%S+") do row[#row + 1] = tonumber(v) end
      got[#got + 1] = row
    end
    H.assert_near_all(values.mlp.probs, got, 1e-5, "probs")
    -- a model with ops moonflow lacks: the status says which
    out, status = H.shell(string.format("'%s/frozen' spec/fixtures/graphdef/unsupported.pb x:0 y:0 1 3 < '%s/x.txt'",
                                        dir, dir))
    assert.is_not.equal(0, status)
    assert.is_truthy(out:find("loading the model: graph file spec/fixtures/graphdef/unsupported.pb (no JSON, read " ..
                              "as a TensorFlow GraphDef): the GraphDef has ops moonflow lacks: " ..
                              "Lgamma (1)", 1, true), out)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("reports a checkpoint of another model through the status", function()
    local dir = H.tmpdir()
    assert.equal(0, select(2, H.run_script("examples/embed/train.lua", dir)))
    tf.reset_default_graph()
    local other = tf.Variable(tf.zeros({2}), {name = "h1/kernel"})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    tf.train.Saver({other}):save(sess, dir .. "/policy.ckpt")
    local out, status = H.shell(string.format("%s -std=c11 -I'%s/src/include' '%s/examples/embed/host.c' " ..
                                              "'%s/libmoonflow.a' %s %s -o '%s/host' && '%s/host' '%s'", cc, root, root, build,
                                              H.static_libs(), link_flags, dir, dir, dir))
    assert.is_not.equal(0, status)
    assert.is_truthy(out:find("restoring the checkpoint: checkpoint " .. dir .. "/policy.ckpt holds 'h1/kernel' as " ..
                              "float32 of rank 1, which does not match the variable's float32 of rank 2", 1, true), out)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
