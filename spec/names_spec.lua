-- Op names as TensorFlow gives them (unique_name), names of any length, the
-- names TensorFlow rejects, and the Lua objects standing for ops and tensors
-- (made on demand, one per op or output while in use).
local tf = require("moonflow")
local H = require("spec.helpers")

local function names(list)
  local out = {}
  for i, t in ipairs(list) do out[i] = t.op.name end
  return out
end

describe("unique op names", function()
  before_each(function() tf.reset_default_graph() end)

  it("number repeated names a, a_1, a_2 as TensorFlow does", function()
    local a = {}
    for i = 1, 3 do a[i] = tf.constant(i, {name = "a"}) end
    assert.same({"a", "a_1", "a_2"}, names(a))
    assert.same({"Const", "Const_1"}, names({tf.constant(1), tf.constant(2)}))
  end)

  it("make a user's name that collides with a made one unique in turn (a_1 -> a_1_1)", function()
    local a, a1 = tf.constant(1, {name = "a"}), tf.constant(2, {name = "a"})
    local user = tf.constant(3, {name = "a_1"})
    local again = tf.constant(4, {name = "a"})
    assert.same({"a", "a_1", "a_1_1", "a_2"}, names({a, a1, user, again}))
  end)

  it("skip suffixes the user took first (a_1 then a, a -> a, a_2)", function()
    local taken = tf.constant(1, {name = "a_1"})
    local a, next_a = tf.constant(2, {name = "a"}), tf.constant(3, {name = "a"})
    assert.same({"a_1", "a", "a_2"}, names({taken, a, next_a}))
    assert.equal("a_3", tf.constant(4, {name = "a"}).op.name)
  end)

  it("share one namespace between ops and name scopes", function()
    tf.name_scope("s", function() tf.constant(1) end)
    assert.equal("s_1", tf.constant(2, {name = "s"}).op.name)
    local scoped = tf.name_scope("s", function() return tf.constant(3) end)
    assert.equal("s_2/Const", scoped.op.name)
  end)

  it("find every op by its name, tensors by name:index", function()
    local g = tf.get_default_graph()
    local made = {}
    for i = 1, 300 do made[i] = tf.constant(i, {name = "c"}) end
    for i = 1, 300 do
      local want = i == 1 and "c" or "c_" .. (i - 1)
      assert.equal(want, made[i].op.name)
      assert.equal(made[i], g:get_tensor_by_name(want .. ":0"))
    end
  end)
end)

describe("long names", function()
  before_each(function() tf.reset_default_graph() end)
  local prefix = string.rep("n", 2000)

  it("are kept whole, also when two share a prefix of 1023 characters or more", function()
    local x = tf.constant(1, {name = prefix .. "x"})
    local y = tf.constant(2, {name = prefix .. "y"})
    local x1 = tf.constant(3, {name = prefix .. "x"})
    assert.equal(prefix .. "x", x.op.name)
    assert.equal(prefix .. "y", y.op.name)
    assert.equal(prefix .. "x_1", x1.op.name)
    assert.equal(x1, tf.get_default_graph():get_tensor_by_name(prefix .. "x_1:0"))
    assert.equal(6, H.run(x + y + x1))
  end)

  it("work as name scopes", function()
    local inner = tf.name_scope(prefix, function()
      return tf.name_scope(prefix, function() return tf.constant(1, {name = "c"}) end)
    end)
    assert.equal(prefix .. "/" .. prefix .. "/c", inner.op.name)
    local again = tf.name_scope(prefix, function() return tf.constant(1) end)
    assert.equal(prefix .. "_1/Const", again.op.name)
  end)

  it("survive a graph file", function()
    local dir = H.tmpdir()
    local x = tf.placeholder(tf.float32, {}, prefix .. "x")
    local y = tf.add(x, 1, prefix .. "y")
    tf.add(y, 1, prefix .. "y")
    local path = tf.train.write_graph(tf.get_default_graph(), dir .. "/long.json")
    local g = tf.train.import_graph(path)
    os.execute("rm -rf '" .. dir .. "'")
    local xs, ys = g:get_tensor_by_name(prefix .. "x:0"), g:get_tensor_by_name(prefix .. "y_1:0")
    assert.equal(prefix .. "y", ys.op.inputs[1].op.name)
    assert.equal(7, tf.Session(g):run(ys, {[xs] = 5}))
  end)
end)

