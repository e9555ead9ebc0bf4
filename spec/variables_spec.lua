-- Variables: the scenarios of tensorflow-the-confusing-parts.txt, the
-- variable parts of how-not-to-program-the-tensorflow-graph.txt, and the
-- engine's guarantees about state (per-session values, copy on write, runs
-- that allocate nothing).
local tf = require("moonflow")

local function line() return debug.getinfo(2, "l").currentline end

local function names(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v.name end
  return out
end

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("tensorflow-the-confusing-parts: variables", function()
  before_each(function() tf.reset_default_graph() end)

  it("reading a variable before it holds a value is TensorFlow's error, with the line", function()
    local count_variable = tf.get_variable("count", {}); local at = line()
    local sess = tf.Session()
    local err = err_of(sess.run, sess, count_variable)
    assert.matches("Attempting to use uninitialized value count", err, 1, true)
    assert.matches("variables_spec.lua:" .. at, err, 1, true)
    -- The session stays usable.
    assert.equal(5, sess:run(tf.constant(2) + 3))
  end)

  it("tf.assign puts a value in the variable: identity, side effect, non-dependent edge", function()
    local count_variable = tf.get_variable("count", {})
    local zero_node = tf.constant(0.)
    local assign_node = tf.assign(count_variable, zero_node)
    local sess = tf.Session()
    -- Running the assignment does not read the (uninitialized) variable, and
    -- its value is the value assigned.
    assert.equal(0, sess:run(assign_node))
    assert.equal(0, sess:run(count_variable))
    assert.same({count_variable, zero_node}, assign_node.op.inputs)
  end)

  it("an initializer does nothing until the session runs it", function()
    local const_init_node = tf.constant_initializer(0.)
    local count_variable = tf.get_variable("count", {}, {initializer = const_init_node})
    local sess = tf.Session()
    local err = err_of(sess.run, sess, {count_variable})
    assert.matches("Attempting to use uninitialized value count", err, 1, true)
  end)

  it("global_variables_initializer runs every initializer", function()
    local const_init_node = tf.constant_initializer(0.)
    local count_variable = tf.get_variable("count", {}, {initializer = const_init_node})
    local init = tf.global_variables_initializer()
    local sess = tf.Session()
    assert.is_nil(sess:run(init))
    assert.equal(0, sess:run(count_variable))
    assert.equal("NoOp", init.type)
    assert.equal(count_variable.initializer, init.control_inputs[1])
  end)

  it("a train op is a group of assignments: the toy linear regression learns m and b", function()
    -- The text's script with the gradient step written out (d/dm, d/db of the
    -- squared error) as the assignments an optimizer would make.
    local m = tf.get_variable("m", {}, {initializer = tf.constant_initializer(0.)})
    local b = tf.get_variable("b", {}, {initializer = tf.constant_initializer(0.)})
    local init = tf.global_variables_initializer()
    local x = tf.placeholder(tf.float32)
    local y = tf.placeholder(tf.float32)
    local y_guess = m * x + b
    local loss = tf.square(y - y_guess)
    local err = y_guess - y
    local lr = 0.05
    local train_op = tf.group(tf.assign_sub(m, lr * 2 * err * x), tf.assign_sub(b, lr * 2 * err))
    local sess = tf.Session()
    sess:run(init)
    local true_m, true_b = 0.3519, 0.3242
    local state = 12345
    local last
    for _ = 1, 5000 do
      state = (state * 1103515245 + 12345) % 2147483648
      local input = state / 2147483648
      local r = sess:run({loss, train_op}, {[x] = input, [y] = true_m * input + true_b})
      last = r[1]
    end
    local learned = sess:run({m, b})
    assert.is_true(last < 1e-8)
    assert.near(true_m, learned[1], 1e-3)
    assert.near(true_b, learned[2], 1e-3)
  end)
end)

