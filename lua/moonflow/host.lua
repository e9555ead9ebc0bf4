-- host.lua — the engine's host callbacks (src/include/moonflow.h, mf_host), written
-- in Lua: LuaFunc ops (tf.lua_func) call Lua functions while a session runs,
-- Print ops write through a Lua sink, and LuaFunc's gradient rule calls the
-- Lua gradient function while tf.gradients builds the graph.
--
-- Two rules keep the callbacks safe:
--   * A callback never raises: everything it does runs under (x)pcall, and a
--     failure reaches the engine as an error status, so no Lua error unwinds
--     through C frames. The engine adds the op and its Lua line.
--   * LuaJIT aborts the process ("bad callback") when a C function called
--     from JIT-compiled code calls back into Lua. So the runs of a graph that
--     holds host ops, and tf.gradients, make their C calls from functions
--     with the JIT turned off (session_run, callable_run below); graphs
--     without host ops keep the compiled fast path (Graph._host_ops tells).
local ffi = require("ffi")
local jit = require("jit")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local C = core.C
local fail = core.fail

local M = {}

-- The print sink: a function(text) writing one line; Print ops call it. ---------
local function default_sink(text) io.stdout:write(text, "\n") end
M.sink = default_sink

-- Sets the sink (nil restores the default, which writes to io.stdout);
-- returns the previous one.
function M.set_print_sink(fn)
  if fn ~= nil and type(fn) ~= "function" then
    fail("tf.set_print_sink: expected a function(text) or nil, got " .. tostring(fn))
  end
  local old = M.sink
  M.sink = fn or default_sink
  return old
end

-- Lua functions of LuaFunc ops, by id: {fn =, grad =, out_dtypes =, name =}. ---
local funcs = {}
local last_id = 0