describe("names TensorFlow rejects", function()
  before_each(function() tf.reset_default_graph() end)
  local line = H.this_line

  it("are errors quoting TensorFlow's pattern, at the caller's line", function()
    for _, bad in ipairs({"a b", "_a", "-a", "/a", ">a", "a!", "é"}) do
      local where = line() + 1
      local err = H.error_of(function() tf.constant(1, {name = bad}) end)
      assert.equal("Const: '" .. bad .. "' is not a valid op name: TensorFlow's op names match " ..
                   "[A-Za-z0-9.][A-Za-z0-9_.\\-/>]* (at spec/names_spec.lua:" .. where .. ")", err)
    end
    local where = line() + 1
    local err = H.error_of(function() tf.name_scope("a b", function() end) end)
    assert.equal("tf.name_scope: 'a b' is not a valid scope name: TensorFlow's scope names match " ..
                 "[A-Za-z0-9_.\\-/>]* (at spec/names_spec.lua:" .. where .. ")", err)
  end)

  it("and the ones it accepts work", function()
    local ok = {"1a", ".a", "a.b-c/d>e", "A_9"}
    for _, name in ipairs(ok) do assert.equal(name, tf.constant(1, {name = name}).op.name) end
    assert.equal("_s/Const", tf.name_scope("_s", function() return tf.constant(1) end).op.name)
  end)
end)

describe("Operation and Tensor objects", function()
  before_each(function() tf.reset_default_graph() end)

  it("are one per op and output while in use, so identity and table keys hold", function()
    local x = tf.placeholder(tf.float32, {}, "x")
    local y = x + 1
    local key = {[y] = "y"}
    collectgarbage()
    collectgarbage()
    assert.equal("y", key[y.op:output(0)])
    assert.equal(y.op, y.op)
    assert.is_true(rawequal(y, tf.get_default_graph():get_tensor_by_name("Add:0")))
    assert.is_true(rawequal(x, y.op.inputs[1]))
    local values, indices = tf.nn.top_k(tf.constant({1, 3, 2}), 2)
    collectgarbage()
    assert.is_true(rawequal(indices, values.op:output(1)))
    assert.is_true(rawequal(indices, values.graph:get_tensor_by_name(indices.name)))
  end)

  it("keep the fields given to them (a variable's initializer) when no one holds them", function()
    local name = tf.Variable(3, {name = "v", collections = {}}).name
    collectgarbage()
    collectgarbage()
    local v = tf.get_default_graph():get_tensor_by_name(name)
    assert.equal("v/Assign", v.initializer.name)
    local sess = tf.Session()
    sess:run(v.initializer)
    assert.equal(3, sess:run(v))
  end)

  it("name the caller's line in errors also through helpers and converted numbers", function()
    local function helper(t) return t + tf.constant({1, 2}) end
    local where = H.this_line() - 1
    local err = H.error_of(function() return helper(tf.constant({1, 2, 3})) end)
    assert.matches("%(at spec/names_spec.lua:" .. where .. "%)$", err)
    local g = tf.get_default_graph()
    local y = tf.constant(1) + 2
    assert.equal("spec/names_spec.lua:" .. (H.this_line() - 1), y.op.inputs[2].op.origin)
    assert.equal(y.op.origin, y.op.inputs[2].op.origin)
    assert.equal(g, y.graph)
  end)

  it("name the line in a coroutine too, and build with no user's frame at all", function()
    local co = coroutine.wrap(function()
      coroutine.yield(tf.constant(1))
    end)
    local where = H.this_line() - 2
    assert.equal("spec/names_spec.lua:" .. where, co().op.origin)
    -- A coroutine running tf.constant itself has no line of the user's above it.
    assert.equal("?", coroutine.wrap(tf.constant)(2).op.origin)
  end)

  it("build and report errors when a C host lua_pcalls moonflow's functions itself", function()
    if os.execute("pkg-config --exists luajit") ~= 0 then
      pending("pkg-config and LuaJIT's headers are needed to build the C host (make test-deps)")
      return
    end
    -- No Lua or C frame lies below tf.constant's own: the walk for the
    -- user's line must not ask getfenv past the last frame.
    local dir = H.tmpdir()
    H.write(dir .. "/host.c", [[
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
static int call(lua_State *L, const char *fn, int nargs) {
  int rc = lua_pcall(L, nargs, 1, 0);
  printf("%s: %s\n", fn, rc ? lua_tostring(L, -1) : luaL_typename(L, -1));
  return rc;
}
int main(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_getglobal(L, "require");
  lua_pushstring(L, "moonflow");
  if (call(L, "require", 1)) return 1;
  lua_getfield(L, -1, "constant");
  lua_pushnumber(L, 3);
  if (call(L, "constant", 1)) return 1;
  lua_getfield(L, -2, "reshape");
  lua_pushvalue(L, -2);
  lua_pushstring(L, "bad");
  call(L, "reshape", 2);
  lua_close(L);
  return 0;
}
]])
    local cc = "cc $(pkg-config --cflags luajit) " .. dir .. "/host.c $(pkg-config --libs luajit) -o " .. dir .. "/host"
    assert.is_true(os.execute(cc) == 0)
    local p = io.popen(dir .. "/host 2>&1")
    local out = p:read("*a")
    p:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert.equal("require: table\nconstant: table\n" ..
      "reshape: tf.reshape: expected a shape (a Lua list of integers or an int32 tensor), got the string \"bad\"\n", out)
  end)
end)

