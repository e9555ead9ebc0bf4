-- Debugging ops: tf.Print (through the Lua print sink, only when the
-- computation flows through it), the assertions, check_numerics, and the
-- close-time warning about debugging ops no run reached.
local tf = require("moonflow")
local H = require("spec.helpers")

local function line() return debug.getinfo(2, "l").currentline end
local here = debug.getinfo(1, "S").short_src

describe("tf.Print", function()
  local printed, saved_sink
  before_each(function()
    tf.reset_default_graph()
    printed = {}
    saved_sink = tf.set_print_sink(function(text) printed[#printed + 1] = text end)
  end)
  after_each(function() tf.set_print_sink(saved_sink) end)

  it("is an identity that prints the message and each value through the sink", function()
    local a = tf.constant(2)
    local b = tf.constant(3)
    local sum = tf.Print(a + b, {a, b}, "a and b: ")
    local sess = tf.Session()
    assert.equal(5, sess:run(sum))
    assert.same({"a and b: [2][3]"}, printed)
    assert.equal(10, sess:run(sum * 2))
    assert.same({"a and b: [2][3]", "a and b: [2][3]"}, printed)
  end)

  it("prints only when a fetch depends on it", function()
    local two = tf.constant(2)
    local three = tf.constant(3)
    local sum = two + three
    local _ = tf.Print(two, {two, three, sum}, "not on the path: ")
    local sess = tf.Session()
    assert.equal(5, sess:run(sum))
    assert.same({}, printed)
    local on_path = tf.Print(sum, {two, three}, "on the path: ")
    assert.equal(5, sess:run(sum))
    assert.same({}, printed)
    assert.equal(5, sess:run(on_path))
    assert.same({"on the path: [2][3]"}, printed)
  end)

  it("summarizes like TensorFlow: at most `summarize` entries, nested dims in brackets", function()
    local v = tf.constant({1, 2, 3, 4, 5})
    local m = tf.constant({{1, 2}, {3, 4}}, tf.int32)
    local f = tf.constant({0.5, -1.25, 1e-3}, tf.float64)
    local b = tf.constant({true, false})
    local sess = tf.Session()
    sess:run(tf.Print(v, {v}, "v"))
    sess:run(tf.Print(v, {v}, "all", {summarize = -1}))
    sess:run(tf.Print(v, {m}, "m"))
    sess:run(tf.Print(v, {m}, "m4", nil, 4))
    sess:run(tf.Print(v, {f, b, tf.constant(1 / 3)}))
    sess:run(tf.Print(v, {tf.constant({{1, 2, 3}, {4, 5, 6}})}, "2x3"))
    assert.same({
      "v[1 2 3...]",
      "all[1 2 3 4 5]",
      "m[[1 2][3...]...]",  -- TensorFlow's SummarizeValue, "..." twice included
      "m4[[1 2][3 4]]",
      "[0.5 -1.25 0.001][True False][0.333333343]",
      "2x3[[1 2 3]...]",
    }, printed)
  end)

  it("prints the first n runs of each session with first_n", function()
    local x = tf.placeholder(tf.float32, {})
    local y = tf.Print(x, {x}, "x=", {first_n = 2})
    local sess = tf.Session()
    for i = 1, 4 do assert.equal(i, sess:run(y, {[x] = i})) end
    assert.same({"x=[1]", "x=[2]"}, printed)
    local other = tf.Session()
    other:run(y, {[x] = 7})
    assert.same({"x=[1]", "x=[2]", "x=[7]"}, printed)
  end)

  it("prints at every iteration of a while loop and through make_callable", function()
    local i = tf.while_loop(function(i) return tf.less(i, 3) end,
                            function(i) return tf.Print(i, {i}, "i = ") + 1 end, {tf.constant(0, tf.int32)})
    local sess = tf.Session()
    assert.equal(3, sess:run(i))
    assert.same({"i = [0]", "i = [1]", "i = [2]"}, printed)
    local x = tf.placeholder(tf.float32, {2})
    local f = sess:make_callable(tf.Print(x, {x}, "fed: ") * 2, {x})
    assert.equal("[2., 4.]", tostring(f({1, 2})))
    assert.equal("fed: [1 2]", printed[4])
  end)

  it("passes the gradient through to its input", function()
    local x = tf.placeholder(tf.float32, {3})
    local y = tf.Print(x, {x}, "x: ") * 2
    local g = tf.gradients(tf.reduce_sum(y), x)[1]
    assert.same({2, 2, 2}, tf.Session():run(g, {[x] = {1, 2, 3}}):totable())
    H.check_grad(x, {3}, y, {3}, {x_init_value = {0.5, -1, 2}}, 1e-3)
  end)

  it("prints through the sink in an imported graph too, in functions included", function()
    local g = tf.Graph()
    local cond_name
    g:as_default(function()
      local x = tf.placeholder(tf.float32, {2}, "x")
      tf.identity(tf.Print(x * 2, {x}, "x: "), "z")
      cond_name = tf.cond(tf.constant(true), function() return tf.Print(x, {x}, "in cond: ") end,
                          function() return x end).name
    end)
    local path = os.tmpname()
    tf.train.write_graph(g, path)
    local imported = tf.train.import_graph(path)
    os.remove(path)
    local sess = tf.Session(imported)
    assert.same({2, 4}, sess:run("z:0", {["x:0"] = {1, 2}}):totable())
    assert.same({1, 2}, sess:run(cond_name, {["x:0"] = {1, 2}}):totable())
    assert.same({"x: [1 2]", "in cond: [1 2]"}, printed)
  end)

  it("writes to io.stdout by default", function()
    tf.set_print_sink(nil)
    local written = {}
    local real = io.stdout
    io.stdout = {write = function(_, ...) for _, s in ipairs({...}) do written[#written + 1] = s end end}
    local ok, err = pcall(function() tf.Session():run(tf.Print(tf.constant(1), {tf.constant(4)}, "four: ")) end)
    io.stdout = real
    assert(ok, err)
    assert.equal("four: [4]\n", table.concat(written))
  end)

  it("fails the run when the sink fails, and the session stays usable", function()
    tf.set_print_sink(function() error("sink is broken") end)
    local x = tf.constant(1)
    local y = tf.Print(x, {x})
    local sess = tf.Session()
    local err = H.error_of(sess.run, sess, y)
    assert.truthy(err:find("the print sink failed", 1, true), err)
    assert.truthy(err:find("sink is broken", 1, true), err)
    tf.set_print_sink(function(text) printed[#printed + 1] = text end)
    assert.equal(1, sess:run(y))
    assert.same({"[1]"}, printed)
  end)

  it("stays safe when a compiled loop starts running a graph with a Print", function()
    -- LuaJIT aborts the process when compiled code calls C that calls back
    -- into Lua; the runs of graphs with host ops go through interpreted code.
    local x = tf.placeholder(tf.float32, {})
    local y = x + 1
    local sess = tf.Session()
    local total = 0
    for i = 1, 400 do
      if i == 300 then y = tf.Print(x, {x}, "late: ", {first_n = 1}) + 1 end
      total = total + sess:run(y, {[x] = 1})
    end
    assert.equal(800, total)
    assert.same({"late: [1]"}, printed)
  end)
end)

describe("assertions", function()
  before_each(function() tf.reset_default_graph() end)

  it("pass silently when they hold and guard what depends on them", function()
    local x = tf.constant({1, 2, 3})
    local checks = {
      tf.assert_positive(x), tf.assert_non_negative(x), tf.assert_negative(-x), tf.assert_non_positive(-x),
      tf.assert_equal(x, x), tf.assert_less(x, 4), tf.assert_less_equal(x, 3), tf.assert_greater(x, 0),
      tf.assert_greater_equal(x, 1), tf.assert_none_equal(x, 0), tf.assert_rank(x, 1),
      tf.debugging.assert_equal(x, {1, 2, 3}), tf.debugging.assert_positive(x),
    }
    local y = tf.control_dependencies(checks, function() return x * 2 end)
    assert.same({2, 4, 6}, tf.Session():run(y):totable())
  end)

  it("fail the run with TensorFlow's message, the values and the Lua line", function()
    local x = tf.constant({1, -2, 3}, {name = "x"})
    local at = line() + 1
    local check = tf.assert_positive(x, {message = "x must be positive"})
    local y = tf.control_dependencies({check}, function() return tf.identity(x) end)
    local sess = tf.Session()
    local err = H.error_of(sess.run, sess, y)
    assert.equal("assertion failed: [x must be positive] [Condition x > 0 did not hold element-wise:] " ..
                 "[x (x:0) = ] [1 -2 3] (the condition is false at 1 of 3 elements, the first at index [1]) " ..
                 "[[node assert_positive/Assert (defined at " .. here .. ":" .. at .. ")]]", err)
    assert.equal("Assert", check.type)
  end)

  it("name both tensors in a comparison and summarize their values", function()
    local x = tf.placeholder(tf.int32, {2, 2}, "x")
    local y = tf.placeholder(tf.int32, {2, 2}, "y")
    local sess = tf.Session()
    local check = tf.assert_equal(x, y, "x and y differ")
    sess:run(check, {[x] = {{1, 2}, {3, 4}}, [y] = {{1, 2}, {3, 4}}})
    local err = H.error_of(sess.run, sess, check, {[x] = {{1, 2}, {3, 4}}, [y] = {{1, 2}, {5, 4}}})
    assert.truthy(err:find("assertion failed: [x and y differ] [Condition x == y did not hold element-wise:] " ..
                           "[x (x:0) = ] [[1 2][3...]...] [y (y:0) = ] [[1 2][5...]...] " ..
                           "(the condition is false at 1 of 4 elements, the first at index [1, 0])", 1, true), err)
    local cases = {
      {tf.assert_less, "x < y", {1, 2}, {1, 3}}, {tf.assert_less_equal, "x <= y", {2, 2}, {1, 3}},
      {tf.assert_greater, "x > y", {2, 3}, {1, 3}}, {tf.assert_greater_equal, "x >= y", {0, 3}, {1, 3}},
      {tf.assert_none_equal, "x != y", {0, 3}, {1, 3}},
    }
    local a = tf.placeholder(tf.float32, {2}, "a")
    local b = tf.placeholder(tf.float32, {2}, "b")
    for _, c in ipairs(cases) do
      local op = c[1](a, b)
      local e = H.error_of(sess.run, sess, op, {[a] = c[3], [b] = c[4]})
      assert.truthy(e:find("[Condition " .. c[2] .. " did not hold element-wise:] [x (a:0) = ] [" ..
                           c[3][1] .. " " .. c[3][2] .. "] [y (b:0) = ] [1 3]", 1, true), e)
    end
  end)

  it("compare with zero: negative, non-negative, non-positive", function()
    local v = tf.placeholder(tf.float32, {3}, "v")
    local sess = tf.Session()
    local e = H.error_of(sess.run, sess, tf.assert_negative(v), {[v] = {-1, 0, -2}})
    assert.truthy(e:find("[Condition x < 0 did not hold element-wise:] [x (v:0) = ] [-1 0 -2]", 1, true), e)
    e = H.error_of(sess.run, sess, tf.assert_non_negative(v), {[v] = {1, 0, -0.5}})
    assert.truthy(e:find("[Condition x >= 0 did not hold element-wise:] [x (v:0) = ] [1 0 -0.5]", 1, true), e)
    e = H.error_of(sess.run, sess, tf.debugging.assert_non_positive(v), {[v] = {0, 0, 1}})
    assert.truthy(e:find("the first at index [2]", 1, true), e)
    sess:run(tf.assert_positive(v), {[v] = {1, 2, 3}})
  end)

  it("hold vacuously for an empty tensor", function()
    local v = tf.placeholder(tf.float32, {-1})
    tf.Session():run(tf.assert_positive(v), {[v] = tf.Array.new(tf.float32, {0})})
  end)

  it("assert_rank fails when the op is built if the rank is known, else when the graph runs", function()
    local m = tf.constant({{1, 2}, {3, 4}}, {name = "m"})
    local at = line() + 1
    local err = H.error_of(function() local op = tf.assert_rank(m, 1); return op end)
    assert.equal("tf.assert_rank: Tensor m:0 must have rank 1. Received rank 2, shape (2, 2) (at " .. here .. ":" ..
                 at .. ")", err)
    local p = tf.placeholder(tf.float32, nil, "p")
    local check = tf.assert_rank(p, 2, "p must be a matrix")
    local sess = tf.Session()
    sess:run(check, {[p] = {{1, 2}}})
    local e = H.error_of(sess.run, sess, check, {[p] = {1, 2, 3}})
    assert.truthy(e:find("assertion failed: [p must be a matrix] [Tensor p:0 must have rank] [2] " ..
                         "[Received shape: ] [3]", 1, true), e)
  end)

  it("tf.Assert prints its strings and tensors", function()
    local x = tf.placeholder(tf.float32, {})
    local check = tf.Assert(tf.less(x, 10), {"x is too large:", x, "limit", tf.constant(10)})
    local sess = tf.Session()
    sess:run(check, {[x] = 3})
    local e = H.error_of(sess.run, sess, check, {[x] = 12.5})
    assert.truthy(e:find("assertion failed: [x is too large:] [12.5] [limit] [10] [[node Assert", 1, true), e)
    assert.truthy(H.error_of(tf.Assert, x, {"x"}):find("must be a bool tensor", 1, true))
  end)

  it("leave the session usable after a failure", function()
    local x = tf.placeholder(tf.float32, {2})
    local y = tf.control_dependencies({tf.assert_positive(x)}, function() return x * 10 end)
    local sess = tf.Session()
    for _ = 1, 3 do
      H.error_of(sess.run, sess, y, {[x] = {1, -1}})
      assert.same({10, 20}, sess:run(y, {[x] = {1, 2}}):totable())
    end
  end)
end)

describe("tf.debugging.check_numerics", function()
  before_each(function() tf.reset_default_graph() end)

  it("passes finite values through and fails on NaN and Inf", function()
    local x = tf.placeholder(tf.float32, {3})
    local y = tf.debugging.check_numerics(x, "bad input")
    local sess = tf.Session()
    assert.same({1, 2, 3}, sess:run(y * 1, {[x] = {1, 2, 3}}):totable())
    local nan, inf = 0 / 0, math.huge
    local at_line = debug.getinfo(1, "S").short_src
    local e = H.error_of(sess.run, sess, y, {[x] = {1, nan, 3}})
    assert.truthy(e:find("^bad input : Tensor had NaN values %[%[node CheckNumerics %(defined at " .. at_line:gsub("%p", "%%%0")), e)
    e = H.error_of(sess.run, sess, y, {[x] = {1, -inf, 3}})
    assert.truthy(e:find("bad input : Tensor had Inf values", 1, true), e)
    e = H.error_of(sess.run, sess, y, {[x] = {inf, nan, 3}})
    assert.truthy(e:find("bad input : Tensor had Inf and NaN values", 1, true), e)
    assert.same({4, 5, 6}, sess:run(y, {[x] = {4, 5, 6}}):totable())
  end)

  it("catches the NaN of log(0) * 0 and checks the gradient too", function()
    local x = tf.placeholder(tf.float64, {2})
    local y = tf.check_numerics(tf.log(x) * x, "log(x) * x")
    local sess = tf.Session()
    local e = H.error_of(sess.run, sess, y, {[x] = {0, 1}})
    assert.truthy(e:find("log(x) * x : Tensor had NaN values", 1, true), e)
    local g = tf.gradients(tf.sqrt(tf.check_numerics(x, "sqrt")), x)[1]
    assert.near(0.25, sess:run(g, {[x] = {4, 1}}):get(0), 1e-12)
    e = H.error_of(sess.run, sess, g, {[x] = {0, 1}})
    assert.truthy(e:find("Not a number (NaN) or infinity (Inf) values detected in gradient. sqrt : Tensor had Inf values",
                         1, true), e)
    H.check_grad(x, {2}, tf.verify_tensor_all_finite(x * x, "square"), {2},
                 {x_init_value = {1, 2}, session = sess}, 1e-6)
    assert.truthy(H.error_of(tf.debugging.check_numerics, tf.constant(1, tf.int32), "i")
                  :find("needs a float32 or float64 tensor, got int32", 1, true))
  end)
end)

describe("debugging ops that no run reached", function()
  local warnings, saved
  before_each(function()
    tf.reset_default_graph()
    saved = {}
    for k, v in pairs(tf.hygiene) do saved[k] = v end
    warnings = {}
    tf.hygiene.enabled, tf.hygiene.unreached_debug_ops = true, true
    tf.hygiene.output = function(message) warnings[#warnings + 1] = message end
  end)
  after_each(function()
    for k, v in pairs(saved) do tf.hygiene[k] = v end
  end)

  it("are reported when the session closes, once per op, with the line", function()
    local sink = tf.set_print_sink(function() end)
    local x = tf.constant({1, 2})
    local at = line() + 1
    local printed_x = tf.Print(x, {x}, "x: ")
    local check = tf.assert_positive(x); local check_at = line()
    local y = x * 2  -- computed from x, not from printed_x, and without the assertion
    local sess = tf.Session()
    sess:run(y)
    assert.same({}, warnings)
    sess:close()
    tf.set_print_sink(sink)
    assert.equal(2, #warnings)
    table.sort(warnings)
    assert.truthy(warnings[1]:find("moonflow warning: " .. here .. ":" .. at ..
                                   ": tf.Print '" .. printed_x.op.name .. "' never ran in this session", 1, true),
                  warnings[1])
    assert.truthy(warnings[1]:find("tf.hygiene.unreached_debug_ops = false", 1, true))
    assert.truthy(warnings[2]:find(here .. ":" .. check_at .. ": the assertion '" .. check.name ..
                                   "' (a Assert) never ran", 1, true), warnings[2])
    assert.truthy(warnings[2]:find("tf.control_dependencies", 1, true))
    local again = tf.Session()
    again:run(y)
    again:close()
    assert.equal(2, #warnings)
  end)

  it("are not reported once a run reached them, nor when silenced", function()
    local sink = tf.set_print_sink(function() end)
    local x = tf.constant({1, 2})
    local y = tf.Print(x, {x}, "x: ")
    local checked = tf.control_dependencies({tf.assert_positive(y)}, function() return y * 2 end)
    local z = tf.debugging.check_numerics(tf.cast(x, tf.float32), "z")
    local sess = tf.Session()
    sess:run({checked, z})
    sess:close()
    assert.same({}, warnings)
    tf.hygiene.unreached_debug_ops = false
    local _ = tf.Print(x, {x}, "never")
    local s2 = tf.Session()
    s2:run(x)
    s2:close()
    tf.set_print_sink(sink)
    assert.same({}, warnings)
  end)
end)
