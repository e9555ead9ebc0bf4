-- tf.lua_func (TensorFlow's py_func): Lua functions as ops, called with
-- tf.Arrays while a session runs, differentiable with a Lua gradient function.
local tf = require("moonflow")
local H = require("spec.helpers")

local function line() return debug.getinfo(2, "l").currentline end
local here = debug.getinfo(1, "S").short_src

-- Elementwise map over an Array into a new Array of dtype (default: a's).
local function map(a, fn, dtype)
  local out = tf.Array.new(dtype or a.dtype, a:shape())
  local src, dst = a:data(), out:data()
  for i = 0, a:size() - 1 do dst[i] = fn(tonumber(src[i])) end
  return out
end

-- effective-tensorflow.txt, "prototyping kernels": relu as a lua_func whose
-- gradient is another lua_func.
local function relu(inputs)
  local function relu_fn(x) return map(x, function(v) return math.max(v, 0) end) end
  local function relu_grad_fn(x) return map(x, function(v) return v > 0 and 1 or 0 end, tf.float32) end
  local function relu_grad_op(op, grad)
    local x = op.inputs[1]
    return grad * tf.lua_func(relu_grad_fn, {x}, tf.float32)
  end
  return tf.lua_func(relu_fn, {inputs}, tf.float32, {grad = relu_grad_op})
end

describe("tf.lua_func", function()
  before_each(function() tf.reset_default_graph() end)

  it("calls the function with Arrays when a run computes it", function()
    local calls, seen = 0, nil
    local x = tf.placeholder(tf.float32, {2, 2})
    local y = tf.lua_func(function(a, s)
      calls = calls + 1
      seen = {tf.Array.is(a), a:shape(), s:rank(), s:get()}
      return map(a, function(v) return v * s:get() end)
    end, {x, tf.constant(10)}, tf.float32)
    assert.equal("LuaFunc", y.op.type)
    assert.is_nil(y:get_shape().dims)  -- unknown unless given
    local sess = tf.Session()
    assert.equal(0, calls)
    assert.same({{10, 20}, {30, 40}}, sess:run(y, {[x] = {{1, 2}, {3, 4}}}):totable())
    assert.equal(1, calls)
    assert.same({true, {2, 2}, 0, 10}, seen)
    sess:run(x * 2, {[x] = {{1, 2}, {3, 4}}})
    assert.equal(1, calls)
  end)

  it("converts numbers, tables and Arrays of another dtype to the output dtypes", function()
    local outs = tf.lua_func(function()
      return 7.9, {1, 2, 3}, tf.array({1.5, 2.5}), true
    end, {}, {tf.int32, tf.float64, tf.int64, tf.bool})
    assert.equal(4, #outs)
    assert.equal(tf.int32, outs[1].dtype)
    local sess = tf.Session()
    local a, b, c, d = unpack(sess:run(outs))
    assert.equal(7, a)
    assert.same({1, 2, 3}, b:totable())
    assert.equal(tf.float64, b.dtype)
    assert.same({1, 2}, c:totable())
    assert.equal(true, d)
    -- one list for several outputs works too
    local pair = tf.lua_func(function() return {1, 2} end, {}, {tf.float32, tf.float32})
    assert.same({1, 2}, sess:run(pair))
  end)

  it("has unknown output shapes that downstream ops resolve when the graph runs", function()
    local n = tf.placeholder(tf.int32, {})
    local v = tf.lua_func(function(k)
      local out = {}
      for i = 1, k:get() do out[i] = i end
      return out
    end, {n}, tf.float32)
    local total = tf.reduce_sum(v * 2)
    local sess = tf.Session()
    assert.equal(2 * (1 + 2 + 3), sess:run(total, {[n] = 3}))
    assert.equal(2 * 15, sess:run(total, {[n] = 5}))
    assert.same({5}, sess:run(tf.shape(v), {[n] = 5}):totable())
  end)

  it("checks the outputs against declared shapes and dtypes", function()
    local x = tf.constant({1, 2, 3})
    local y = tf.lua_func(function(a) return a end, {x}, tf.float32, {shape = {3}})
    assert.same({3}, y:get_shape():as_list())
    local sess = tf.Session()
    assert.same({1, 2, 3}, sess:run(y):totable())
    local wrong = tf.lua_func(function() return {1, 2} end, {}, tf.float32, {shape = {3}})
    local e = H.error_of(sess.run, sess, wrong)
    assert.truthy(e:find("output 0 of the function has shape (2,), not the declared (3,)", 1, true), e)
    local missing = tf.lua_func(function() return 1 end, {}, {tf.float32, tf.float32})
    e = H.error_of(sess.run, sess, missing)
    assert.truthy(e:find("returned a bad value: output 1 is missing", 1, true), e)
    local bad = tf.lua_func(function() return "text" end, {}, tf.float32)
    e = H.error_of(sess.run, sess, bad)
    assert.truthy(e:find("output 0 is a string", 1, true), e)
    assert.same({1, 2, 3}, sess:run(y):totable())
  end)

  it("fails the run with the Lua traceback, and the session stays usable", function()
    local x = tf.placeholder(tf.float32, {})
    local function explode(v)
      if v:get() < 0 then error("negative input " .. v:get()) end
      return v
    end
    local err_line = line() - 3
    local at = line() + 1
    local y = tf.lua_func(explode, {x}, tf.float32, {name = "explode"})
    local sess = tf.Session()
    assert.equal(2, sess:run(y, {[x] = 2}))
    local e = H.error_of(sess.run, sess, y, {[x] = -1})
    assert.truthy(e:find("^explode: the Lua function of tf.lua_func failed: " .. here:gsub("%p", "%%%0") ..
                         ":" .. err_line .. ": negative input %-1"), e)
    assert.truthy(e:find("stack traceback:", 1, true), e)
    assert.truthy(e:find(here .. ":" .. err_line .. ": in function", 1, true), e)
    assert.truthy(e:find("[[node explode (defined at " .. here .. ":" .. at .. ")]]", 1, true), e)
    for i = 1, 3 do assert.equal(i, sess:run(y, {[x] = i})) end
  end)

  it("is differentiable with a gradient function: the relu of effective-tensorflow", function()
    local x = tf.random_normal({10})
    local y = relu(x)
    local err = tf.test.compute_gradient_error(x, {10}, y, {10})
    assert.is_true(err < 1e-3, "gradient error " .. err)
    local p = tf.placeholder(tf.float32, {4})
    local g = tf.gradients(tf.reduce_sum(relu(p) * tf.constant({1, 2, 3, 4})), p)[1]
    assert.same({0, 2, 0, 4}, tf.Session():run(g, {[p] = {-1, 2, -3, 4}}):totable())
  end)

  it("takes a gradient function that builds graph ops, for every input", function()
    local a = tf.placeholder(tf.float64, {3})
    local b = tf.constant({4, 5, 6}, tf.float64)
    local prod = tf.lua_func(function(u, v)
      local out = u:copy()
      for i = 0, 2 do out:data()[i] = u:data()[i] * v:data()[i] end
      return out
    end, {a, b}, tf.float64, {shape = {3}, grad = function(op, dy)
      local u, v = op.inputs[1], op.inputs[2]
      return dy * v, dy * u
    end})
    H.check_grad(a, {3}, prod, {3}, {x_init_value = {1, -2, 3}})
    local ga, gb = unpack(tf.gradients(tf.reduce_sum(prod), {a, b}))
    local va, vb = unpack(tf.Session():run({ga, gb}, {[a] = {1, 2, 3}}))
    assert.same({4, 5, 6}, va:totable())
    assert.same({1, 2, 3}, vb:totable())
  end)

  it("without a gradient function reports that no gradient is defined", function()
    local x = tf.placeholder(tf.float32, {2})
    local at = line() + 1
    local y = tf.lua_func(function(v) return v end, {x}, tf.float32)
    local e = H.error_of(tf.gradients, y, x)
    assert.truthy(e:find("No gradient defined for operation 'LuaFunc' (op type: LuaFunc)", 1, true), e)
    assert.truthy(e:find(here .. ":" .. at, 1, true), e)
    -- a broken gradient function is reported with its traceback
    local z = tf.lua_func(function(v) return v end, {x}, tf.float32, {grad = function() error("no idea") end})
    e = H.error_of(tf.gradients, z, x)
    assert.truthy(e:find("the gradient function of tf.lua_func failed: " .. here, 1, true), e)
    assert.truthy(e:find("no idea", 1, true), e)
    local w = tf.lua_func(function(v) return v end, {x}, tf.float32, {grad = function(_, dy) return tf.cast(dy, tf.float64) end})
    e = H.error_of(tf.gradients, w, x)
    assert.truthy(e:find("gave input 0 a float64 gradient; the input is float32", 1, true), e)
    -- the graph is still usable
    local ok = tf.gradients(x * 3, x)[1]
    assert.same({3, 3}, tf.Session():run(ok, {[x] = {1, 1}}):totable())
  end)

  it("works inside tf.cond and tf.while_loop, gradients included", function()
    local p = tf.placeholder(tf.bool, {})
    local x = tf.placeholder(tf.float32, {2})
    local square = function(v) return tf.lua_func(function(a) return map(a, function(e) return e * e end) end,
                                                  {v}, tf.float32, {shape = {2},
                                                  grad = function(op, dy) return 2 * op.inputs[1] * dy end}) end
    local y = tf.cond(p, function() return square(x) end, function() return x end)
    local g = tf.gradients(tf.reduce_sum(y), x)[1]
    local sess = tf.Session()
    assert.same({9, 16}, sess:run(y, {[p] = true, [x] = {3, 4}}):totable())
    assert.same({6, 8}, sess:run(g, {[p] = true, [x] = {3, 4}}):totable())
    assert.same({1, 1}, sess:run(g, {[p] = false, [x] = {3, 4}}):totable())
    local i, acc = tf.while_loop(function(i) return tf.less(i, 3) end,
                                 function(i, acc) return i + 1, tf.lua_func(function(a) return map(a, function(e) return e + 1 end) end,
                                                                            {acc}, tf.float32, {shape = {2}}) end,
                                 {tf.constant(0), x})
    local vi, vacc = unpack(sess:run({i, acc}, {[x] = {1, 2}}))
    assert.equal(3, vi)
    assert.same({4, 5}, vacc:totable())
    -- x^4 as two squarings in a loop: the gradient goes through each iteration's lua_func
    local _, fourth = tf.while_loop(function(k) return tf.less(k, 2) end,
                                    function(k, v) return k + 1, square(v) end, {tf.constant(0), x})
    local g4 = tf.gradients(tf.reduce_sum(fourth), x)[1]
    assert.same({1, 16}, sess:run(fourth, {[x] = {1, 2}}):totable())
    assert.same({4, 32}, sess:run(g4, {[x] = {1, 2}}):totable())
  end)

  it("fails the run when the function returns more values than out_dtypes declares", function()
    local sess = tf.Session()
    local function err(fn, dtypes, name)
      return H.error_of(sess.run, sess, tf.lua_func(fn, {}, dtypes, {name = name}))
    end
    assert.matches("^three: the Lua function of tf.lua_func returned 3 values, but out_dtypes declares 2 %[%[node three",
                   err(function() return 1, 2, 3 end, {tf.float32, tf.float32}, "three"))
    assert.matches("^listed: the Lua function of tf.lua_func returned a list of 3 values, but out_dtypes declares 2",
                   err(function() return {1, 2, 3} end, {tf.float32, tf.float32}, "listed"))
    assert.matches("^two: the Lua function of tf.lua_func returned 2 values, but out_dtypes declares 1",
                   err(function() return 1, 2 end, tf.float32, "two"))
    assert.matches("^nil_too: the Lua function of tf.lua_func returned 2 values, but out_dtypes declares 1",
                   err(function() return 1, nil end, tf.float32, "nil_too"))
    assert.matches("^target: the Lua function of tf.lua_func returned 1 value, but out_dtypes declares none",
                   err(function() return 1 end, {}, "target"))
    -- As many as declared (a table is one output's value when one is declared).
    assert.same({1, 2}, sess:run(tf.lua_func(function() return 1, 2 end, {}, {tf.float32, tf.float32})))
    assert.same({1, 2}, sess:run(tf.lua_func(function() return {1, 2} end, {}, {tf.float32, tf.float32})))
    assert.same({1, 2, 3}, sess:run(tf.lua_func(function() return {1, 2, 3} end, {}, tf.float32)):totable())
    -- A gradient function likewise: one gradient per input at most.
    local x = tf.placeholder(tf.float32, {})
    local y = tf.lua_func(function(v) return v end, {x}, tf.float32, {name = "ident", grad = function(_, dy)
      return dy, dy
    end})
    assert.matches("ident: the gradient function of tf.lua_func returned 2 gradients, but the op has 1 input",
                   H.error_of(tf.gradients, y, x))
  end)

  it("reports an error object that is not a string by its fields or __tostring, with the traceback", function()
    local sess = tf.Session()
    local at = line() + 1
    local y = tf.lua_func(function() error({code = 3, reason = "bad shard", [1] = true}) end, {}, tf.float32,
                          {name = "obj"})
    local e = H.error_of(sess.run, sess, y)
    assert.matches("^obj: the Lua function of tf.lua_func failed: error object table: 0x%x+ " ..
                   "{%[1%] = true, code = 3, reason = \"bad shard\"}\nstack traceback:\n", e)
    assert.truthy(e:find(here .. ":" .. at .. ": in function", 1, true), e)
    local z = tf.lua_func(function()
      error(setmetatable({}, {__tostring = function() return "quota exceeded" end}))
    end, {}, tf.float32, {name = "custom"})
    e = H.error_of(sess.run, sess, z)
    assert.matches("^custom: the Lua function of tf.lua_func failed: quota exceeded\nstack traceback:\n", e)
  end)

  it("runs a function with no outputs as a target, and stateless ones too", function()
    local log = {}
    local x = tf.placeholder(tf.float32, {})
    local op = tf.lua_func(function(v) log[#log + 1] = v:get() end, {x}, {})
    assert.equal("LuaFunc", op.type)
    local sess = tf.Session()
    sess:run(op, {[x] = 5})
    sess:run(op, {[x] = 6})
    assert.same({5, 6}, log)
    local pure = tf.lua_func(function(v) return v end, {x}, tf.float32, {stateful = false})
    assert.equal("LuaFuncStateless", pure.op.type)
    assert.equal(8, sess:run(pure, {[x] = 8}))
    assert.equal(tf.lua_func, tf.py_func)
  end)

  it("stays safe in compiled loops, with make_callable too", function()
    local x = tf.placeholder(tf.float32, {})
    local y = tf.lua_func(function(v) return v:get() + 1 end, {x}, tf.float32)
    local sess = tf.Session()
    local f = sess:make_callable(y, {x})
    local total = 0
    for i = 1, 300 do total = total + sess:run(y, {[x] = i}) + f(i) end
    assert.equal(2 * (300 * 301 / 2 + 300), total)
  end)

  it("may run another session, not the one running it", function()
    local other_graph = tf.Graph()
    local doubled = other_graph:as_default(function()
      local p = tf.placeholder(tf.float32, {})
      return {p = p, y = tf.lua_func(function(v) return v:get() * 2 end, {p}, tf.float32)}
    end)
    local other = tf.Session(other_graph)
    local sess
    local x = tf.placeholder(tf.float32, {})
    local via_other = tf.lua_func(function(v) return other:run(doubled.y, {[doubled.p] = v:get()}) end,
                                  {x}, tf.float32)
    local same = tf.lua_func(function(v) return sess:run(x, {[x] = v:get()}) end, {x}, tf.float32)
    sess = tf.Session()
    assert.equal(14, sess:run(via_other, {[x] = 7}))
    local e = H.error_of(sess.run, sess, same, {[x] = 1})
    assert.truthy(e:find("cannot run the session that is running it", 1, true), e)
    local f = sess:make_callable(same, {x})
    e = H.error_of(f, 1)
    assert.truthy(e:find("cannot run the session that is running it", 1, true), e)
    assert.equal(6, sess:run(via_other, {[x] = 3}))
  end)

  it("rejects bad arguments when the op is built", function()
    assert.truthy(H.error_of(tf.lua_func, 3, {}, tf.float32):find("fn must be a function", 1, true))
    assert.truthy(H.error_of(tf.lua_func, print, {}, tf.float32, {grad = 1}):find("grad must be a function", 1, true))
    assert.truthy(H.error_of(tf.lua_func, print, {}, "complex"):find("expected a dtype", 1, true))
  end)
end)