describe("how-not-to-program-the-tensorflow-graph: variables", function()
  before_each(function() tf.reset_default_graph() end)

  it("an initializer built once reinitializes every time it runs", function()
    local x = tf.Variable(1.0)
    local session = tf.Session()
    local initializer = tf.global_variables_initializer()
    session:run(initializer)
    session:run(tf.assign(x, 7))
    assert.equal(7, session:run(x))
    session:run(initializer)
    assert.equal(1, session:run(x))
  end)

  it("building the initializer inside run() adds a new op every time", function()
    tf.Variable(1.0)
    local session = tf.Session()
    local g = tf.get_default_graph()
    local n = g:num_ops()
    session:run(tf.global_variables_initializer())
    session:run(tf.global_variables_initializer())
    assert.equal(n + 2, g:num_ops())
    assert.equal("init", g:get_operations()[n + 1].name)
    assert.equal("init_1", g:get_operations()[n + 2].name)
  end)

  it("y = x + 1.0 is an add op, and reassigning y leaves the first one in the graph", function()
    local x = tf.Variable(1.0)
    local y = x + 1.0
    assert.equal("Add", y.op.type)
    y = x + 1.0
    assert.equal("Add_1", y.op.name)
    local adds = 0
    for _, op in ipairs(tf.get_default_graph():get_operations()) do
      if op.type == "Add" then adds = adds + 1 end
    end
    assert.equal(2, adds)
  end)

  it("x = x + 1 in a loop builds ops; tf.assign(x, x + 1) built once runs in constant space", function()
    local x0 = tf.Variable(1.0, {name = "x"})
    local g = tf.get_default_graph()
    local x = x0
    local before = g:num_ops()
    for _ = 1, 1000 do x = x + 1 end
    assert.equal(before + 2000, g:num_ops())  -- a Const and an Add per step, nothing computed

    local increment_x = tf.assign(x0, x0 + 1)
    local session = tf.Session()
    session:run(x0.initializer)
    session:run(increment_x)
    local ops_now, allocs = g:num_ops(), session:num_allocations()
    for _ = 1, 100000 do session:run(increment_x) end
    assert.equal(100002, session:run(x0))
    assert.equal(ops_now, g:num_ops())
    assert.equal(allocs, session:num_allocations())
  end)

  it("the shape of tf.reshape becomes a constant of the graph (currying)", function()
    local input_tensor = tf.placeholder(tf.float32)
    local reshape_to_28 = tf.reshape(input_tensor, {28, 28})
    local shape_op = reshape_to_28.op.inputs[2].op
    assert.equal("Const", shape_op.type)
    assert.same({28, 28}, shape_op:get_attr("value"):totable())
    assert.same({28, 28}, reshape_to_28:get_shape():as_list())
  end)
end)