describe("the C API's inputs by op id and scalar constants", function()
  before_each(function() tf.reset_default_graph() end)
  local C = require("moonflow.core").C
  local status = require("moonflow.core").status
  local ffi = require("ffi")

  it("build ops as the Lua API does, and report an op id that names no op", function()
    local g = tf.get_default_graph()
    local x = tf.placeholder(tf.float32, {}, "x")
    local d = C.mf_op_desc_new(g.ptr, "Const", "two")
    C.mf_op_desc_set_attr_scalar(d, "value", C.MF_FLOAT32, 2)
    local two = C.mf_op_desc_finish(d, status)
    assert.is_true(two ~= nil)
    d = C.mf_op_desc_new(g.ptr, "Mul", "y")
    C.mf_op_desc_add_input_id(d, x._id, 0)
    C.mf_op_desc_add_input_id(d, C.mf_op_id(two), 0)
    assert.is_true(C.mf_op_desc_finish(d, status) ~= nil)
    assert.equal(7, tf.Session():run(g:get_tensor_by_name("y:0"), {[x] = 3.5}))
    d = C.mf_op_desc_new(g.ptr, "Neg", nil)
    C.mf_op_desc_add_input_id(d, 12345, 0)
    assert.is_true(C.mf_op_desc_finish(d, status) == nil)
    assert.equal("Neg: input 0 is missing", ffi.string(C.mf_status_message(status)))
  end)

  it("share one value among constants of equal value and dtype", function()
    local a, b, c = tf.constant(1), tf.constant(1), tf.constant(1, tf.int32)
    local va, vb = C.mf_op_attr_tensor(a.op.ptr, "value"), C.mf_op_attr_tensor(b.op.ptr, "value")
    assert.is_true(va == vb)
    assert.is_false(va == C.mf_op_attr_tensor(c.op.ptr, "value"))
    local zero, minus_zero = tf.constant(0), tf.constant(-0.0)
    assert.is_false(C.mf_op_attr_tensor(zero.op.ptr, "value") == C.mf_op_attr_tensor(minus_zero.op.ptr, "value"))
    assert.same({1, 1, 1}, tf.Session():run({a, b, c}))
    assert.equal(-math.huge, tf.Session():run(1 / minus_zero))
  end)
end)