-- Registers an entry for graph g (a Lua Graph); returns its id. The entry is
-- dropped when g is collected (no session can run g then).
function M.register(g, entry)
  last_id = last_id + 1
  funcs[last_id] = entry
  local owner = g:outermost()
  local ids = owner._lua_func_ids
  if not ids then
    ids = {}
    owner._lua_func_ids = ids
    owner._lua_func_sentinel = ffi.gc(ffi.new("char[1]"), function()
      for _, id in ipairs(ids) do funcs[id] = nil end
    end)
  end
  ids[#ids + 1] = last_id
  return last_id
end

function M.unregister(id) funcs[id] = nil end

-- Lua Graph objects by the address of their mf_graph (weak: a graph that
-- is gone has no entry). A graph made in C gets a plain wrapper.
local graphs = setmetatable({}, {__mode = "v"})
local function address(ptr) return tonumber(ffi.cast("uintptr_t", ptr)) end

local function graph_for(ptr)
  local key = address(ptr)
  local g = graphs[key]
  if not g then
    g = setmetatable({ptr = ffi.gc(C.mf_graph_retain(ptr), C.mf_graph_release), _ops = {},
                      _control_deps = {}, _devices = {}, collections = {}}, G.Graph)
    graphs[key] = g
  end
  return g
end

-- Errors ------------------------------------------------------------------------------
local function op_name(op_ptr) return ffi.string(C.mf_op_name(op_ptr)) end

-- Reports a failure to the engine; never raises.
local function report(s, message)
  local ok = pcall(C.mf_status_set_error, s, C.MF_UNKNOWN, tostring(message))
  if not ok then C.mf_status_set_error(s, C.MF_UNKNOWN, "lua_func: error") end
  return C.MF_UNKNOWN
end

-- A message with the Lua traceback of the user's function, for xpcall: the
-- frames from the xpcall out (this module, the session) are left out, and it
-- is kept short enough for a status message, which also names the op.
local MAX_MESSAGE = 700

-- An error value as text: strings and numbers as they are, a table with
-- __tostring through it, any other table as its address and its fields
-- ({code = 3}: error({code = 3}) is legal Lua and says more than its address).
local function describe_error(err)
  if type(err) ~= "table" then return tostring(err) end
  local mt = getmetatable(err)
  if type(mt) == "table" and mt.__tostring then
    local ok, text = pcall(tostring, err)
    if ok then return text end
  end
  local keys = {}
  for k in pairs(err) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "number" or type(a) == "string") then return a < b end
    return type(a) < type(b)
  end)
  local fields = {}
  for i, k in ipairs(keys) do
    if i > 8 then fields[#fields + 1] = "..."; break end
    local v = err[k]
    local key = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or "[" .. (type(k) == "string" and
                string.format("%q", k) or tostring(k)) .. "]"
    fields[#fields + 1] = key .. " = " .. (type(v) == "string" and string.format("%q", v) or tostring(v))
  end
  return "error object " .. tostring(err) .. " {" .. table.concat(fields, ", ") .. "}"
end
M.describe_error = describe_error

local function traceback(err)
  local tb = debug.traceback(describe_error(err), 2)
  local cut = tb:find("\n%s*%[C%]: in function 'xpcall'")
  if cut then tb = tb:sub(1, cut - 1) end
  if #tb > MAX_MESSAGE then tb = tb:sub(1, MAX_MESSAGE - 4) .. " ..." end
  return tb
end

-- Converts what a Lua function returned into an Array of dtype.
local function to_array(v, dtype, what)
  if Array.is(v) then
    if v.dtype == dtype then return v end
    return Array.from(v, dtype)
  end
  if type(v) == "number" or type(v) == "boolean" or type(v) == "table" then return Array.from(v, dtype) end
  fail(what .. " is " .. (v == nil and "missing" or "a " .. type(v)) ..
       ": return a tf.Array, a number or a nested table of numbers")
end

-- Its arguments as a table with their count, trailing nils included.
local function pack(...) return {n = select("#", ...), ...} end

-- call: runs the Lua function of a LuaFunc op ----------------------------------------
local function call(op_ptr, fn_id, inputs, ninputs, outputs, noutputs)
  local entry = funcs[tonumber(fn_id)]
  if not entry then
    return nil, string.format("%s: no Lua function is registered for this lua_func (id %d); it runs only " ..
                              "in the program that built it", op_name(op_ptr), tonumber(fn_id))
  end
  local args = {}
  for i = 0, ninputs - 1 do args[i + 1] = Array.wrap(C.mf_tensor_retain(inputs[i])) end
  local results = pack(xpcall(entry.fn, traceback, unpack(args, 1, ninputs)))
  if not results[1] then
    return nil, string.format("%s: the Lua function of tf.lua_func failed: %s", op_name(op_ptr), tostring(results[2]))
  end
  local nvalues, what = results.n - 1, ""
  -- One list for several outputs is accepted too.
  if noutputs > 1 and nvalues == 1 and type(results[2]) == "table" and getmetatable(results[2]) == nil then
    local list = results[2]
    results = pack(true, unpack(list, 1, table.maxn(list)))
    nvalues, what = results.n - 1, "a list of "
  end
  if nvalues > noutputs then
    return nil, string.format("%s: the Lua function of tf.lua_func returned %s%d value%s, but out_dtypes declares %s",
                              op_name(op_ptr), what, nvalues, nvalues == 1 and "" or "s",
                              noutputs == 0 and "none" or tostring(noutputs))
  end
  for i = 1, noutputs do
    local ok, a = pcall(to_array, results[i + 1], entry.out_dtypes[i], "output " .. (i - 1))
    if not ok then
      return nil, string.format("%s: the Lua function of tf.lua_func returned a bad value: %s", op_name(op_ptr), a)
    end
    outputs[i - 1] = C.mf_tensor_retain(a.ptr)
  end
  return true
end

local call_cb = ffi.cast("mf_host_call_fn", function(_, op_ptr, fn_id, inputs, ninputs, outputs, noutputs, s)
  local ok, done, message = pcall(call, op_ptr, fn_id, inputs, ninputs, outputs, noutputs)
  if not ok then return report(s, done) end
  if not done then return report(s, message) end
  return C.MF_OK
end)

-- print: hands a Print op's line to the sink -------------------------------------
local print_cb = ffi.cast("mf_host_print_fn", function(_, op_ptr, text, s)
  local ok, err = pcall(function() M.sink(ffi.string(text)) end)
  if not ok then
    return report(s, string.format("%s: the print sink failed: %s", op_name(op_ptr), tostring(err)))
  end
  return C.MF_OK
end)

-- grad: builds a LuaFunc's gradient with its Lua gradient function ----------------
local function grad(g_ptr, op_ptr, fn_id, grads, ngrads, input_grads, ninputs)
  local entry = funcs[tonumber(fn_id)]
  if not entry or not entry.grad then
    return nil, op_name(op_ptr) .. ": this lua_func has no gradient function"
  end
  local g = graph_for(g_ptr)
  -- The handle may be made here first and keeps its pointer: not const.
  local op = graph_for(C.mf_op_graph(op_ptr)):_op(ffi.cast("mf_op *", op_ptr))
  local dys = {}
  for i = 0, ngrads - 1 do dys[i + 1] = g:_op(grads[i].op):output(grads[i].index) end
  local results = pack(xpcall(function()
    return g:as_default(function() return entry.grad(op, unpack(dys, 1, ngrads)) end)
  end, traceback))
  if not results[1] then
    return nil, string.format("%s: the gradient function of tf.lua_func failed: %s", op_name(op_ptr), tostring(results[2]))
  end
  local what = ""
  if type(results[2]) == "table" and getmetatable(results[2]) == nil then
    local list = results[2]
    results = pack(true, unpack(list, 1, table.maxn(list)))
    what = "a list of "
  end
  if results.n - 1 > ninputs then
    return nil, string.format("%s: the gradient function of tf.lua_func returned %s%d gradients, but the op has " ..
                              "%d input%s", op_name(op_ptr), what, results.n - 1, ninputs, ninputs == 1 and "" or "s")
  end
  local inputs = op.inputs
  for k = 1, ninputs do
    local v = results[k + 1]
    if v ~= nil then
      local ok, t = pcall(function()
        return g:as_default(function() return G.convert(v, inputs[k].dtype, g) end)
      end)
      if not ok then
        return nil, string.format("%s: the gradient function returned a bad gradient for input %d: %s",
                                  op_name(op_ptr), k - 1, tostring(t))
      end
      input_grads[k - 1].op, input_grads[k - 1].index = t.op.ptr, t.value_index
    end
  end
  return true
end

local grad_cb = ffi.cast("mf_host_grad_fn", function(_, g_ptr, op_ptr, fn_id, grads, ngrads, input_grads, ninputs, s)
  local ok, done, message = pcall(grad, g_ptr, op_ptr, fn_id, grads, ngrads, input_grads, ninputs)
  if not ok then return report(s, done) end
  if not done then return report(s, message) end
  return C.MF_OK
end)

local host = ffi.new("mf_host")
host.call, host.print, host.grad = call_cb, print_cb, grad_cb

-- Gives graph g (a Lua Graph, possibly a function being traced) the Lua
-- callbacks, and marks the graph its sessions run as holding host ops.
function M.attach(g)
  graphs[address(g.ptr)] = g
  C.mf_graph_set_host(g.ptr, host)
  local outer = g:outermost()
  if outer ~= g then
    graphs[address(outer.ptr)] = outer
    C.mf_graph_set_host(outer.ptr, host)
  end
  outer._host_ops = true
end

-- C calls that may call back, made from interpreted code (see the top). --------
-- A callback must not run the session that is calling it (its plan's values
-- would be overwritten mid-run): such a run fails instead.
local running = {}  -- session addresses with a run in progress

local function refuse(s)
  return C.mf_status_set_error(s, C.MF_FAILED_PRECONDITION,
    "a lua_func or print sink cannot run the session that is running it; use another tf.Session")
end

function M.session_run(sess, feeds, feed_values, nfeeds, fetches, fetch_values, nfetches, targets, ntargets, s)
  local key = address(sess)
  if running[key] then return refuse(s) end
  running[key] = true
  local rc = C.mf_session_run(sess, feeds, feed_values, nfeeds, fetches, fetch_values, nfetches, targets,
                              ntargets, s)
  running[key] = nil
  return rc
end
jit.off(M.session_run)

-- sess: the session owning the callable.
function M.callable_run(sess, callable, feed_values, fetch_values, s)
  local key = address(sess)
  if running[key] then return refuse(s) end
  running[key] = true
  local rc = C.mf_callable_run(callable, feed_values, fetch_values, s)
  running[key] = nil
  return rc
end
jit.off(M.callable_run)

return M