describe("tf.Variable", function()
  before_each(function() tf.reset_default_graph() end)

  it("is the tensor of its variable op, with the variable's fields", function()
    local v = tf.Variable({1, 2}, {name = "v"})
    assert.is_true(tf.is_tensor(v))
    assert.equal("v:0", v.name)
    assert.equal("v", v.op.name)
    assert.equal("VariableV2", v.op.type)
    assert.equal(tf.float32, v.dtype)
    assert.same({2}, v:get_shape():as_list())
    assert.equal("<tf.Variable 'v:0' shape=(2,) dtype=float32>", tostring(v))
    assert.equal("Assign", v.initializer.type)
    assert.equal("v/Assign", v.initializer.name)
    assert.equal("v/initial_value:0", v.initial_value.name)
    assert.is_true(v.trainable)
    assert.equal(v, tf.get_default_graph():get_tensor_by_name("v:0"))
  end)

  it("takes Lua values, arrays, tensors and functions, with explicit dtypes", function()
    local sess = tf.Session()
    local a = tf.Variable(3, {dtype = tf.int32})
    local b = tf.Variable(tf.array({{1, 2}, {3, 4}}, tf.float64))
    local c = tf.Variable(tf.fill({2}, tf.constant(7, tf.int64)))
    local d = tf.Variable(function() return tf.ones({3}) * 2 end, {dtype = tf.float32})
    local e = tf.Variable(true)
    sess:run(tf.global_variables_initializer())
    assert.equal(tf.int32, a.dtype)
    assert.equal(3, sess:run(a))
    assert.equal(tf.float64, b.dtype)
    assert.same({{1, 2}, {3, 4}}, sess:run(b):totable())
    assert.same({7, 7}, sess:run(c):totable())
    assert.same({3}, d:get_shape():as_list())
    assert.same({2, 2, 2}, sess:run(d):totable())
    assert.equal("Variable_3/Initializer/Mul:0", d.initial_value.name)
    assert.equal(true, sess:run(e))
  end)

  it("rejects what it cannot make a variable of", function()
    assert.matches("needs the dtype option", err_of(tf.Variable, function() return 1 end))
    assert.matches("has dtype int32 but dtype float32 was asked for; use tf.cast",
                   err_of(tf.Variable, tf.constant(1, tf.int32), {dtype = tf.float32}))
    assert.matches("an initial value is required", err_of(tf.Variable))
    local p = tf.placeholder(tf.float32, {-1})
    assert.matches("initial_value must have a shape specified", err_of(tf.Variable, p))
    assert.matches("unknown option 'nmae'", err_of(tf.Variable, 1, {nmae = "x"}))
  end)

  it("validate_shape = false leaves the shape open", function()
    local p = tf.placeholder(tf.float32, {-1})
    local v = tf.Variable(p, {validate_shape = false})
    assert.is_nil(v:get_shape().dims)
    local sess = tf.Session()
    sess:run(v.initializer, {[p] = {1, 2, 3}})
    assert.same({1, 2, 3}, sess:run(v):totable())
    sess:run(v.initializer, {[p] = {4}})
    assert.same({4}, sess:run(v):totable())
  end)

  it("works wherever a tensor does: operators, ops, methods, feeds, fetches by name", function()
    local w = tf.Variable({{1, 2}, {3, 4}}, {name = "w"})
    local x = tf.placeholder(tf.float32, {1, 2})
    local y = tf.matmul(x, w) + w:reduce_sum(0)
    local sess = tf.Session()
    sess:run(w.initializer)
    assert.same({{8, 12}}, sess:run(y, {[x] = {{1, 1}}}):totable())
    assert.same({{1, 2}, {3, 4}}, sess:run("w:0"):totable())
    -- A feed replaces the variable's value for one run only.
    assert.same({{2, 2}}, sess:run(tf.matmul(x, w), {[x] = {{1, 1}}, [w] = {{1, 1}, {1, 1}}}):totable())
    assert.same({{1, 2}, {3, 4}}, sess:run(w):totable())
  end)

  it("is listed in the global and trainable collections", function()
    local a = tf.Variable(1, {name = "a"})
    local b = tf.Variable(2, {name = "b", trainable = false})
    local c = tf.Variable(3, {name = "c", collections = {tf.GraphKeys.LOCAL_VARIABLES}})
    assert.same({"a:0", "b:0"}, names(tf.global_variables()))
    assert.same({"a:0", "c:0"}, names(tf.trainable_variables()))  -- trainable joins that list anyway
    assert.same({"c:0"}, names(tf.local_variables()))
    assert.equal(a, tf.global_variables()[1])
    assert.is_false(b.trainable)
    local sess = tf.Session()
    sess:run(tf.local_variables_initializer())
    assert.equal(3, sess:run(c))
    assert.same({"a", "b"}, sess:run(tf.report_uninitialized_variables()))
  end)
end)

