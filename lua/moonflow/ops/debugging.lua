-- ops/debugging.lua — tf.Print, tf.Assert and the tf.assert_* family,
-- tf.debugging.check_numerics, and tf.lua_func (TensorFlow's py_func).
--
-- Print and lua_func call back into Lua while a session runs (host.lua): a
-- Print writes through the print sink (tf.set_print_sink), never a hidden C
-- stream, and only when the computation flows through it. The assertions are
-- Assert ops over an elementwise condition built from ordinary ops: a failed
-- one fails the run with TensorFlow's message ("assertion failed: [...]"),
-- the values summarized, and the Lua line; the session stays usable.
local ffi = require("ffi")
local jit = require("jit")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local host = require("moonflow.host")
local hygiene = require("moonflow.hygiene")
local args = require("moonflow.args")
local C = core.C

local fail, options = core.fail, args.options

-- Debugging ops by the graph whose sessions run them, for the close-time check.
local function note_debug_op(op, kind)
  local outer = op.graph:outermost()
  local list = outer._debug_ops
  if not list then list = {}; outer._debug_ops = list end
  list[#list + 1] = {op = op, kind = kind, where = core.user_location()}
end

-- At close: a Print or assertion that no run of the session reached did
-- nothing (the computation never flowed through it).
hygiene.close_checks[#hygiene.close_checks + 1] = function(sess, warn)
  local list = sess.graph._debug_ops
  if not list or sess._hygiene_num_ops == nil then return end  -- no run, nothing to tell
  for _, d in ipairs(list) do
    if C.mf_session_op_run_count(sess.ptr, d.op.ptr) == 0 then
      local what, advice
      if d.kind == "print" then
        what = string.format("tf.Print '%s' never ran in this session, so it printed nothing", d.op.name)
        advice = "compute from its result (x = tf.Print(x, {x}, \"x: \"), then use x) so that the " ..
                 "fetched values flow through it"
      else
        what = string.format("the assertion '%s' (a %s) never ran in this session, so it checked nothing",
                             d.op.name, d.op.type)
        advice = d.kind == "identity" and "compute from its result so that the fetched values flow through it"
                 or "make what you fetch depend on it: tf.control_dependencies({assert_op}, function() ... end)"
      end
      warn("unreached_debug_ops", d.where,
           what .. ": no fetch of its runs depended on it; " .. advice, d.where .. "#" .. d.op.name)
    end
  end
end

return function(tf, ops)
  -- The C call of tf.gradients may call a lua_func's gradient function
  -- (host.lua): never from compiled code.
  jit.off(tf.gradients)

  tf.set_print_sink = host.set_print_sink
  tf.debugging = tf.debugging or {}

  -- tf.Print(input, data, message, first_n, summarize, name), or
  -- tf.Print(input, data, message, {first_n=, summarize=, name=}): input,
  -- unchanged, which prints message and then each tensor of data (a list, or
  -- one tensor) in brackets, at most `summarize` (3) entries of each, when a
  -- run computes it; first_n limits it to the first n runs of each session.
  function tf.Print(input, data, ...)
    local o = options("tf.Print", {"message", "first_n", "summarize", "name"}, ...)
    local message, first_n, summarize, name = o.message, o.first_n, o.summarize, o.name
    input = G.convert(input)
    if data == nil then data = {} elseif G.is_tensor(data) or type(data) ~= "table" then data = {data} end
    if message ~= nil and type(message) ~= "string" then
      fail("tf.Print: message must be a string, got " .. tostring(message))
    end
    local inputs = {input}
    for i, d in ipairs(data) do inputs[i + 1] = G.convert(d, nil, input.graph) end
    local op = G.build{"Print", inputs = inputs, name = name, attrs = {
      message = message or "", first_n = G.attr.int(first_n or -1), summarize = G.attr.int(summarize or 3)}}
    host.attach(op.graph)
    note_debug_op(op, "print")
    return op:output(0)
  end

  -- An Assert op over `condition` (bool, any shape: every element must hold).
  -- data: strings and tensors, printed in brackets when it fails.
  local function assert_op(condition, data, summarize, name)
    local inputs, strings, layout = {condition}, {}, {}
    for _, d in ipairs(data or {}) do
      if type(d) == "string" then
        strings[#strings + 1] = d:gsub("\31", " ")
        layout[#layout + 1] = -1
      else
        inputs[#inputs + 1] = G.convert(d, nil, condition.graph)
        layout[#layout + 1] = #inputs - 1
      end
    end
    local op = G.build{"Assert", inputs = inputs, name = name, attrs = {
      strings = table.concat(strings, "\31"), layout = G.attr.ints(layout),
      summarize = G.attr.int(summarize or 3)}}
    note_debug_op(op, "assert")
    return op
  end

  -- tf.Assert(condition, data, summarize, name): an op that fails the run,
  -- printing data (strings and tensors), unless condition (a bool tensor) is
  -- true everywhere.
  function tf.Assert(condition, data, ...)
    local o = options("tf.Assert", {"summarize", "name"}, ...)
    local summarize, name = o.summarize, o.name
    condition = G.convert(condition)
    if condition.dtype ~= tf.bool then
      fail("tf.Assert: the condition must be a bool tensor, got " .. condition.dtype.name)
    end
    return assert_op(condition, data, summarize, name)
  end

  -- The optional arguments of the assertions, in TensorFlow's order after
  -- the tensors, or one options table; a string alone is the message.
  local ASSERT_OPTIONS = {"data", "summarize", "message", "name"}
  local function assert_options(fname, ...)
    local o = options(fname, ASSERT_OPTIONS, ...)
    if type(o.data) == "string" and o.message == nil then o.data, o.message = nil, o.data end
    return o.data, o.summarize, o.message, o.name
  end

  local function with_message(message, rest)
    local out = {}
    if message and message ~= "" then out[1] = message end
    for _, v in ipairs(rest) do out[#out + 1] = v end
    return out
  end

  -- tf.assert_positive(x, data, summarize, message, name) and the other
  -- comparisons with zero: elementwise, vacuously true for an empty x.
  local against_zero = {
    assert_positive = {"less", "x > 0", true}, assert_negative = {"less", "x < 0", false},
    assert_non_negative = {"less_equal", "x >= 0", true}, assert_non_positive = {"less_equal", "x <= 0", false},
  }
  for fname, spec in pairs(against_zero) do
    local cmp, text, zero_first = spec[1], spec[2], spec[3]
    tf[fname] = function(x, ...)
      local data, summarize, message, name = assert_options("tf." .. fname, ...)
      x = G.convert(x)
      return tf.name_scope(name or fname, function()
        local zero = G.convert(0, x.dtype, x.graph)
        local cond = zero_first and ops[cmp](zero, x) or ops[cmp](x, zero)
        data = data or with_message(message, {
          "Condition " .. text .. " did not hold element-wise:", "x (" .. x.name .. ") = ", x})
        return assert_op(cond, data, summarize, "Assert")
      end)
    end
    tf.debugging[fname] = tf[fname]
  end

  -- tf.assert_equal(x, y, data, summarize, message, name) and the other
  -- elementwise comparisons, with broadcasting.
  local binary = {
    assert_equal = {"equal", "=="}, assert_none_equal = {"not_equal", "!="},
    assert_less = {"less", "<"}, assert_less_equal = {"less_equal", "<="},
    assert_greater = {"greater", ">"}, assert_greater_equal = {"greater_equal", ">="},
  }
  for fname, spec in pairs(binary) do
    local cmp, sym = spec[1], spec[2]
    tf[fname] = function(x, y, ...)
      local data, summarize, message, name = assert_options("tf." .. fname, ...)
      local ref = G.is_tensor(x) and x or G.is_tensor(y) and y or nil
      x = G.convert(x, ref and ref.dtype, ref and ref.graph)
      y = G.convert(y, x.dtype, x.graph)
      return tf.name_scope(name or fname, function()
        local cond = ops[cmp](x, y)
        data = data or with_message(message, {
          "Condition x " .. sym .. " y did not hold element-wise:",
          "x (" .. x.name .. ") = ", x, "y (" .. y.name .. ") = ", y})
        return assert_op(cond, data, summarize, "Assert")
      end)
    end
    tf.debugging[fname] = tf[fname]
  end

  -- tf.assert_rank(x, rank, data, summarize, message, name): checked when the
  -- op is built if x's rank is known there (an error, or a no_op when it
  -- holds), else when the graph runs.
  function tf.assert_rank(x, rank, ...)
    local data, summarize, message, name = assert_options("tf.assert_rank", ...)
    x = G.convert(x)
    local static = x:get_shape().ndims
    if type(rank) == "number" and static ~= nil then
      if static ~= rank then
        fail(string.format("tf.assert_rank: %sTensor %s must have rank %d. Received rank %d, shape %s",
                           message and message ~= "" and message .. ". " or "", x.name, rank, static,
                           tostring(x:get_shape())))
      end
      return tf.name_scope(name or "assert_rank", function() return ops.no_op() end)
    end
    return tf.name_scope(name or "assert_rank", function()
      local want = G.convert(rank, tf.int32, x.graph)
      local cond = ops.equal(ops.rank(x), want)
      data = data or with_message(message, {
        "Tensor " .. x.name .. " must have rank", want, "Received shape: ", ops.shape(x)})
      return assert_op(cond, data, summarize, "Assert")
    end)
  end
  tf.debugging.assert_rank = tf.assert_rank
  tf.debugging.Assert = tf.Assert

  -- tf.debugging.check_numerics(x, message, name): x, unchanged, failing the
  -- run when it holds a NaN or an infinity ("<message> : Tensor had NaN values").
  function tf.debugging.check_numerics(x, ...)
    local o = options("tf.debugging.check_numerics", {"message", "name"}, ...)
    local message, name = o.message, o.name
    x = G.convert(x)
    local op = G.build{"CheckNumerics", inputs = {x}, name = name, attrs = {message = message or ""}}
    note_debug_op(op, "identity")
    return op:output(0)
  end
  ops.check_numerics = tf.debugging.check_numerics
  -- TensorFlow 1.x's tf.verify_tensor_all_finite(t, msg).
  function tf.verify_tensor_all_finite(t, ...) return tf.debugging.check_numerics(t, ...) end
  tf.debugging.verify_tensor_all_finite = tf.verify_tensor_all_finite

  -- tf.lua_func(fn, inputs, out_dtypes, {grad=, stateful=, name=, shapes=}):
  -- an op running fn(...) when a session computes it, with one tf.Array per
  -- input. fn returns one value per output dtype (Arrays, numbers or nested
  -- tables; converted to the dtype). out_dtypes is one dtype (the result is
  -- one tensor) or a list (the result is a list; empty: the op itself).
  -- Output shapes are unknown unless `shapes` (a list, one shape per output)
  -- or `shape` (one output) says. `grad(op, dy1, dy2, ...)` makes it
  -- differentiable: it builds the gradients of op.inputs from the gradients
  -- of its outputs with graph ops (lua_funcs too) and returns one per input
  -- (nil for none). stateful = false lets control flow recompute it. An
  -- error in fn fails the run with its Lua traceback.
  local LUA_FUNC_OPTIONS = {"grad", "stateful", "name", "shapes", "shape", positional = 0, empty = true}
  function tf.lua_func(fn, inputs, out_dtypes, ...)
    local opts = options("tf.lua_func", LUA_FUNC_OPTIONS, ...)
    if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
      fail("tf.lua_func: fn must be a function, got " .. tostring(fn))
    end
    if opts.grad ~= nil and type(opts.grad) ~= "function" then
      fail("tf.lua_func: grad must be a function(op, grad, ...), got " .. tostring(opts.grad))
    end
    if G.is_tensor(inputs) or type(inputs) ~= "table" then inputs = {inputs} end
    local single = getmetatable(out_dtypes) == core.DType or type(out_dtypes) == "string"
    local dtypes = single and {out_dtypes} or out_dtypes
    if type(dtypes) ~= "table" then fail("tf.lua_func: out_dtypes must be a dtype or a list of dtypes") end
    local enums = {}
    for i, d in ipairs(dtypes) do
      dtypes[i] = core.as_dtype(d, "tf.lua_func")
      enums[i] = dtypes[i].enum
    end
    local converted = {}
    for i, x in ipairs(inputs) do converted[i] = G.convert(x) end
    local shapes = opts.shapes or (opts.shape and {opts.shape})
    local attrs = {Tout = G.attr.ints(enums), has_grad = opts.grad ~= nil}
    if shapes then
      local flat = {}
      for i = 1, #dtypes do
        local s = shapes[i]
        if getmetatable(s) == G.TensorShape then s = s.dims end
        if s == nil or s == false then flat[#flat + 1] = -1
        else
          flat[#flat + 1] = #s
          for _, d in ipairs(s) do flat[#flat + 1] = d end
        end
      end
      attrs.shapes = G.attr.ints(flat)
    end
    local g = G.graph_of(converted)
    local entry = {fn = fn, grad = opts.grad, out_dtypes = dtypes}
    local id = host.register(g, entry)
    attrs.fn_id = G.attr.int(id)
    local ok, op = pcall(G.build, {opts.stateful == false and "LuaFuncStateless" or "LuaFunc",
                                   inputs = converted, attrs = attrs, name = opts.name})
    if not ok then
      host.unregister(id)
      error(op, 0)
    end
    host.attach(op.graph)
    if #dtypes == 0 then return op end
    if single then return op:output(0) end
    local outs = {}
    for i = 1, #dtypes do outs[i] = op:output(i - 1) end
    return outs
  end
  tf.py_func = tf.lua_func
end
