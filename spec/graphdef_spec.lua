-- TensorFlow's GraphDef (src/io/tf_graphdef_*.c): frozen TensorFlow 1.x models
-- (spec/fixtures/graphdef/, made by make_fixtures.py: an MLP, a convnet, a
-- control flow v1 loop) imported and run with TensorFlow's outputs; moonflow graphs written as GraphDef, imported back,
-- and (where TensorFlow is installed) run by TensorFlow with moonflow's
-- outputs; the errors for ops moonflow lacks and for malformed bytes.
local tf = require("moonflow")
local H = require("spec.helpers")

local dir = "spec/fixtures/graphdef/"
local values = dofile(dir .. "values.lua")

-- A Python with TensorFlow for the export check, or nil and why not.
local function tensorflow_python()
  local home = os.getenv("HOME") or ""
  local python = os.getenv("MOONFLOW_TF_PYTHON") or home .. "/.cache/moonflow/bench-venv/bin/python3"
  local _, status = H.shell("'" .. python .. "' -c 'import tensorflow.compat.v1' 2>/dev/null")
  if status ~= 0 then return nil, "no TensorFlow at " .. python .. " (set MOONFLOW_TF_PYTHON)" end
  return python
end

-- What TensorFlow computes for the GraphDef at path fed input (a tf.Array) as
-- input_name: a list of flat lists, one per output name (an init op runs first).
local function run_in_tensorflow(python, path, input, input_name, names)
  local npy = os.tmpname()
  tf.io.write_npy(npy, input)
  local out, status = H.shell(string.format("'%s' %srun_graphdef.py '%s' '%s' '%s' %s 2>&1", python, dir, path, npy,
                                            input_name, table.concat(names, " ")))
  os.remove(npy)
  assert.equal(0, status, out)
  local lists = {}
  for line in out:gmatch("[^\n]+") do
    if line:match("^[-%d.e+ naif]+$") then
      local list = {}
      for v in line:gmatch("%S+") do list[#list + 1] = tonumber(v) end
      lists[#lists + 1] = list
    end
  end
  return lists
end

describe("tf.import_graph_def", function()
  before_each(function() tf.reset_default_graph() end)

  it("runs a frozen TensorFlow MLP with TensorFlow's outputs", function()
    local x, probs = unpack(tf.import_graph_def(dir .. "mlp.pb", {return_elements = {"x:0", "probs:0"}}))
    assert.equal("import/probs:0", probs.name)
    assert.same({-1, 3}, probs:get_shape():as_list())
    local got = tf.Session():run(probs, {[x] = values.mlp.x})
    H.assert_near_all(values.mlp.probs, got, 1e-5, "probs")
  end)

  it("runs a frozen convnet with batch normalization (FusedBatchNormV3, Softmax)", function()
    local r = tf.import_graph_def(dir .. "convnet.pb", {name = "net", return_elements = {"images:0", "logits:0",
                                                                                        "probs:0", "probs"}})
    assert.equal("net/probs", r[4].name)
    local logits, probs = unpack(tf.Session():run({r[2], r[3]}, {[r[1]] = values.convnet.images}))
    H.assert_near_all(values.convnet.logits, logits, 1e-4, "logits")
    H.assert_near_all(values.convnet.probs, probs, 1e-5, "probs")
  end)

  it("imports bytes, with input_map and no name scope", function()
    local f = assert(io.open(dir .. "mlp.pb", "rb"))
    local bytes = f:read("*a")
    f:close()
    local x = tf.constant(values.mlp.x)
    local probs = tf.import_graph_def(bytes, {input_map = {["x:0"] = x}, name = "", return_elements = {"probs:0"}})[1]
    assert.equal("probs:0", probs.name)
    H.assert_near_all(values.mlp.probs, tf.Session():run(probs), 1e-5, "probs")
    -- the same again: a second import takes its own scope
    local again = tf.import_graph_def(bytes, {input_map = {x = x}, return_elements = {"probs:0"}})[1]
    assert.equal("import/probs:0", again.name)
    H.assert_near_all(values.mlp.probs, tf.Session():run(again), 1e-5, "probs")
  end)

  it("runs a tf.while_loop of control flow v1 (Enter, Merge, Switch, LoopCond, NextIteration, Exit) as a While",
     function()
    local x, y = unpack(tf.import_graph_def(dir .. "while.pb", {return_elements = {"x:0", "y:0"}}))
    local loop = tf.get_default_graph():get_operation_by_name("import/while")
    assert.equal("While", loop.type)
    H.assert_near_all(values.while_loop.y, tf.Session():run(y, {[x] = values.while_loop.x}), 1e-5, "y")
    for _, op in ipairs(tf.get_default_graph():get_operations()) do
      assert.is_falsy(({Enter = 1, Merge = 1, Switch = 1, NextIteration = 1, LoopCond = 1})[op.type], op.name)
    end
  end)

  it("names every op moonflow lacks, with counts, in one error", function()
    local err = H.error_of(tf.import_graph_def, dir .. "unsupported.pb")
    local c = values.unsupported.counts
    -- (the graph's DepthwiseConv2dNative and LRN nodes, which moonflow lacked when it was made, import now)
    local want = string.format("the GraphDef has ops moonflow lacks: Lgamma (%d)", c.Lgamma)
    assert.is_truthy(err:find(want, 1, true), err)
    assert.equal(0, #tf.get_default_graph():get_operations())  -- nothing was added
    err = H.error_of(tf.import_graph_def, dir .. "cond.pb")
    assert.is_truthy(err:find("GraphDef node 'cond/Merge' (Merge): is no Merge of a loop's Enter and NextIteration " ..
                              "(tf.cond of control flow v1 is not imported)", 1, true), err)
  end)

  it("reports malformed bytes, truncated files and bad names without crashing", function()
    local f = assert(io.open(dir .. "convnet.pb", "rb"))
    local bytes = f:read("*a")
    f:close()
    local err = H.error_of(tf.import_graph_def, "\255\255\255\255 not a protobuf")
    assert.is_truthy(err:find("not a TensorFlow GraphDef", 1, true), err)
    for _, n in ipairs({1, 7, 100, #bytes - 1}) do
      local ok, e = pcall(tf.import_graph_def, bytes:sub(1, n))
      if not ok then assert.is_truthy(tostring(e):find("GraphDef", 1, true), e) end
    end
    err = H.error_of(tf.import_graph_def, dir .. "mlp.pb", {return_elements = {"nope:0"}})
    assert.is_truthy(err:find("/nope:0' refers to a Tensor which does not exist", 1, true), err)
    err = H.error_of(tf.import_graph_def, dir .. "mlp.pb", {input_map = {["x:0"] = 3}})
    assert.is_truthy(err:find("input_map", 1, true), err)
    -- the graph is still usable
    assert.equal(3, tf.Session():run(tf.constant(1) + 2))
  end)
end)

-- A graph of the ops whose GraphDef form differs from moonflow's: attributes
-- that are TensorFlow inputs, renamed attributes, SelectV2, ConcatV2, GatherV2.
local function op_tour(x)
  local t = tf.transpose(x, {1, 0})
  local parts = tf.split(tf.concat({x, x * 2}, 1), 2, 1)
  local s = tf.strided_slice(tf.tile(x, {2, 1}), {1, 0}, {3, 3}, {1, 1})
  local r = tf.reduce_mean(tf.square(x), 1, {keepdims = true}) + tf.reduce_sum(x) + tf.reduce_max(x, 0)
  local g = tf.gather(tf.pad(x, {{1, 0}, {0, 1}}), tf.constant({2, 0}, tf.int32))
  local w = tf.where(tf.less(x, 0.5), tf.nn.relu6(x * 4), tf.nn.sigmoid(x))
  local e = tf.squeeze(tf.expand_dims(tf.slice(x, {0, 1}, {2, 2}), 0), {0})
  local a = tf.cast(tf.argmax(x, 1), tf.float32)
  return {t, parts[1] + parts[2], s, r, g, w, e, a, tf.stack({x, x}, 1), tf.add_n({x, x, x}), tf.math.floormod(x, 0.3)}
end

describe("GraphDef export", function()
  before_each(function() tf.reset_default_graph() end)
  local input = {{0.1, 0.9, -0.3}, {0.7, -1.2, 0.4}}

  it("writes a graph that imports back with the same outputs", function()
    local x = tf.placeholder(tf.float32, {-1, 3}, "x")
    local tour = op_tour(x)
    local want = tf.Session():run(tour, {[x] = input})
    local bytes = tf.get_default_graph():as_graph_def()
    local outs = {}
    for i, t in ipairs(tour) do outs[i] = t.name end
    tf.reset_default_graph()
    local r = tf.import_graph_def(bytes, {return_elements = {"x:0", unpack(outs)}})
    local got = tf.Session():run({unpack(r, 2)}, {[r[1]] = input})
    for i = 1, #want do H.assert_near_all(want[i], got[i], 1e-6, outs[i]) end
  end)

  it("writes binary and text files, and refuses ops TensorFlow has no counterpart of", function()
    local tmp = H.tmpdir()
    local x = tf.placeholder(tf.float32, {2}, "x")
    tf.identity(x * 2, {name = "y"})
    assert.equal(tmp .. "/g.pbtxt", tf.train.write_graph(tf.get_default_graph(), tmp, "g.pbtxt"))
    local text = H.read(tmp .. "/g.pbtxt")
    assert.is_truthy(text:find('node {\n  name: "x"\n  op: "Placeholder"', 1, true), text)
    assert.is_truthy(text:find('key: "T"\n    value {\n      type: DT_FLOAT', 1, true), text)
    tf.train.write_graph(tf.get_default_graph(), tmp, "g.bin", {as_text = false})
    assert.equal(tf.get_default_graph():as_graph_def(), H.read(tmp .. "/g.bin"))
    tf.while_loop(function(i) return tf.less(i, 3) end, function(i) return i + 1 end, {tf.constant(0)})
    local err = H.error_of(tf.train.write_graph, tf.get_default_graph(), tmp, "loop.pb")
    assert.is_truthy(err:find("cannot be written as a TensorFlow GraphDef: While (1)", 1, true), err)
    os.execute("rm -rf '" .. tmp .. "'")
  end)

  describe("of training graphs (gradients, initializers, optimizers)", function()
    -- A small convnet and MLP head trained by optimizer `name`: its inputs,
    -- loss, train op and the op types the GraphDef should hold.
    local function trained(name)
      tf.set_random_seed(7)
      local x = tf.placeholder(tf.float32, {-1, 6, 6, 1}, "x")
      local y = tf.placeholder(tf.int64, {-1}, "y")
      local h = tf.layers.conv2d(x, 2, 3, {padding = "same", activation = tf.nn.relu})
      h = tf.layers.average_pooling2d(tf.layers.max_pooling2d(h, 2, 2), 3, 1)
      h = tf.layers.dense(tf.reshape(h, {-1, 2}), 4, {activation = tf.nn.elu})
      local logits = tf.layers.dense(h, 3, {kernel_initializer = tf.truncated_normal_initializer({stddev = 0.5})})
      local loss = tf.add(tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = y, logits = logits})),
                          tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits({labels = tf.one_hot(y, 3),
                                                                                  logits = logits})), {name = "loss"})
      local opt = name == "MomentumOptimizer" and tf.train[name](0.1, 0.9) or tf.train[name](0.05)
      local train = opt:minimize(loss, {name = "train"})
      tf.global_variables_initializer()  -- named "init"
      return x, y, loss, train
    end
    local feed_x, feed_y = {}, {0, 2}
    for b = 1, 2 do
      feed_x[b] = {}
      for i = 1, 6 do
        feed_x[b][i] = {}
        for j = 1, 6 do feed_x[b][i][j] = {math.sin(b * i + j)} end
      end
    end
    -- The losses of three training steps from the initial values.
    local function losses(sess, x, y, loss, train, init)
      sess:run(init)
      local out = {}
      for step = 1, 3 do out[step] = sess:run({loss, train}, {[x] = feed_x, [y] = feed_y})[1] end
      return out
    end
    local OPTIMIZERS = {GradientDescentOptimizer = "ApplyGradientDescent", MomentumOptimizer = "ApplyMomentum",
                        AdamOptimizer = "ApplyAdam", RMSPropOptimizer = "ApplyRMSProp",
                        AdagradOptimizer = "ApplyAdagrad"}
    for name, apply in pairs(OPTIMIZERS) do
      it("exports " .. name .. "'s graph, which imports back and trains the same", function()
        local x, y, loss, train = trained(name)
        local want = losses(tf.Session(), x, y, loss, train, tf.get_default_graph():get_operation_by_name("init"))
        local bytes = tf.get_default_graph():as_graph_def()
        local text = tf.get_default_graph():as_graph_def({as_text = true})
        for _, op in ipairs({apply, "RandomUniform", "TruncatedNormal", "BroadcastTo", "ReluGrad", "EluGrad",
                             "BiasAddGrad", "MaxPoolGrad", "AvgPoolGrad", "Conv2DBackpropInput",
                             "Conv2DBackpropFilter", "SparseSoftmaxCrossEntropyWithLogits",
                             "SoftmaxCrossEntropyWithLogits", "MoonflowSumToShape"}) do
          assert.is_truthy(text:find('op: "' .. op .. '"', 1, true), op)
        end
        tf.reset_default_graph()
        local r = tf.import_graph_def(bytes, {name = "", return_elements = {x.name, y.name, loss.name, train.name,
                                                                              "init"}})
        local got = losses(tf.Session(), unpack(r))
        H.assert_near_all(want, got, 1e-6, name)
        assert.is_true(got[3] < got[1], name .. " trains")
      end)
    end
  end)

  describe("runs in TensorFlow with moonflow's outputs", function()
    local python, why = tensorflow_python()
    local function check(name, build, feed, as_text, init)
      local tmp = H.tmpdir()
      tf.reset_default_graph()
      local x, outs = build()
      local sess = tf.Session()
      if init then sess:run(tf.global_variables_initializer()) end
      local want = sess:run(outs, {[x] = feed})
      local path = tf.train.write_graph(tf.get_default_graph(), tmp, name, as_text)
      local names = {}
      if init then names[1] = "init" end
      for _, t in ipairs(outs) do names[#names + 1] = t.name end
      local got = run_in_tensorflow(python, path, tf.array(feed), x.name, names)
      assert.equal(#want, #got)
      for i = 1, #want do H.assert_near_all(want[i], got[i], 1e-5, outs[i].name) end
      os.execute("rm -rf '" .. tmp .. "'")
    end
    local function mlp()
      local x = tf.placeholder(tf.float32, {-1, 3}, "x")
      local w1 = tf.constant({{0.5, -0.2, 0.1, 0.3}, {0.4, 0.6, -0.7, 0.2}, {-0.1, 0.2, 0.3, -0.4}})
      local h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), tf.constant({0.1, -0.1, 0.2, 0})))
      local logits = tf.matmul(h, tf.constant({{1, -1}, {0.5, 0.2}, {-0.3, 0.8}, {0.9, 0.1}}))
      return x, {logits, tf.nn.softmax(logits), tf.nn.log_softmax(logits)}
    end
    local function convnet()
      local x = tf.placeholder(tf.float32, {-1, 4, 4, 2}, "images")
      local k = tf.Variable(tf.constant(H.values(3 * 3 * 2 * 3, 3), tf.float32, {3, 3, 2, 3}), {name = "kernel"})
      local c = tf.nn.conv2d(x, k, {1, 1, 1, 1}, "SAME")
      local bn = tf.layers.batch_normalization(c, {training = false})
      local p = tf.nn.max_pool(tf.nn.relu(bn), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID")
      local avg = tf.nn.avg_pool(bn, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID")
      local flat = tf.reshape(p + avg, {-1, 12})
      return x, {tf.nn.softmax(tf.matmul(flat, tf.constant(H.values(12 * 2, 5), tf.float32, {12, 2})))}
    end
    local function depthwise_net()
      local x = tf.placeholder(tf.float32, {-1, 4, 4, 2}, "images")
      local dw = tf.constant(H.values(3 * 3 * 2 * 2, 4), tf.float32, {3, 3, 2, 2})
      -- (TensorFlow's CPU kernel refuses dilations: its tf.nn.depthwise_conv2d dilates through space_to_batch)
      local d = tf.nn.depthwise_conv2d(x, dw, 1, "SAME")
      local n = tf.nn.lrn(d, 2, 1.5, 0.3, 0.75)
      local sep = tf.nn.separable_conv2d(n, tf.constant(H.values(2 * 2 * 4 * 1, 6), tf.float32, {2, 2, 4, 1}),
                                         tf.constant(H.values(4 * 3, 7), tf.float32, {1, 1, 4, 3}), 2, "SAME")
      return x, {d, n, sep}
    end
    local images = {}
    for b = 1, 2 do
      images[b] = {}
      for i = 1, 4 do
        images[b][i] = {}
        for j = 1, 4 do images[b][i][j] = {math.sin(b + i * j), math.cos(b * i - j)} end
      end
    end
    local cases = {{"an MLP (binary)", "mlp.pb", mlp, input},
                   {"an MLP (text format)", "mlp.pbtxt", mlp, input, true},
                   {"a convnet with variables and batch normalization", "convnet.pb", convnet, images, false, true},
                   {"depthwise and separable convolutions, LRN", "depthwise.pb", depthwise_net, images}}
    for _, case in ipairs(cases) do
      if not python then
        pending(case[1] .. ": " .. why)
      else
        it(case[1], function() check(case[2], case[3], case[4], case[5], case[6]) end)
      end
    end
  end)
end)