describe("assignments", function()
  before_each(function() tf.reset_default_graph() end)

  it("assign, assign_add and assign_sub return the new value, also as methods", function()
    local v = tf.Variable({1, 2, 3}, {dtype = tf.int32})
    local sess = tf.Session()
    sess:run(v.initializer)
    assert.same({11, 12, 13}, sess:run(tf.assign_add(v, {10, 10, 10})):totable())
    assert.same({10, 10, 10}, sess:run(v:assign_sub({1, 2, 3})):totable())
    assert.same({0, 1, 2}, sess:run(v:assign({0, 1, 2})):totable())
    assert.same({0, 1, 2}, sess:run(v):totable())
    assert.equal(tf.int32, tf.assign(v, {0, 0, 0}).dtype)
  end)

  it("works for every numeric dtype; Lua numbers take the variable's dtype", function()
    local sess = tf.Session()
    for _, dtype in ipairs({tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8}) do
      local v = tf.Variable(5, {dtype = dtype})
      sess:run(v.initializer)
      assert.equal(7, sess:run(v:assign_add(2)))
      assert.equal(4, sess:run(v:assign_sub(3)))
      assert.equal(9, sess:run(v:assign(9)))
    end
    local flag = tf.Variable(false)
    sess:run(flag.initializer)
    assert.equal(true, sess:run(flag:assign(true)))
    assert.matches("AssignAdd needs a numeric variable, got bool", err_of(tf.assign_add, flag, true))
  end)

  it("checks dtypes and shapes when the op is built, naming the variable", function()
    local v = tf.Variable({1, 2}, {name = "v"})
    local at
    local err = err_of(function() at = line(); local r = tf.assign(v, {1, 2, 3}); return r end)
    assert.matches("Assign: Shapes must be equal: variable 'v' has shape (2,) but the value has shape (3,)", err, 1, true)
    assert.matches("variables_spec.lua:" .. at, err, 1, true)
    assert.matches("AssignAdd: the value has dtype int32 but variable 'v' has dtype float32; use tf.cast",
                   err_of(tf.assign_add, v, tf.constant({1, 2}, tf.int32)), 1, true)
    assert.matches("tf.assign: ref must be a variable", err_of(tf.assign, tf.constant(1), 2), 1, true)
    assert.matches("tf.assign_sub: ref must be a variable", err_of(tf.assign_sub, v + 1, 2), 1, true)
  end)

  it("a value fed at run time must fit the declared shape unless validate_shape = false", function()
    local v = tf.get_variable("v", {3}, {dtype = tf.int32})
    local p = tf.placeholder(tf.int32)
    local set = tf.assign(v, p)
    local sess = tf.Session()
    local err = err_of(sess.run, sess, set, {[p] = {1, 2}})
    assert.matches("Assign: Shapes must be equal: the variable has shape (3,) but the value has shape (2,)", err, 1, true)
    assert.matches("[[node Assign (defined at spec/variables_spec.lua:", err, 1, true)
    assert.same({1, 2, 3}, sess:run(set, {[p] = {1, 2, 3}}):totable())
    assert.matches("has shape (3,) but the value has shape (4,)", err_of(sess.run, sess, set, {[p] = {1, 2, 3, 4}}), 1, true)
    assert.same({4, 5}, sess:run(tf.assign(v, p, {validate_shape = false}), {[p] = {4, 5}}):totable())
  end)

  it("validate_shape = false lets an assignment change the shape", function()
    local v = tf.Variable({1, 2})
    local sess = tf.Session()
    sess:run(v.initializer)
    assert.same({1, 2, 3}, sess:run(tf.assign(v, {1, 2, 3}, {validate_shape = false})):totable())
    assert.same({2, 3, 4}, sess:run(v + 1):totable())
    -- Adding needs equal shapes at run time too.
    local err = err_of(sess.run, sess, tf.assign_add(v, {1, 1}))
    assert.matches("AssignAdd requires shapes of both tensors to match. lhs shape= [3] rhs shape= [2]", err, 1, true)
  end)

  it("assign_add on an uninitialized variable names the variable and both lines", function()
    local u = tf.get_variable("u", {2}, {dtype = tf.int32}); local made = line()
    local inc = tf.assign_add(u, {1, 1}); local used = line()
    local sess = tf.Session()
    local err = err_of(sess.run, sess, inc)
    assert.matches("Attempting to use uninitialized value u (created at spec/variables_spec.lua:" .. made .. ")",
                   err, 1, true)
    assert.matches("variables_spec.lua:" .. used, err, 1, true)
  end)

  it("an uninitialized variable read inside an expression is named", function()
    local w = tf.Variable(2, {name = "weight"})
    local y = w * 3 + 1
    local err = err_of(tf.Session().run, tf.Session(), y)
    assert.matches("Attempting to use uninitialized value weight", err, 1, true)
  end)

  it("empty variables assign, add and read", function()
    local v = tf.Variable(tf.zeros({0, 3}))
    local sess = tf.Session()
    sess:run(v.initializer)
    assert.same({0, 3}, sess:run(v:assign_add(tf.ones({0, 3}))):shape())
    assert.same({0, 3}, sess:run(v:assign(tf.zeros({0, 3}))):shape())
    assert.same({0, 3}, sess:run(v):shape())
  end)

  it("side effects happen at most once per run", function()
    local v = tf.Variable(0, {dtype = tf.int32})
    local inc = tf.assign_add(v, 1)
    local doubled = inc * 2
    local sess = tf.Session()
    sess:run(v.initializer)
    local r = sess:run({inc, inc, inc, doubled})
    assert.same({1, 1, 1, 2}, r)
    assert.equal(1, sess:run(v))
    sess:run({inc.op, tf.group(inc, inc)})
    assert.equal(2, sess:run(v))
  end)

  it("two sessions on one graph hold independent values", function()
    local v = tf.Variable(10, {name = "v"})
    local inc = v:assign_add(1)
    local s1, s2 = tf.Session(), tf.Session()
    s1:run(v.initializer)
    s2:run(v.initializer)
    for _ = 1, 5 do s1:run(inc) end
    s2:run(v:assign(-1))
    assert.equal(15, s1:run(v))
    assert.equal(-1, s2:run(v))
    local s3 = tf.Session()
    assert.matches("uninitialized value v", err_of(s3.run, s3, v), 1, true)
    s1:close()
    assert.matches("closed Session", err_of(s1.run, s1, v), 1, true)
    assert.equal(-1, s2:run(v))
  end)

  it("a fetched value is a snapshot: later assignments do not change it", function()
    local v = tf.Variable({1, 2, 3})
    local sess = tf.Session()
    sess:run(v.initializer)
    local before = sess:run(v)
    local returned = sess:run(v:assign_add({1, 1, 1}))
    sess:run(v:assign_add({10, 10, 10}))
    sess:run(v:assign({0, 0, 0}))
    assert.same({1, 2, 3}, before:totable())
    assert.same({2, 3, 4}, returned:totable())
    assert.same({0, 0, 0}, sess:run(v):totable())
  end)

  it("a value read in a run is not changed by an assignment later in that run", function()
    local v = tf.Variable({1, 2})
    local snapshot = tf.identity(v)
    local sum = v + 0
    local update = tf.control_dependencies({snapshot, sum}, function() return v:assign({5, 5}) end)
    local sess = tf.Session()
    sess:run(v.initializer)
    local r = sess:run({snapshot, sum, update, v})
    assert.same({1, 2}, r[1]:totable())
    assert.same({1, 2}, r[2]:totable())
    assert.same({5, 5}, r[3]:totable())
    assert.same({1, 2}, r[4]:totable())  -- the variable's own tensor: its value when the run began
    assert.same({5, 5}, sess:run(v):totable())
  end)

  it("updates in place: steps of assign(x, x * 0.5 + 1) and assign_add allocate nothing after the first", function()
    local x = tf.Variable(tf.zeros({1000}))
    local step = tf.assign(x, x * 0.5 + 1)
    local acc = tf.assign_add(x, tf.ones({1000}))
    local sess = tf.Session()
    sess:run(x.initializer)
    sess:run(step.op)
    sess:run(acc.op)
    local allocs = sess:num_allocations()
    for _ = 1, 200 do sess:run(step.op); sess:run(acc.op) end
    assert.equal(allocs, sess:num_allocations())
    assert.near(4, sess:run(x):get(999), 1e-5)  -- the fixed point of x -> (x/2 + 1) + 1
  end)

  it("v:read_value() reads after the ops it depends on", function()
    local a = tf.Variable(1, {dtype = tf.int32})
    local up = tf.assign_add(a, 1)
    local fresh, plain = tf.control_dependencies({up}, function() return a:read_value(), tf.identity(a) end)
    assert.equal("ReadVariable", fresh.op.type)
    local sess = tf.Session()
    sess:run(a.initializer)
    assert.same({2, 1}, sess:run({fresh, plain}))
    assert.same({3, 2, 2}, sess:run({fresh, plain, a}))
    assert.matches("is not a variable", err_of(function() return tf.constant(1):read_value() end))
  end)

  it("v:load(value, sess) sets the value through the initializer", function()
    local v = tf.get_variable("v", {2}, {dtype = tf.float64})
    local sess = tf.Session()
    v:load({3, 4}, sess)
    assert.same({3, 4}, sess:run(v):totable())
    assert.matches("a session is required", err_of(v.load, v, {1, 2}))
  end)

  it("is_variable_initialized and report_uninitialized_variables answer per session", function()
    local a = tf.Variable(1, {name = "a"})
    local b = tf.get_variable("b", {}, {dtype = tf.int32})
    local check = tf.is_variable_initialized(a)
    local report = tf.report_uninitialized_variables()
    local only_b = tf.report_uninitialized_variables({b})
    local sess = tf.Session()
    assert.is_false(sess:run(check))
    assert.same({"a", "b"}, sess:run(report))
    sess:run(tf.variables_initializer({a}))
    assert.is_true(sess:run(check))
    local r = sess:run({report, only_b, n = check})
    assert.same({{"b"}, {"b"}, n = true}, r)
    sess:run(b.initializer)
    assert.same({}, sess:run(report))
    assert.same({}, sess:run(tf.report_uninitialized_variables({})))
    assert.is_false(tf.Session():run(check))
    assert.matches("var_list%[1%] is not a variable", err_of(tf.variables_initializer, {tf.constant(1)}))
  end)
end)

