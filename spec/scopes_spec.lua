-- Names, scopes and sharing: effective-tensorflow.txt "Scopes and when to use
-- them", the model wrapper of how-tensorflow-manages-graphs.txt, and the
-- errors of tf.get_variable in TensorFlow's words.
local tf = require("moonflow")

local function line() return debug.getinfo(2, "l").currentline end

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("effective-tensorflow: scopes and when to use them", function()
  before_each(function() tf.reset_default_graph() end)

  it("gives default names, or the names asked for", function()
    local a = tf.constant(1)
    assert.equal("Const:0", a.name)
    local b = tf.Variable(1)
    assert.equal("Variable:0", b.name)
    tf.reset_default_graph()
    a = tf.constant(1, {name = "a"})
    assert.equal("a:0", a.name)
    b = tf.Variable(1, {name = "b"})
    assert.equal("b:0", b.name)
  end)

  it("tf.name_scope prefixes tensors and tf.Variable, not tf.get_variable", function()
    tf.name_scope("scope", function()
      local a = tf.constant(1, {name = "a"})
      assert.equal("scope/a:0", a.name)
      local b = tf.Variable(1, {name = "b"})
      assert.equal("scope/b:0", b.name)
      local c = tf.get_variable("c", {})
      assert.equal("c:0", c.name)
    end)
  end)

  it("tf.variable_scope prefixes tf.get_variable as well", function()
    tf.variable_scope("scope", function()
      local a = tf.constant(1, {name = "a"})
      assert.equal("scope/a:0", a.name)
      local b = tf.Variable(1, {name = "b"})
      assert.equal("scope/b:0", b.name)
      local c = tf.get_variable("c", {})
      assert.equal("scope/c:0", c.name)
    end)
  end)

  it("declaring a variable twice is disallowed, in TensorFlow's words with both lines", function()
    local first, second
    local err = err_of(tf.variable_scope, "scope", function()
      local a1 = tf.get_variable("a", {}); first = line()
      second = line() + 1
      local a2 = tf.get_variable("a", {})  -- disallowed
      return a1, a2
    end)
    assert.matches("Variable scope/a already exists, disallowed. Did you mean to set reuse=true", err, 1, true)
    assert.matches("Originally defined at spec/scopes_spec.lua:" .. first, err, 1, true)
    assert.matches("(at spec/scopes_spec.lua:" .. second .. ")", err, 1, true)
  end)

  it("reuse = true returns the variable declared before", function()
    local a1 = tf.variable_scope("scope", function() return tf.get_variable("a", {}) end)
    local a2 = tf.variable_scope("scope", {reuse = true}, function() return tf.get_variable("a", {}) end)
    assert.equal(a1, a2)
    assert.equal(1, #tf.global_variables())
  end)

  it("tf.AUTO_REUSE creates a variable when it is missing and reuses it after", function()
    local function features(image)
      return tf.variable_scope("scope", {reuse = tf.AUTO_REUSE}, function()
        local k = tf.get_variable("kernel", {3}, {initializer = tf.constant_initializer({1, 2, 3})})
        return tf.reduce_sum(image * k)
      end)
    end
    local features1 = features(tf.constant({1, 1, 1}))
    local features2 = features(tf.constant({2, 0, 0}))
    assert.equal(1, #tf.global_variables())
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.same({6, 2}, sess:run({features1, features2}))
  end)

  it("a template declares its variables on the first call and reuses them after", function()
    local conv3x32 = tf.make_template("conv3x32", function(x)
      local w = tf.get_variable("w", {3}, {initializer = tf.constant_initializer({1, 10, 100})})
      return tf.reduce_sum(x * w)
    end)
    local features1 = conv3x32(tf.constant({1, 0, 0}))
    local features2 = conv3x32(tf.constant({0, 1, 1}))  -- will reuse the weights
    assert.equal(1, #tf.global_variables())
    assert.equal("conv3x32/w:0", tf.global_variables()[1].name)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.same({1, 110}, sess:run({features1, features2}))
    -- A second template of the same name gets its own scope and variables.
    local other = tf.make_template("conv3x32", function() return tf.get_variable("w", {1}) end)
    assert.equal("conv3x32_1/w:0", other().name)
  end)
end)

describe("tf.get_variable sharing errors", function()
  before_each(function() tf.reset_default_graph() end)

  it("reusing a variable that does not exist", function()
    local at
    local err = err_of(tf.variable_scope, "scope", {reuse = true}, function()
      at = line(); local v = tf.get_variable("missing", {2}); return v
    end)
    assert.matches("Variable scope/missing does not exist, or was not created with tf.get_variable(). " ..
                   "Did you mean to set reuse=tf.AUTO_REUSE in variable_scope? (at spec/scopes_spec.lua:" .. at .. ")",
                   err, 1, true)
  end)

  it("reusing with another shape or dtype", function()
    tf.variable_scope("s", function() tf.get_variable("v", {2, 3}) end)
    tf.variable_scope("s", {reuse = true}, function()
      assert.matches("Trying to share variable s/v, but specified shape (3, 2) and found shape (2, 3).",
                     err_of(tf.get_variable, "v", {3, 2}), 1, true)
      assert.matches("Trying to share variable s/v, but specified dtype float64 and found dtype float32.",
                     err_of(tf.get_variable, "v", {2, 3}, {dtype = tf.float64}), 1, true)
      -- No shape or dtype given: whatever the variable has.
      assert.same({2, 3}, tf.get_variable("v"):get_shape():as_list())
    end)
  end)

  it("a new variable needs a fully defined shape; a constant initializer gives its own", function()
    assert.matches("Shape of a new variable (v) must be fully defined, but instead was (?, 3).",
                   err_of(tf.get_variable, "v", {-1, 3}), 1, true)
    assert.matches("Shape of a new variable (v) must be fully defined, but instead was <unknown>.",
                   err_of(tf.get_variable, "v"), 1, true)
    local c = tf.get_variable("c", {initializer = tf.constant({{1, 2}}, tf.int32)})
    assert.same({1, 2}, c:get_shape():as_list())
    assert.equal(tf.int32, c.dtype)
    local d = tf.get_variable("d", {initializer = {1.5, 2.5}})
    assert.same({2}, d:get_shape():as_list())
    assert.matches("If initializer is a constant, do not specify shape.",
                   err_of(tf.get_variable, "e", {2}, {initializer = tf.constant({1, 2})}), 1, true)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.same({{1, 2}}, sess:run(c):totable())
    assert.same({1.5, 2.5}, sess:run(d):totable())
  end)

  it("the graph and the session stay usable after a sharing error", function()
    local v = tf.get_variable("v", {}, {initializer = tf.constant_initializer(3)})
    err_of(tf.get_variable, "v", {})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.equal(6, sess:run(v * 2))
  end)
end)

describe("tf.variable_scope", function()
  before_each(function() tf.reset_default_graph() end)

  it("nests, hands fn its scope, and returns fn's results", function()
    local scope, v, x = tf.variable_scope("outer", function()
      return tf.variable_scope("inner", function(s)
        return s, tf.get_variable("v", {}), 42
      end)
    end)
    assert.equal("outer/inner", scope.name)
    assert.equal("outer/inner/", scope.original_name_scope)
    assert.equal("outer/inner/v:0", v.name)
    assert.equal(42, x)
    assert.equal("", tf.get_variable_scope().name)
    -- reuse is a boolean (or AUTO_REUSE), false where nothing asked for it
    assert.is_false(tf.get_variable_scope().reuse)
    assert.is_false(scope.reuse)
    assert.is_true(tf.variable_scope("r", {reuse = true}, function(s) return s.reuse end))
  end)

  it("reopening a scope by name shares variable names but gives ops a new name scope", function()
    tf.variable_scope("s", function() tf.get_variable("w", {}) end)
    tf.variable_scope("s", {reuse = true}, function(s)
      assert.equal("s/w:0", tf.get_variable("w", {}).name)
      assert.equal("s_1/Const:0", tf.constant(1).name)
      assert.equal("s_1/", s.original_name_scope)
    end)
  end)

  it("a scope object re-enters the same scope and name scope", function()
    local saved = tf.variable_scope("model", function(s) tf.get_variable("w", {}); return s end)
    tf.variable_scope(saved, {reuse = true}, function(s)
      assert.equal("model", s.name)
      assert.equal("model/w:0", tf.get_variable("w").name)
      assert.equal("model/Const:0", tf.constant(1).name)
    end)
  end)

  it("reuse passes to sub-scopes; reuse_variables() turns it on for the rest of a block", function()
    tf.variable_scope("a", function() tf.variable_scope("b", function() tf.get_variable("v", {}) end) end)
    tf.variable_scope("a", {reuse = true}, function()
      tf.variable_scope("b", function(s)
        assert.is_true(s.reuse)
        assert.equal("a/b/v:0", tf.get_variable("v").name)
      end)
    end)
    tf.variable_scope("c", function(s)
      local first = tf.get_variable("u", {})
      tf.get_variable_scope():reuse_variables()
      assert.is_true(s.reuse)
      assert.equal(first, tf.get_variable("u"))
    end)
  end)

  it("default_name picks a unique scope name", function()
    local names = {}
    for i = 1, 3 do
      names[i] = tf.variable_scope(nil, {default_name = "layer"}, function(s) return s.name end)
    end
    assert.same({"layer", "layer_1", "layer_2"}, names)
  end)

  it("passes its initializer and dtype to get_variable", function()
    local v, w = tf.variable_scope("s", {initializer = tf.constant_initializer(5), dtype = tf.float64}, function()
      return tf.get_variable("v", {2}), tf.variable_scope("inner", function() return tf.get_variable("w", {}) end)
    end)
    assert.equal(tf.float64, v.dtype)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.same({5, 5}, sess:run(v):totable())
    assert.equal(5, sess:run(w))
  end)

  it("checks its arguments and restores the scopes after an error", function()
    assert.matches("fn must be a function", err_of(tf.variable_scope, "s"))
    assert.matches("reuse must be true, false, nil or tf.AUTO_REUSE", err_of(tf.variable_scope, "s", {reuse = 1}, print))
    assert.matches("name_or_scope must be a non-empty string", err_of(tf.variable_scope, 3, print), 1, true)
    err_of(tf.variable_scope, "broken", function() error("boom") end)
    assert.equal("", tf.get_variable_scope().name)
    assert.equal("Const:0", tf.constant(1).name)
  end)

  it("variables and their initializers ignore the control dependencies around them", function()
    local gate = tf.no_op()
    local v = tf.control_dependencies({gate}, function() return tf.Variable(1, {name = "v"}) end)
    assert.same({}, v.op.control_inputs)
    assert.same({}, v.initializer.control_inputs)
  end)

  it("a template that creates a variable on a later call is an error", function()
    local t = tf.make_template("bad", function() return tf.Variable(1) end)
    t()
    assert.matches("Trainable variable created when calling a template after the first time", err_of(t), 1, true)
  end)
end)

describe("how-tensorflow-manages-graphs: the model wrapper", function()
  before_each(function() tf.reset_default_graph() end)

  -- The question's wrapper: forecast() builds the model into the default graph
  -- every time it is called.
  local BuildsInForecast = {}
  BuildsInForecast.__index = BuildsInForecast
  function BuildsInForecast.new() return setmetatable({}, BuildsInForecast) end
  function BuildsInForecast:forecast(reuse)
    local x = tf.placeholder(tf.float32, {-1, 3})
    local w = tf.variable_scope("weight_def", {reuse = reuse}, function()
      return tf.get_variable("weights", {3, 1}, {initializer = tf.constant_initializer({1, 2, 3})})
    end)
    local prediction = tf.matmul(x, w)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())  -- stands for loading the checkpoint
    return sess:run(prediction, {[x] = {{1, 1, 1}}}):totable()
  end

  -- The answer's wrapper: the constructor builds a graph of its own and a
  -- session once; forecast() only runs.
  local BuildsOnce = {}
  BuildsOnce.__index = BuildsOnce
  function BuildsOnce.new()
    local self = setmetatable({graph = tf.Graph()}, BuildsOnce)
    self.graph:as_default(function()
      self.x = tf.placeholder(tf.float32, {-1, 3})
      local w = tf.variable_scope("weight_def", function()
        return tf.get_variable("weights", {3, 1}, {initializer = tf.constant_initializer({1, 2, 3})})
      end)
      self.prediction = tf.matmul(self.x, w)
      self.sess = tf.Session(self.graph)
      self.sess:run(tf.global_variables_initializer())
    end)
    self.graph:finalize()
    return self
  end
  function BuildsOnce:forecast()
    return self.sess:run(self.prediction, {[self.x] = {{1, 1, 1}}}):totable()
  end

  it("building in forecast() fails the second time with the reuse hint", function()
    local model_user = BuildsInForecast.new()
    assert.same({{6}}, model_user:forecast())
    local err = err_of(model_user.forecast, model_user)
    assert.matches("Variable weight_def/weights already exists, disallowed. Did you mean to set reuse=true", err, 1, true)
  end)

  it("quelling the error with reuse still grows the default graph at every call", function()
    local model_user = BuildsInForecast.new()
    model_user:forecast()
    local g = tf.get_default_graph()
    local n = g:num_ops()
    assert.same({{6}}, model_user:forecast(tf.AUTO_REUSE))
    assert.is_true(g:num_ops() > n)
  end)

  it("building once in the constructor works twice, in a graph of its own", function()
    local model_user = BuildsOnce.new()
    assert.same({{6}}, model_user:forecast())
    assert.same({{6}}, model_user:forecast())
    assert.equal(0, tf.get_default_graph():num_ops())
    local other = BuildsOnce.new()  -- a second model in another graph: no clash
    assert.same({{6}}, other:forecast())
  end)

  it("the less invasive fix: a local graph per forecast", function()
    local model_user = BuildsInForecast.new()
    local first = tf.Graph():as_default(function() return model_user:forecast() end)
    local second = tf.Graph():as_default(function() return model_user:forecast() end)
    assert.same(first, second)
  end)

  it("examples/model_wrapper.lua shows both versions", function()
    local core = require("moonflow.core")
    local root = os.getenv("PWD") or "."
    local lib = core.library_path:sub(1, 1) == "/" and core.library_path or root .. "/" .. core.library_path
    local p = assert(io.popen(string.format("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' MOONFLOW_LIB='%s' " ..
                                            "luajit '%s/examples/model_wrapper.lua' 2>&1", root, root, lib, root)))
    local out = p:read("*a")
    p:close()
    assert.matches("forecast 1:\t[[8.]]\nforecast 2:\t[[12.],\n [ 1.]]\n", out, 1, true)
    assert.matches("ops in its graph:\t12\tin the default graph:\t0\n", out, 1, true)
    assert.matches("building in forecast, call 2:\tfalse\tVariable weight_def/weights already exists", out, 1, true)
  end)
end)
