-- Control flow: tf.cond, tf.case, tf.where and tf.while_loop (values, structures,
-- shapes, dtypes, variables, nesting and errors). TensorArrays and gradients
-- have their own spec files (tensor_array_spec.lua, control_flow_grad_spec.lua).
local ffi = require("ffi")
local tf = require("moonflow")
local H = require("spec.helpers")
setup(H.growth_off)
teardown(H.growth_restore)

-- The sweeps below build ops between runs on purpose: no growth warnings.
local function i32(v) return tf.constant(v, tf.int32) end
local function totable(v) return type(v) == "table" and v:totable() or v end

describe("tf.cond", function()
  before_each(function() tf.reset_default_graph() end)

  it("runs the branch the predicate selects (effective-tensorflow: 3)", function()
    local a, b = tf.constant(1), tf.constant(2)
    local p = tf.constant(true)
    local x = tf.cond(p, function() return a + b end, function() return a * b end)
    local sess = tf.Session()
    assert.equal(3, sess:run(x))
    local q = tf.placeholder(tf.bool, {})
    local y = tf.cond(q, function() return a + b end, function() return a * b end)
    assert.equal(3, sess:run(y, {[q] = true}))
    assert.equal(2, sess:run(y, {[q] = false}))
    assert.equal("If", x.op.type)
    assert.equal("cond:0", x.name)
  end)

  it("assigns in the taken branch only", function()
    local v = tf.Variable(0, {name = "v"})
    local w = tf.Variable(10, {name = "w"})
    local p = tf.placeholder(tf.bool, {})
    local r = tf.cond(p, function() return tf.assign(v, 1) end, function() return tf.assign(w, 2) end)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.equal(1, sess:run(r, {[p] = true}))
    assert.same({1, 10}, sess:run({v, w}))
    assert.equal(2, sess:run(r, {[p] = false}))
    assert.same({1, 2}, sess:run({v, w}))
  end)

  it("runs a branch's assignments even when its result does not use them", function()
    local count = tf.Variable(0, {name = "count"})
    local p = tf.placeholder(tf.bool, {})
    local x = tf.constant(5)
    local r = tf.cond(p, function() tf.assign_add(count, 1); return x + 1 end, function() return x - 1 end)
    local sess = tf.Session()
    sess:run(count.initializer)
    assert.equal(6, sess:run(r, {[p] = true}))
    assert.equal(4, sess:run(r, {[p] = false}))
    assert.equal(6, sess:run(r, {[p] = true}))
    assert.equal(2, sess:run(count))
  end)

  it("reads variables' current values and sees an uninitialized one as an error", function()
    local v = tf.Variable(3, {name = "v"})
    local p = tf.placeholder(tf.bool, {})
    local r = tf.cond(p, function() return v * 2 end, function() return tf.constant(0) end)
    local sess = tf.Session()
    local err = H.error_of(sess.run, sess, r, {[p] = true})
    assert.matches("Attempting to use uninitialized value v", err)
    assert.equal(0, sess:run(r, {[p] = false}))  -- the untaken branch does not read it
    sess:run(v.initializer)
    assert.equal(6, sess:run(r, {[p] = true}))
    sess:run(tf.assign(v, 5))
    assert.equal(10, sess:run(r, {[p] = true}))
  end)

  it("takes a Lua boolean as the predicate", function()
    local sess = tf.Session()
    assert.equal(1, sess:run(tf.cond(true, function() return tf.constant(1) end, function() return tf.constant(2) end)))
    assert.equal(2, sess:run(tf.cond(false, function() return tf.constant(1) end, function() return tf.constant(2) end)))
  end)

  it("rejects a predicate that is not a scalar bool", function()
    local f = function() return tf.constant(1) end
    local err = H.error_of(tf.cond, tf.constant(1.0), f, f)
    assert.matches("pred must be a scalar bool tensor, got Const:0 %(dtype float32, shape %(%)%)", err)
    err = H.error_of(tf.cond, tf.constant({true, false}), f, f)
    assert.matches("shape %(2,%)", err)
    local ok
    ok, err = pcall(tf.cond, 1, f, f)
    assert.is_false(ok)
    assert.matches("pred must be a scalar bool tensor or a boolean, got 1 %(at spec/control_flow_spec.lua:%d+%)", err)
    -- an unknown shape is checked when the op runs
    local p = tf.placeholder(tf.bool)
    local r = tf.cond(p, f, f)
    local sess = tf.Session()
    err = H.error_of(sess.run, sess, r, {[p] = {true, true}})
    assert.matches("predicate must be a scalar bool, got shape %(2,%)", err)
    assert.equal(1, sess:run(r, {[p] = true}))
  end)

  it("requires both branches to return the same structure and dtypes", function()
    local p = tf.constant(true)
    local err = H.error_of(tf.cond, p, function() return {tf.constant(1), tf.constant(2)} end,
                           function() return {tf.constant(1)} end)
    assert.matches("must return the same structure: the results%[1%] has 2 entries in one and 1 in the other", err)
    err = H.error_of(tf.cond, p, function() return tf.constant(1), tf.constant(2) end,
                     function() return tf.constant(1) end)
    assert.matches("true_fn returns 2 values and false_fn 1", err)
    err = H.error_of(tf.cond, p, function() return {a = tf.constant(1)} end, function() return {b = tf.constant(1)} end)
    assert.matches("has key a in one and b in the other", err)
    err = H.error_of(tf.cond, p, function() return tf.constant(1) end, function() return tf.constant(1, tf.int32) end)
    assert.matches("result 1 is a float32 tensor in true_fn but a int32 tensor in false_fn", err)
    assert.matches("use tf.cast", err)
  end)

  it("returns structures, multiple values and Lua values lifted to the other branch's dtype", function()
    local p = tf.placeholder(tf.bool, {})
    local a, b = tf.cond(p, function() return {x = tf.constant(1, tf.int32), y = {tf.constant(2.5)}}, 7 end,
                         function() return {x = 3, y = {tf.constant(4.5)}}, tf.constant(8, tf.int64) end)
    assert.equal(tf.int32, a.x.dtype)
    assert.equal(tf.int64, b.dtype)
    local sess = tf.Session()
    local r = sess:run({a.x, a.y[1], b}, {[p] = true})
    assert.same({1, 2.5, 7}, r)
    r = sess:run({a.x, a.y[1], b}, {[p] = false})
    assert.same({3, 4.5, 8}, r)
  end)

  it("gives each output the most specific shape both branches allow", function()
    local p = tf.placeholder(tf.bool, {})
    local u = tf.placeholder(tf.float32, {2, -1})
    local r1, r2, r3, r4 = tf.cond(p,
      function() return tf.zeros({2, 3}), tf.zeros({2}), tf.zeros({2, 2}), tf.zeros({4}) end,
      function() return u, tf.zeros({3}), tf.zeros({2}), tf.zeros({4}) end)
    assert.same({2, -1}, r1:get_shape():as_list())
    assert.same({-1}, r2:get_shape():as_list())
    assert.is_nil(r3:get_shape().dims)
    assert.same({4}, r4:get_shape():as_list())
    local sess = tf.Session()
    local v = sess:run(r1, {[p] = false, [u] = {{1, 2, 3, 4}, {5, 6, 7, 8}}})
    assert.same({2, 4}, v:shape())
    assert.same({2}, sess:run(r3, {[p] = false, [u] = {{1}, {2}}}):shape())
  end)

  it("captures placeholders and returns outer tensors as they are", function()
    local x = tf.placeholder(tf.float32, {-1})
    local p = tf.placeholder(tf.bool, {})
    local r = tf.cond(p, function() return x end, function() return x * 2 end)
    local sess = tf.Session()
    assert.same({1, 2}, sess:run(r, {[p] = true, [x] = {1, 2}}):totable())
    assert.same({2, 4, 6}, sess:run(r, {[p] = false, [x] = {1, 2, 3}}):totable())
    assert.same({0}, sess:run(r, {[p] = false, [x] = tf.Array.new(tf.float32, {0})}):shape())
  end)

  it("nests to any depth", function()
    local x = tf.placeholder(tf.int32, {})
    local function classify(v)
      return tf.cond(tf.less(v, 0), function() return tf.constant(-1, tf.int32) end, function()
        return tf.cond(tf.equal(v, 0), function() return tf.constant(0, tf.int32) end, function()
          return tf.cond(tf.less(v, 10), function() return v * 10 end, function() return v * 100 end)
        end)
      end)
    end
    local r = classify(x)
    local sess = tf.Session()
    local got = {}
    for _, v in ipairs({-5, 0, 3, 12}) do got[#got + 1] = sess:run(r, {[x] = v}) end
    assert.same({-1, 0, 30, 1200}, got)
  end)

  it("returns an Operation for a branch that returns one", function()
    local v = tf.Variable(0, {name = "v"})
    local p = tf.placeholder(tf.bool, {})
    local op = tf.cond(p, function() return tf.group(tf.assign(v, 5)) end, function() return tf.no_op() end)
    assert.equal("If", op.type)
    local sess = tf.Session()
    sess:run(v.initializer)
    sess:run(op, {[p] = false})
    assert.equal(0, sess:run(v))
    sess:run(op, {[p] = true})
    assert.equal(5, sess:run(v))
  end)

  it("returns its op when the branches return nothing", function()
    local v = tf.Variable(0, {name = "v"})
    local p = tf.placeholder(tf.bool, {})
    local op = tf.cond(p, function() tf.assign(v, 7) end, function() end)
    assert.equal("If", op.type)
    local sess = tf.Session()
    sess:run(v.initializer)
    sess:run(op, {[p] = false})
    assert.equal(0, sess:run(v))
    sess:run(op, {[p] = true})
    assert.equal(7, sess:run(v))
  end)

  it("names the failing op inside a branch and its line; the session stays usable", function()
    local p = tf.placeholder(tf.bool, {})
    local x = tf.placeholder(tf.float32, {-1})
    local r = tf.cond(p, function() return tf.reshape(x, {2, 2}) end, function() return tf.reshape(x, {1, -1}) end)
    local sess = tf.Session()
    local err = H.error_of(sess.run, sess, r, {[p] = true, [x] = {1, 2, 3}})
    assert.matches("Reshape", err)
    assert.matches("control_flow_spec.lua:%d+", err)
    assert.same({2, 2}, sess:run(r, {[p] = true, [x] = {1, 2, 3, 4}}):shape())
  end)

  it("errors when a tensor made inside a branch is used outside it", function()
    local leaked
    tf.cond(tf.constant(true), function() leaked = tf.constant(1) * 2; return leaked end,
            function() return tf.constant(0) end)
    local err = H.error_of(function() return leaked + 1 end)
    assert.matches("was made inside a tf.cond branch or tf.while_loop body", err)
  end)
end)

describe("tf.case", function()
  before_each(function() tf.reset_default_graph() end)

  local function case_of(x, opts)
    return tf.case({{tf.less(x, 0), function() return tf.constant(-1, tf.int32) end},
                    {tf.less(x, 10), function() return tf.constant(1, tf.int32) end},
                    {tf.less(x, 100), function() return tf.constant(2, tf.int32) end}}, opts)
  end

  it("returns the first true predicate's function, else the default", function()
    local x = tf.placeholder(tf.int32, {})
    local r = case_of(x, {default = function() return tf.constant(99, tf.int32) end})
    local sess = tf.Session()
    local got = {}
    for _, v in ipairs({-3, 3, 30, 300}) do got[#got + 1] = sess:run(r, {[x] = v}) end
    assert.same({-1, 1, 2, 99}, got)
  end)

  it("takes the last pair's function as the default when none is given", function()
    local x = tf.placeholder(tf.int32, {})
    local r = case_of(x)
    local sess = tf.Session()
    assert.equal(2, sess:run(r, {[x] = 500}))
    assert.equal(-1, sess:run(r, {[x] = -500}))
  end)

  it("with exclusive, more than one true predicate is an error", function()
    local x = tf.placeholder(tf.int32, {})
    local r = case_of(x, {default = function() return tf.constant(99, tf.int32) end, exclusive = true})
    local sess = tf.Session()
    assert.equal(2, sess:run(r, {[x] = 50}))
    assert.equal(99, sess:run(r, {[x] = 500}))
    local err = H.error_of(sess.run, sess, r, {[x] = 5})
    -- x = 5 is below 10 and 100 but not below 0.
    assert.truthy(err:find("More than one condition evaluated as True but exclusive=True. Conditions: " ..
                           "(Less:0, Less_1:0, Less_2:0), Values: [0 1 1] (2 of them are True)", 1, true), err)
    err = H.error_of(sess.run, sess, r, {[x] = -5})
    assert.truthy(err:find("Values: [1 1 1] (3 of them are True)", 1, true), err)
    err = H.error_of(tf.case, {{tf.constant(1), function() return 1 end}})
    assert.matches("pred 1 must be a scalar bool tensor", err)
  end)
end)

describe("tf.where", function()
  before_each(function() tf.reset_default_graph() end)

  it("selects elementwise (effective-tensorflow: [3, 2])", function()
    local a, b = tf.constant({1, 1}), tf.constant({2, 2})
    local p = tf.constant({true, false})
    local x = tf.where(p, a + b, a * b)
    assert.same({3, 2}, tf.Session():run(x):totable())
  end)

  it("broadcasts the condition, x and y together", function()
    local c = tf.constant({{true}, {false}})
    local x = tf.constant({{1, 2, 3}}, tf.int32)
    local r = tf.where(c, x, 0)
    assert.same({2, 3}, r:get_shape():as_list())
    assert.same({{1, 2, 3}, {0, 0, 0}}, tf.Session():run(r):totable())
    local c3 = tf.constant({true, false, true})
    assert.same({{1, 9, 3}, {1, 9, 3}},
                tf.Session():run(tf.where_v2(c3, tf.constant({{1, 2, 3}, {1, 2, 3}}), 9)):totable())
  end)

  -- From spec/fixtures/op_coverage_values.py (np.where(c[:, None], x, y)).
  it("with a vector condition and x, y of higher rank picks whole rows, as TensorFlow 1.x's Select", function()
    local sess = tf.Session()
    local c = tf.constant({true, false, true})
    local x, y = tf.constant({{1, 2}, {3, 4}, {5, 6}}), tf.constant({{-1, -2}, {-3, -4}, {-5, -6}})
    local r = tf.where(c, x, y)
    assert.equal("Select", r.op.type)
    assert.same({3, 2}, r:get_shape():as_list())
    assert.same({{1, 2}, {-3, -4}, {5, 6}}, sess:run(r):totable())
    assert.same({{1, 2}, {0, 0}, {5, 6}}, sess:run(tf.where(c, x, 0)):totable())
    local x3 = tf.reshape(tf.range(12), {3, 2, 2})
    assert.same({{{0, 1}, {2, 3}}, {{9, 9}, {9, 9}}, {{8, 9}, {10, 11}}}, sess:run(tf.where(c, x3, 9)):totable())
    -- where a vector could mean either, tf.where picks rows and tf.where_v2 broadcasts it over columns
    local c2, sq = tf.constant({true, false}), tf.constant({{1, 2}, {3, 4}})
    assert.same({{1, 2}, {0, 0}}, sess:run(tf.where(c2, sq, 0)):totable())
    local v2 = tf.where_v2(c2, sq, 0)
    assert.equal("SelectV2", v2.op.type)
    assert.same({{1, 0}, {3, 0}}, sess:run(v2):totable())
    assert.same({0, 2}, sess:run(tf.where(tf.constant({}, tf.bool), tf.zeros({0, 2}), 1)):shape())
  end)

  it("picks rows of shapes known at run time and checks the condition's length", function()
    local c = tf.placeholder(tf.bool, {-1})
    local x = tf.placeholder(tf.int32, {-1, 2})
    local r = tf.where(c, x, 0)
    assert.same({-1, 2}, r:get_shape():as_list())
    local sess = tf.Session()
    local feed = {[c] = {false, true}, [x] = tf.array({{1, 2}, {3, 4}}, tf.int32)}
    assert.same({{0, 0}, {3, 4}}, sess:run(r, feed):totable())
    feed[c] = {true, true, false}
    local ok, err = pcall(sess.run, sess, r, feed)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("a vector condition picks rows of x and y, so its length must be their first " ..
                                     "dimension: condition shape [3], x and y [2,2]", 1, true), err)
    local line = H.this_line() + 1
    err = H.error_of(function() return (tf.where(tf.constant({true, false, true}), tf.ones({2, 3}), 0)) end)
    assert.truthy(err:find("condition shape [3], x and y [2,3] (tf.where_v2 broadcasts it instead)", 1, true), err)
    assert.truthy(err:find("control_flow_spec.lua:" .. line, 1, true), err)
    -- a feed of another rank decides again: a matrix condition broadcasts
    local u = tf.placeholder(tf.bool)
    assert.same({{1, 0}, {3, 0}}, sess:run(tf.where(u, x, 0), {[u] = {{true, false}}, [x] = feed[x]}):totable())
  end)

  it("works for every dtype and for empty tensors", function()
    local sess = tf.Session()
    local c = tf.constant({true, false, true})
    for _, dt in ipairs({tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8}) do
      local r = tf.where(c, tf.constant({1, 2, 3}, dt), tf.constant({7, 8, 9}, dt))
      assert.equal(dt, r.dtype)
      assert.same({1, 8, 3}, sess:run(r):totable())
    end
    local r = tf.where(c, tf.constant({true, true, true}), tf.constant({false, false, false}))
    assert.same({true, false, true}, sess:run(r):totable())
    local e = tf.where(tf.zeros({0, 2}, tf.bool), tf.zeros({0, 2}), tf.ones({0, 2}))
    assert.same({0, 2}, sess:run(e):shape())
  end)

  it("infers shapes at build time and from fed values", function()
    local c = tf.placeholder(tf.bool, {-1, 1})
    local x = tf.placeholder(tf.float32, {-1, 3})
    local r = tf.where(c, x, 0)
    assert.same({-1, 3}, r:get_shape():as_list())
    local v = tf.Session():run(r, {[c] = {{true}, {false}}, [x] = {{1, 2, 3}, {4, 5, 6}}})
    assert.same({{1, 2, 3}, {0, 0, 0}}, v:totable())
  end)

  it("rejects a condition that is not bool and mixed dtypes", function()
    local err = H.error_of(tf.where, tf.constant({1, 0}), tf.constant({1, 2}), tf.constant({3, 4}))
    assert.matches("Select: the condition must be a bool tensor, got float32", err)
    err = H.error_of(tf.where, tf.constant({true}), tf.constant({1}), tf.constant({1}, tf.int32))
    assert.matches("x and y must have one dtype, got float32 and int32; use tf.cast", err)
    err = H.error_of(tf.where, tf.constant({true, false}), tf.constant({1, 2, 3}), tf.constant({1, 2, 3}))
    assert.matches("Incompatible shapes", err)
    err = H.error_of(tf.where, tf.constant({true}), tf.constant({1}))
    assert.matches("give both x and y, or neither", err)
  end)

  it("with one argument returns the coordinates of the true elements", function()
    local sess = tf.Session()
    local c = tf.constant({{true, false}, {false, true}, {true, true}})
    local r = tf.where(c)
    assert.equal(tf.int64, r.dtype)
    assert.same({-1, 2}, r:get_shape():as_list())
    assert.same({{0, 0}, {1, 1}, {2, 0}, {2, 1}}, sess:run(r):totable())
    assert.same({{1}, {3}}, sess:run(tf.where(tf.constant({0, 5, 0, -2}, tf.int32))):totable())
    assert.same({0, 1}, sess:run(tf.where(tf.constant({false, false}))):shape())
    assert.same({1, 0}, sess:run(tf.where(tf.constant(true))):shape())
    local p = tf.placeholder(tf.float64)
    assert.same({{0, 1, 1}}, sess:run(tf.where(p), {[p] = {{{0, 0}, {0, 3}}}}):totable())
  end)
end)

describe("tf.while_loop", function()
  before_each(function() tf.reset_default_graph() end)

  it("computes fibonacci (effective-tensorflow: 5)", function()
    local n = tf.constant(5)
    local function cond(i, a, b) return tf.less(i, n) end
    local function body(i, a, b) return i + 1, b, a + b end
    local i, a, b = tf.while_loop(cond, body, {2, 1, 1})
    local sess = tf.Session()
    assert.equal(5, sess:run(b))
    assert.same({5, 3, 5}, sess:run({i, a, b}))
    assert.equal("While", b.op.type)
  end)

  it("rejects a loop variable whose shape changes, in TensorFlow's words, and takes shape invariants", function()
    local n = tf.constant(5)
    local function cond(i, a, b, c) return tf.less(i, n) end
    local function body(i, a, b, c) return i + 1, b, a + b, tf.concat({c, tf.reshape(a + b, {1})}, 0) end
    local ok, err = pcall(tf.while_loop, cond, body, {2, 1, 1, tf.constant({1, 1})})
    assert.is_false(ok)
    assert.matches("has shape %(2,%) before the loop, but shape %(3,%) after one iteration%. Provide shape invariants", err)
    assert.matches("Input tensor 'Const_%d:0' %(loop variable 3%)", err)
    assert.matches("%(at spec/control_flow_spec.lua:%d+%)", err)
    -- A change of rank too, although the condition on the body's results is then no scalar.
    err = H.error_of(tf.while_loop, function(i) return tf.less(i, 3) end, function(i) return tf.reshape(i, {1}) end,
                     {tf.constant(0, tf.int32)})
    assert.truthy(err:find("(loop variable 0) has shape () before the loop, but shape (1,) after one " ..
                           "iteration. Provide shape invariants", 1, true), err)
    err = H.error_of(tf.while_loop, function(v) return tf.less(tf.reduce_sum(v), 3) end,
                     function(v) return tf.reshape(tf.concat({v, v}, 0), {2, 1}) end, {tf.constant({1}, tf.int32)})
    assert.truthy(err:find("has shape (1,) before the loop, but shape (2, 1) after one iteration", 1, true), err)
    local _, _, _, c = tf.while_loop(cond, body, {2, 1, 1, tf.constant({1, 1})},
      {shape_invariants = {tf.TensorShape({}), tf.TensorShape({}), tf.TensorShape({}), tf.TensorShape({-1})}})
    assert.same({-1}, c:get_shape():as_list())
    assert.same({1, 1, 2, 3, 5}, tf.Session():run(c):totable())
  end)

  it("checks shape invariants against the initial values", function()
    local err = H.error_of(tf.while_loop, function(x) return tf.constant(false) end, function(x) return x end,
                           {tf.constant({1, 2})}, {shape_invariants = {{3}}})
    assert.matches("The shape invariant specified for Const:0 is not compatible with the initial shape", err)
    assert.matches("enters the loop with shape %(2,%), but the specified shape invariant is %(3,%)", err)
    err = H.error_of(tf.while_loop, function(x) return tf.constant(false) end, function(x) return tf.zeros({3, 3}) end,
                     {tf.zeros({2, 3})}, {shape_invariants = {{-1, 2}}})
    assert.matches("not compatible", err)
    local x = tf.while_loop(function(x) return tf.less(tf.size(x), 8) end,
                            function(x) return tf.concat({x, x}, 0) end, {tf.zeros({1, 2})},
                            {shape_invariants = {{-1, 2}}})
    assert.same({-1, 2}, x:get_shape():as_list())
    assert.same({4, 2}, tf.Session():run(x):shape())
  end)

  it("takes the loop variables from a body returning one list", function()
    local i, s = tf.while_loop(function(i, s) return tf.less(i, 4) end,
                               function(i, s) return {i + 1, s + i} end, {i32(0), i32(0)})
    assert.same({4, 6}, tf.Session():run({i, s}))
  end)

  it("runs loops over any dtype", function()
    local sess = tf.Session()
    local i64 = tf.while_loop(function(i) return tf.less(i, tf.constant(2 ^ 40, tf.int64)) end,
                              function(i) return i * 4 end, {tf.constant(1, tf.int64)})
    assert.equal(tf.int64, i64.dtype)
    assert.equal(2 ^ 40, sess:run(i64))
    local f = tf.while_loop(function(x) return tf.less(x, 10) end, function(x) return x * 1.5 end,
                            {tf.constant(1, tf.float64)})
    assert.near(1.5 ^ 6, sess:run(f), 1e-12)
    local u, flag = tf.while_loop(function(u, flag) return tf.less(u, tf.constant(200, tf.uint8)) end,
                                  function(u, flag) return u + tf.constant(50, tf.uint8), tf.logical_not(flag) end,
                                  {tf.constant(0, tf.uint8), tf.constant(false)})
    assert.same({200, false}, sess:run({u, flag}))
  end)

  -- A loop over one-element values runs its body as a register program
  -- (exec/scalar.c); the same loop over two elements runs the general way.
  -- Both call the same element loops, so they agree bit for bit.
  it("runs a loop over one-element values as the general loop does, bit for bit", function()
    local function f32(v) return tonumber(ffi.cast("float", v)) end
    local function loop(shape)
      tf.reset_default_graph()
      local n, scale = tf.placeholder(tf.int32, {}), tf.placeholder(tf.float32, shape)
      local i, w, k = tf.while_loop(function(i, w, k) return tf.less(i, n) end,
                                    function(i, w, k) return i + 1, tf.identity(w * scale + 0.3), k * 3 end,
                                    {i32(0), tf.fill(shape, 1.0), tf.fill(shape, tf.constant(1, tf.int64))},
                                    {maximum_iterations = 30})
      local sess = tf.Session()
      local s = #shape == 0 and 1.1 or {1.1, 1.1}
      return sess:run({i, w, k}, {[n] = 25, [scale] = s}), sess:run({i, w, k}, {[n] = 40, [scale] = s})
    end
    local one, capped = loop({})
    local two, capped2 = loop({2})
    local w = 1
    for _ = 1, 25 do w = f32(f32(w * f32(1.1)) + f32(0.3)) end
    assert.same({25, w, 3 ^ 25}, one)
    assert.same({one[2], one[2]}, two[2]:totable())
    assert.same({30, capped2[2]:totable()[1], 3 ^ 30}, capped)
  end)

  it("reports an error inside a loop over one-element values as the general loop does", function()
    local function message(shape)
      tf.reset_default_graph()
      local d = tf.placeholder(tf.int32, shape)
      local function cond(i) return tf.less(#shape == 0 and i or tf.reduce_sum(i), 100 * (shape[1] or 1)) end
      local i = tf.while_loop(cond, function(i) return i + tf.floordiv(i, d) end, {tf.ones(shape, tf.int32)})
      local sess = tf.Session()
      local err = H.error_of(sess.run, sess, i, {[d] = #shape == 0 and 0 or {0, 0}})
      local doubled = sess:run(i, {[d] = #shape == 0 and 1 or {1, 1}})  -- the session stays usable
      assert.same(128, #shape == 0 and doubled or doubled:totable()[1])
      return err
    end
    local err = message({})
    assert.matches("FloorDiv: Integer division by zero %[%[node FloorDiv " ..
                   "%(defined at spec/control_flow_spec.lua:%d+%)%]%]", err)
    assert.equal(err, message({2}))
  end)

  it("caps the trip count with maximum_iterations (a number or a tensor)", function()
    local sess = tf.Session()
    local i = tf.while_loop(function(i) return true end, function(i) return i + 1 end, {i32(0)},
                            {maximum_iterations = 7})
    assert.equal(7, sess:run(i))
    local m = tf.placeholder(tf.int32, {})
    local j = tf.while_loop(function(j) return tf.less(j, 5) end, function(j) return j + 1 end, {i32(0)},
                            {maximum_iterations = m})
    assert.equal(3, sess:run(j, {[m] = 3}))
    assert.equal(5, sess:run(j, {[m] = 9}))
    assert.equal(0, sess:run(j, {[m] = 0}))
    local err = H.error_of(sess.run, sess, j, {[m] = -1})
    assert.matches("maximum_iterations must be a non%-negative integer scalar", err)
  end)

  it("runs a data-dependent number of times, possibly none", function()
    local n = tf.placeholder(tf.int32, {})
    local x = tf.placeholder(tf.float32, {-1})
    local i, y = tf.while_loop(function(i, y) return tf.less(i, n) end, function(i, y) return i + 1, y * 2 end,
                               {i32(0), x})
    assert.same({-1}, y:get_shape():as_list())
    local sess = tf.Session()
    assert.same({8, 16}, sess:run(y, {[n] = 3, [x] = {1, 2}}):totable())
    assert.same({1, 2, 3}, sess:run(y, {[n] = 0, [x] = {1, 2, 3}}):totable())
    assert.equal(0, sess:run(i, {[n] = -4, [x] = {1}}))
  end)

  it("checks dtypes and structure of cond and body", function()
    local err = H.error_of(tf.while_loop, function(i) return tf.less(i, 3) end, function(i) return tf.cast(i, tf.float32) end, {i32(0)})
    assert.matches("loop variable 0 %('Const:0'%) enters the loop as int32, but the body returns float32", err)
    err = H.error_of(tf.while_loop, function(i) return i end, function(i) return i end, {i32(0)})
    assert.matches("cond must return a scalar bool tensor", err)
    err = H.error_of(tf.while_loop, function(i, j) return tf.less(i, 3) end, function(i, j) return i + 1 end, {i32(0), i32(0)})
    assert.matches("body returns 1 values for 2 loop variables", err)
    err = H.error_of(tf.while_loop, function(i) return tf.less(i, 3) end, function(i) return i end, {})
    assert.matches("loop_vars must be a non%-empty list", err)
    err = H.error_of(tf.while_loop, function(i) return tf.less(i, 3) end, function(i) return i end, {i32(0)}, {bogus = 1})
    assert.matches("unknown option 'bogus'", err)
  end)

  it("takes nested structures as loop variables", function()
    local r = tf.while_loop(function(s) return tf.less(s.n, 3) end,
                            function(s) return {n = s.n + 1, acc = {s.acc[1] * 2, s.acc[2] + 1}} end,
                            {{n = i32(0), acc = {tf.constant(1), tf.constant(0)}}})
    local v = tf.Session():run({r.n, r.acc[1], r.acc[2]})
    assert.same({3, 8, 3}, v)
  end)

  it("captures outer tensors, reads variables as they change and writes them", function()
    local count = tf.Variable(0, {name = "count", dtype = tf.int32})
    local step = tf.placeholder(tf.int32, {})
    local i, seen = tf.while_loop(function(i, seen) return tf.less(i, 4) end, function(i, seen)
      local upd = tf.assign_add(count, step)
      return i + 1, seen + upd
    end, {i32(0), i32(0)})
    local sess = tf.Session()
    sess:run(count.initializer)
    assert.equal(2 + 4 + 6 + 8, sess:run(seen, {[step] = 2}))
    assert.equal(8, sess:run(count))
    local sess2 = tf.Session()  -- a second session has its own variable
    sess2:run(count.initializer)
    sess2:run(i, {[step] = 1})
    assert.same({4, 8}, {sess2:run(count), sess:run(count)})
  end)

  it("creates the variables a body makes once, in the outer graph", function()
    local x = tf.placeholder(tf.float32, {2, 3})
    local _, h = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, h)
      local w = tf.get_variable("w", {3, 3}, {initializer = tf.ones_initializer()})
      return i + 1, tf.matmul(h, w) * tf.Variable(0.5, {name = "c"})
    end, {i32(0), x})
    local vars = tf.global_variables()
    assert.equal(2, #vars)
    assert.equal("w:0", vars[1].name)
    assert.equal(tf.get_default_graph(), vars[1].graph)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.same({{3.375, 3.375, 3.375}, {6.75, 6.75, 6.75}}, sess:run(h, {[x] = {{1, 1, 1}, {1, 2, 3}}}):totable())
  end)

  it("nests loops, loops in conds and conds in loops", function()
    local n = tf.placeholder(tf.int32, {})
    -- sum over i < n of sum over j < i of j
    local _, total = tf.while_loop(function(i) return tf.less(i, n) end, function(i, t)
      local _, inner = tf.while_loop(function(j) return tf.less(j, i) end, function(j, s) return j + 1, s + j end,
                                     {i32(0), i32(0)})
      return i + 1, t + inner
    end, {i32(0), i32(0)})
    -- collatz steps: a cond in a loop
    local _, steps = tf.while_loop(function(v) return tf.greater(v, 1) end, function(v, k)
      return tf.cond(tf.equal(tf.mod(v, 2), 0), function() return tf.floordiv(v, 2) end, function() return v * 3 + 1 end), k + 1
    end, {n, i32(0)})
    -- a loop in a cond
    local r = tf.cond(tf.greater(n, 3), function()
      return tf.while_loop(function(p) return tf.less(p, 1000) end, function(p) return p * n end, {n})
    end, function() return -n end)
    local sess = tf.Session()
    assert.same({20, 8, 1296}, sess:run({total, steps, r}, {[n] = 6}))
    assert.same({1, 7, -3}, sess:run({total, steps, r}, {[n] = 3}))
  end)

  it("draws new random numbers in each iteration", function()
    local _, acc = tf.while_loop(function(i) return tf.less(i, 4) end, function(i, acc)
      return i + 1, tf.concat({acc, tf.random_uniform({1}, {seed = 3})}, 0)
    end, {i32(0), tf.zeros({0})}, {shape_invariants = {{}, {-1}}})
    local v = tf.Session():run(acc):totable()
    assert.equal(4, #v)
    for k = 2, 4 do assert.is_true(v[k] ~= v[1]) end
  end)

  it("names the failing op of the body and its line; the session stays usable", function()
    local x = tf.placeholder(tf.float32, {-1})
    local _, y = tf.while_loop(function(i) return tf.less(i, 2) end,
                               function(i, y) return i + 1, tf.reshape(y, {2, -1})[0] end, {i32(0), x},
                               {shape_invariants = {{}, {-1}}})
    local sess = tf.Session()
    local err = H.error_of(sess.run, sess, y, {[x] = {1, 2, 3}})
    assert.matches("Reshape", err)
    assert.matches("control_flow_spec.lua:%d+", err)
    assert.same({1}, sess:run(y, {[x] = {1, 2, 3, 4}}):totable())
  end)

  it("keeps its functions' state per session, freed when the session closes", function()
    local _, draws = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, acc)
      return i + 1, acc + tf.random_uniform({}, {seed = 5})
    end, {i32(0), tf.constant(0)})
    local a, b = tf.Session(), tf.Session()
    local first = a:run(draws)
    assert.equal(first, b:run(draws))      -- the same seeds, the same first draws
    assert.is_true(a:run(draws) ~= first)  -- the counters move on in each session
    a:close()
    assert.matches("closed Session", H.error_of(a.run, a, draws))
    assert.is_true(b:run(draws) ~= first)
  end)

  it("accepts parallel_iterations and swap_memory, and builds no ops when run again", function()
    local i = tf.while_loop(function(i) return tf.less(i, 10) end, function(i) return i + 1 end, {i32(0)},
                            {parallel_iterations = 10, swap_memory = false, name = "counter"})
    assert.equal("counter", i.op.name)
    local sess = tf.Session()
    local before = tf.get_default_graph():num_ops()
    for _ = 1, 5 do assert.equal(10, sess:run(i)) end
    assert.equal(before, tf.get_default_graph():num_ops())
  end)
end)