describe("initializers", function()
  before_each(function() tf.reset_default_graph() end)

  -- Mean and standard deviation of an initializer's values for a shape.
  local function stats(init, shape, dtype)
    local v = tf.get_variable("v", shape, {initializer = init, dtype = dtype})
    local sess = tf.Session()
    sess:run(v.initializer)
    local a = sess:run(v)
    local n, s, s2, lo, hi = a:size(), 0, 0, math.huge, -math.huge
    for i = 0, n - 1 do
      local x = a:data()[i]
      s, s2 = s + x, s2 + x * x
      lo, hi = math.min(lo, x), math.max(hi, x)
    end
    local mean = s / n
    return mean, math.sqrt(s2 / n - mean * mean), lo, hi, a
  end

  it("zeros, ones and constant fill every dtype", function()
    local sess = tf.Session()
    local z = tf.get_variable("z", {2, 2}, {dtype = tf.int32, initializer = tf.zeros_initializer()})
    local o = tf.get_variable("o", {3}, {dtype = tf.float64, initializer = tf.ones_initializer()})
    local c = tf.get_variable("c", {2}, {dtype = tf.int64, initializer = tf.constant_initializer(7)})
    local l = tf.get_variable("l", {2, 2}, {initializer = tf.constant_initializer({1, 2, 3, 4})})
    local short = tf.get_variable("short", {5}, {initializer = tf.constant_initializer({1, 2})})
    local b = tf.get_variable("b", {2}, {dtype = tf.bool, initializer = tf.ones_initializer()})
    sess:run(tf.global_variables_initializer())
    assert.same({{0, 0}, {0, 0}}, sess:run(z):totable())
    assert.same({1, 1, 1}, sess:run(o):totable())
    assert.same({7, 7}, sess:run(c):totable())
    assert.same({{1, 2}, {3, 4}}, sess:run(l):totable())
    assert.same({1, 2, 2, 2, 2}, sess:run(short):totable())  -- TensorFlow repeats the last value
    assert.same({true, true}, sess:run(b):totable())
    assert.matches("Too many elements provided. Needed at most 2, but received 3",
                   err_of(tf.get_variable, "too_many", {2}, {initializer = tf.constant_initializer({1, 2, 3})}))
  end)

  it("integer variables default to zeros", function()
    local v = tf.get_variable("n", {3}, {dtype = tf.int32})
    local sess = tf.Session()
    sess:run(v.initializer)
    assert.same({0, 0, 0}, sess:run(v):totable())
  end)

  it("random_normal: mean and stddev of 40,000 draws", function()
    local mean, std = stats(tf.random_normal_initializer(2, 3, 1), {200, 200})
    assert.near(2, mean, 0.05)
    assert.near(3, std, 0.03)
  end)

  it("random_uniform: mean, stddev and bounds of 40,000 draws", function()
    local mean, std, lo, hi = stats(tf.random_uniform_initializer({minval = -1, maxval = 3, seed = 2}), {40000})
    assert.near(1, mean, 0.03)
    assert.near(4 / math.sqrt(12), std, 0.01)
    assert.is_true(lo >= -1 and hi < 3)
  end)

  it("truncated_normal: draws within two stddevs, whose spread is 0.88 stddev", function()
    local mean, std, lo, hi = stats(tf.truncated_normal_initializer(1, 0.5, 3, tf.float64), {40000}, tf.float64)
    assert.near(1, mean, 0.01)
    assert.near(0.5 * 0.8796, std, 0.005)
    assert.is_true(lo > 0 and hi < 2)
  end)

  it("glorot_uniform (the default): limit sqrt(6 / (fan_in + fan_out))", function()
    local mean, std, lo, hi = stats(nil, {100, 300})
    local limit = math.sqrt(6 / 400)
    assert.near(0, mean, 0.003)
    assert.near(limit / math.sqrt(3), std, 0.002)
    assert.is_true(lo >= -limit and hi <= limit and hi > 0.99 * limit)
  end)

  it("glorot fans count every tap of a convolution kernel", function()
    -- {3, 3, 16, 32}: fan_in = 3*3*16 = 144, fan_out = 3*3*32 = 288.
    local _, std, lo, hi = stats(tf.glorot_uniform_initializer(5), {3, 3, 16, 32})
    local limit = math.sqrt(6 / (144 + 288))
    assert.is_true(lo >= -limit and hi <= limit and hi > 0.99 * limit)
    assert.near(limit / math.sqrt(3), std, 0.003)
  end)

  it("glorot_normal: a truncated normal of stddev sqrt(2 / (fan_in + fan_out))", function()
    local mean, std, lo, hi = stats(tf.glorot_normal_initializer({seed = 4}), {200, 200})
    local want = math.sqrt(2 / 400)
    assert.near(0, mean, 0.002)
    assert.near(want, std, 0.02 * want)
    local bound = 2 * want / 0.87962566103423978
    assert.is_true(lo > -bound and hi < bound)
  end)

  it("variance_scaling: fan_in, fan_out, fan_avg", function()
    local _, std_in = stats(tf.variance_scaling_initializer(2, "fan_in", "untruncated_normal", 1), {100, 400})
    assert.near(math.sqrt(2 / 100), std_in, 0.03 * math.sqrt(2 / 100))
    tf.reset_default_graph()
    local _, std_out = stats(tf.variance_scaling_initializer({mode = "fan_out", distribution = "uniform"}), {100, 400})
    assert.near(math.sqrt(1 / 400), std_out, 0.03 * math.sqrt(1 / 400))
    assert.matches('mode must be "fan_in"', err_of(tf.variance_scaling_initializer, 1, "fan_sideways"))
  end)

  it("random initializers need a float dtype", function()
    assert.matches("dtype must be float32 or float64, got int32",
                   err_of(tf.get_variable, "i", {2}, {dtype = tf.int32, initializer = tf.random_normal_initializer()}))
  end)

  it("initializers are callable objects: init(shape, dtype) builds the tensor", function()
    local init = tf.constant_initializer(2)
    assert.equal("<tf.constant_initializer>", tostring(init))
    local t = init({2, 3}, tf.float64)
    assert.equal(tf.float64, t.dtype)
    assert.same({{2, 2, 2}, {2, 2, 2}}, tf.Session():run(t):totable())
    assert.equal(tf.glorot_uniform_initializer, tf.initializers.glorot_uniform)
  end)
end)

describe("random seeds", function()
  before_each(function() tf.reset_default_graph() end)

  local function values(build)
    tf.reset_default_graph()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    return sess:run(v):totable()
  end

  it("an op seed gives the same values in every session and every rebuilt graph", function()
    local function build() return tf.get_variable("w", {50}, {initializer = tf.truncated_normal_initializer(0, 1, 42)}) end
    local a = values(build)
    assert.same(a, values(build))
    tf.reset_default_graph()
    local v = build()
    local s1, s2 = tf.Session(), tf.Session()
    s1:run(v.initializer)
    s2:run(v.initializer)
    assert.same(s1:run(v):totable(), s2:run(v):totable())
    assert.not_same(a, values(function()
      return tf.get_variable("w", {50}, {initializer = tf.truncated_normal_initializer(0, 1, 43)})
    end))
  end)

  it("a graph seed alone makes every initializer reproducible", function()
    local function build()
      tf.set_random_seed(7)
      tf.get_variable("a", {20})
      return tf.get_variable("b", {20})
    end
    local first = values(build)
    assert.same(first, values(build))
    assert.not_same(first, values(function() tf.set_random_seed(8); tf.get_variable("a", {20}); return tf.get_variable("b", {20}) end))
  end)

  it("running an initializer again draws new numbers, as TensorFlow does", function()
    local v = tf.get_variable("w", {10}, {initializer = tf.random_uniform_initializer(0, 1, 3)})
    local sess = tf.Session()
    sess:run(v.initializer)
    local a = sess:run(v):totable()
    sess:run(v.initializer)
    assert.not_same(a, sess:run(v):totable())
  end)
end)
