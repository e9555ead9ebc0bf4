-- ops/control_flow.lua — tf.cond, tf.case, tf.where, tf.while_loop and tf.TensorArray.
--
-- Control flow is functional (src/ops/control/call.c): an If or While op holds its
-- branches, condition and body as function graphs traced here from Lua
-- closures. Tracing calls the closure with a fresh graph as the default graph
-- and an `_Arg` op for each explicit argument; a tensor of an enclosing graph
-- used inside is captured (graph.lua): it becomes an `_Arg` too, and an input
-- of the calling op. A variable is captured as a stand-in VariableV2 op naming
-- it (attr _var_id), so reads see its current value and assignments inside a
-- branch or loop body write it; the calling op takes it as a ref input.
--
-- Results and loop variables are structures: a tensor, a TensorArray, a Lua
-- number or boolean (made a constant), or a table of them; they are flattened
-- into a list of tensors for the op and rebuilt around its outputs.
local ffi = require("ffi")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local C = core.C
local dtypes = core.dtypes

local is_tensor = G.is_tensor
local fail, options, name_of = core.fail, args.options, args.name_of

local function shape_str(dims) return tostring(G.TensorShape.new(dims)) end

local in_name_scope = G.in_name_scope

-- Function graphs -------------------------------------------------------------------
return function(tf, ops)
  -- The id of the variable a VariableV2 tensor is (or stands for) in the
  -- session's graph.
  local function var_id(v)
    local i64 = ffi.new("int64_t[1]")
    if C.mf_op_attr_int(v.op.ptr, "_var_id", i64) then return tonumber(i64[0]) end
    return C.mf_op_id(v.op.ptr)
  end

  -- A new function graph traced inside `parent`: it shares the parent's
  -- variable scopes and store, collections and graph seed.
  local function function_graph(parent)
    parent:as_default(tf.get_variable_scope)  -- makes the parent's variable store
    local fg = G.Graph.new()
    fg._parent = parent
    fg._captures, fg._capture_map = {}, {}
    fg._control_captures, fg._control_captured = {}, {}
    fg._variables = parent._variables
    fg.collections = parent.collections
    C.mf_graph_set_seed(fg.ptr, C.mf_graph_seed(parent.ptr))
    -- The stand-in for `outer` (a tensor of the parent), built in fg (which
    -- may be an enclosing function of the one being traced), without the
    -- control dependencies in force and at the root name scope.
    fg._capture_arg = function(outer)
      local saved = fg._control_deps
      fg._control_deps = {}
      local ok, t = pcall(fg.as_default, fg, function()
        return in_name_scope(fg, "", function()
          local dims = outer:get_shape().dims
          local attrs = {dtype = outer.dtype}
          if dims then attrs.shape = G.attr.shape(dims) end
          if outer.op.type == "VariableV2" then
            attrs._var_id = G.attr.int(var_id(outer))
            return G.op{"VariableV2", attrs = attrs, name = outer.op.name, graph = fg}
          end
          return G.op{"_Arg", attrs = attrs, name = "Arg", graph = fg}
        end)
      end)
      fg._control_deps = saved
      if not ok then error(t, 0) end
      return t
    end
    return fg
  end

  -- Structures -------------------------------------------------------------------------
  -- A structure flattens into leaves (in a fixed order: list items, then map
  -- keys sorted) and a template: a leaf index, or {table = {key = template}}.
  -- A leaf is {tensor = t}, {value = lua value}, {ta = TensorArray} or {op = Operation}.
  local TensorArray  -- defined below

  local function sorted_keys(t)
    local keys, n = {}, #t
    for i = 1, n do keys[i] = i end
    local extra = {}
    for k in pairs(t) do
      if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then extra[#extra + 1] = k end
    end
    table.sort(extra, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(extra) do keys[#keys + 1] = k end
    return keys
  end

  local function flatten(x, leaves, what)
    if is_tensor(x) then leaves[#leaves + 1] = {tensor = x}
    elseif getmetatable(x) == TensorArray then leaves[#leaves + 1] = {ta = x}
    elseif G.is_operation(x) then leaves[#leaves + 1] = {op = x}
    elseif type(x) == "number" or type(x) == "boolean" or tf.Array.is(x) then leaves[#leaves + 1] = {value = x}
    elseif type(x) == "table" and getmetatable(x) == nil then
      local items = {}
      for _, k in ipairs(sorted_keys(x)) do items[k] = flatten(x[k], leaves, what) end
      return {table = items, keys = sorted_keys(x)}
    else
      fail(what .. ": expected tensors, TensorArrays, numbers, booleans or tables of them, got " .. tostring(x))
    end
    return #leaves
  end

  local function leaf_str(l)
    if l.tensor then return "a " .. l.tensor.dtype.name .. " tensor" end
    if l.ta then return "a TensorArray of " .. l.ta.dtype.name end
    if l.op then return "an Operation" end
    return "the Lua value " .. tostring(l.value)
  end

  -- nil when templates a and b have the same structure, else what differs.
  local function structure_diff(a, b, path)
    if type(a) == "number" and type(b) == "number" then return nil end
    if type(a) ~= type(b) then return path .. " is a " .. (type(a) == "number" and "value" or "table") ..
                                     " in one and a " .. (type(b) == "number" and "value" or "table") .. " in the other" end
    if #a.keys ~= #b.keys then
      return string.format("%s has %d entries in one and %d in the other", path, #a.keys, #b.keys)
    end
    for i, k in ipairs(a.keys) do
      if b.keys[i] ~= k then return string.format("%s has key %s in one and %s in the other", path, tostring(k), tostring(b.keys[i])) end
      local d = structure_diff(a.table[k], b.table[k], path .. "[" .. tostring(k) .. "]")
      if d then return d end
    end
  end

  -- The leaves as tensors of graph fg (captured when outer; Lua values as
  -- constants of the dtype `hints[i]` gives). TensorArrays give two tensors.
  local function leaf_tensors(fg, leaves, hints)
    return fg:as_default(function()
      local out = {}
      for i, l in ipairs(leaves) do
        if l.tensor then out[#out + 1] = fg:capture(l.tensor)
        elseif l.ta then
          out[#out + 1] = fg:capture(l.ta.buffer)
          out[#out + 1] = fg:capture(l.ta.meta)
        elseif l.value ~= nil then
          local hint = hints and hints[i]
          out[#out + 1] = G.convert(l.value, hint and (hint.tensor and hint.tensor.dtype))
        end
      end
      return out
    end)
  end

  -- Rebuilds a structure around `tensors` (consumed in flatten order).
  -- `op` stands for Operation leaves; TensorArrays take two tensors.
  local function rebuild(template, leaves, tensors, op)
    local pos = 0
    local function build(t)
      if type(t) == "number" then
        local l = leaves[t]
        if l.op then return op end
        if l.ta then
          pos = pos + 2
          return l.ta:_with(tensors[pos - 1], tensors[pos])
        end
        pos = pos + 1
        return tensors[pos]
      end
      local out = {}
      for _, k in ipairs(t.keys) do out[k] = build(t.table[k]) end
      return out
    end
    return build(template)
  end

  -- Number of tensors a leaf list flattens to.
  local function width(leaves)
    local n = 0
    for _, l in ipairs(leaves) do n = n + (l.ta and 2 or l.op and 0 or 1) end
    return n
  end

  -- Calls fn(args...) with fg as the default graph; returns the results as a
  -- packed table (n = count).
  local function call_traced(fg, fn, ...)
    local n = select("#", ...)
    local args = {...}
    return fg:as_default(function()
      local r = {fn(unpack(args, 1, n))}
      r.n = table.maxn(r)
      return r
    end)
  end

  -- The calling op's inputs from the captures of several functions (each
  -- outer tensor once, in order of first capture) and for each function its
  -- `_in` list (op id per input, -1 unused) after `explicit` ids of its own.
  local function collect_captures(fgs, explicit)
    local inputs, index = {}, {}
    for _, fg in ipairs(fgs) do
      for _, c in ipairs(fg._captures) do
        if not index[c.outer] then
          inputs[#inputs + 1] = c.outer
          index[c.outer] = #inputs
        end
      end
    end
    local ins = {}
    for f, fg in ipairs(fgs) do
      local list = {}
      for _, id in ipairs(explicit and explicit[f] or {}) do list[#list + 1] = id end
      for _, outer in ipairs(inputs) do
        local inner = fg._capture_map[outer]
        list[#list + 1] = inner and C.mf_op_id(inner.op.ptr) or -1
      end
      ins[f] = list
    end
    local refs, controls, seen = {}, {}, {}
    for i, t in ipairs(inputs) do
      if t.op.type == "VariableV2" then refs[#refs + 1] = i - 1 end
    end
    for _, fg in ipairs(fgs) do
      for _, op in ipairs(fg._control_captures) do
        if not seen[op] then seen[op] = true; controls[#controls + 1] = op end
      end
    end
    return inputs, ins, refs, controls
  end

  local function port_list(tensors)
    local out = {}
    for _, t in ipairs(tensors) do
      out[#out + 1] = C.mf_op_id(t.op.ptr)
      out[#out + 1] = t.value_index
    end
    return out
  end

  local function op_outputs(op, n)
    local out = {}
    for i = 1, n do out[i] = op:output(i - 1) end
    return out
  end

  -- tf.cond --------------------------------------------------------------------------
  -- tf.cond(pred, true_fn, false_fn, name) or (pred, true_fn, false_fn, {name=}):
  -- runs only the branch pred selects and returns its results (multiple values
  -- when the functions return several).
  function tf.cond(pred, true_fn, false_fn, ...)
    local o = options("tf.cond", {"name", "strict"}, ...)
    if type(true_fn) ~= "function" or type(false_fn) ~= "function" then
      fail("tf.cond(pred, true_fn, false_fn): true_fn and false_fn must be functions")
    end
    if not is_tensor(pred) then
      if type(pred) ~= "boolean" then
        fail("tf.cond: pred must be a scalar bool tensor or a boolean, got " .. tostring(pred))
      end
      pred = G.convert(pred)
    end
    local dims = pred:get_shape().dims
    if pred.dtype ~= dtypes.bool or (dims and #dims ~= 0) then
      fail(string.format("tf.cond: pred must be a scalar bool tensor, got %s (dtype %s, shape %s); " ..
                         "compare to get one, e.g. tf.less(x, y)", pred.name, pred.dtype.name,
                         tostring(pred:get_shape())))
    end
    local outer = G.graph_of({pred})
    local fns, names = {true_fn, false_fn}, {"true_fn", "false_fn"}
    local fgs, results, leaves, templates = {}, {}, {}, {}
    for b = 1, 2 do
      fgs[b] = function_graph(outer)
      results[b] = call_traced(fgs[b], fns[b])
      leaves[b] = {}
      templates[b] = flatten({unpack(results[b], 1, results[b].n)}, leaves[b], "tf.cond: " .. names[b])
    end
    local diff = structure_diff(templates[1], templates[2], "the results")
    if results[1].n ~= results[2].n then
      diff = string.format("true_fn returns %d values and false_fn %d", results[1].n, results[2].n)
    end
    if diff then fail("tf.cond: true_fn and false_fn must return the same structure: " .. diff) end
    for i = 1, #leaves[1] do
      local a, b = leaves[1][i], leaves[2][i]
      local da = a.tensor and a.tensor.dtype or a.ta and a.ta.dtype
      local db = b.tensor and b.tensor.dtype or b.ta and b.ta.dtype
      if (a.op == nil) ~= (b.op == nil) or (a.ta == nil) ~= (b.ta == nil) or (da and db and da ~= db) then
        fail(string.format("tf.cond: result %d is %s in true_fn but %s in false_fn; both branches must " ..
                           "return the same dtypes (use tf.cast)", i, leaf_str(a), leaf_str(b)))
      end
    end
    local outs = {leaf_tensors(fgs[1], leaves[1], leaves[2]), leaf_tensors(fgs[2], leaves[2], leaves[1])}
    for i = 1, #outs[1] do
      if outs[1][i].dtype ~= outs[2][i].dtype then
        fail(string.format("tf.cond: result %d has dtype %s in true_fn but %s in false_fn; use tf.cast",
                           i, outs[1][i].dtype.name, outs[2][i].dtype.name))
      end
    end
    local inputs, ins, refs, controls = collect_captures(fgs)
    local attrs = {["then"] = G.attr.graph(fgs[1]), ["else"] = G.attr.graph(fgs[2]),
                   then_in = G.attr.ints(ins[1]), else_in = G.attr.ints(ins[2]),
                   then_out = G.attr.ints(port_list(outs[1])), else_out = G.attr.ints(port_list(outs[2]))}
    if #refs > 0 then
      for i, r in ipairs(refs) do refs[i] = r + 1 end  -- after pred
      attrs._ref_inputs = G.attr.ints(refs)
    end
    local op = G.build{"If", inputs = {pred, unpack(inputs)}, attrs = attrs, control_inputs = controls,
                       name = o.name or "cond", graph = outer}
    if results[1].n == 0 then return op end  -- branches run for their effects: the op runs them
    local r = rebuild(templates[1], leaves[1], op_outputs(op, #outs[1]), op)
    return unpack(r, 1, results[1].n)
  end

  -- tf.case({{pred, fn}, ...}, {default=, exclusive=, name=}): the results of
  -- the fn of the first true pred (with exclusive, more than one true pred is
  -- an error), else of default (else of the last pair's fn).
  function tf.case(pairs_, ...)
    local o = options("tf.case", {"default", "exclusive", "name", "strict"}, ...)
    if type(pairs_) ~= "table" or #pairs_ == 0 then fail("tf.case: expected a non-empty list of {pred, fn} pairs") end
    local preds, fns, names = {}, {}, {}
    for i, p in ipairs(pairs_) do
      if type(p) ~= "table" or type(p[2]) ~= "function" then
        fail("tf.case: pair " .. i .. " must be {pred, fn} with fn a function")
      end
      local pred = is_tensor(p[1]) and p[1] or G.convert(p[1])
      local dims = pred:get_shape().dims
      if pred.dtype ~= dtypes.bool or (dims and #dims ~= 0) then
        fail(string.format("tf.case: pred %d must be a scalar bool tensor, got %s (dtype %s, shape %s)",
                           i, pred.name, pred.dtype.name, tostring(pred:get_shape())))
      end
      preds[i], fns[i], names[i] = pred, p[2], pred.name
    end
    local default = o.default
    if default ~= nil and type(default) ~= "function" then fail("tf.case: default must be a function") end
    local n = #preds
    if default == nil then default, n = fns[#fns], n - 1 end
    return tf.name_scope(o.name or "case", function()
      local index = G.op{"_CaseIndex", inputs = {ops.stack(preds)},
                         attrs = {exclusive = o.exclusive == true, names = table.concat(names, ", ")}}
      -- Nested conds on the index: branch i when index == i - 1.
      local function chain(i)
        if i > n then return default() end
        return tf.cond(ops.equal(index, G.convert(i - 1, dtypes.int32)), fns[i], function() return chain(i + 1) end)
      end
      return chain(1)
    end)
  end

  -- tf.where(condition, x, y, name): elements of x where condition holds,
  -- else of y (TensorFlow 1.x's Select): all three broadcast together, except
  -- that a vector condition with x and y of higher rank picks whole rows.
  -- tf.where_v2 broadcasts the condition in every case (SelectV2).
  -- tf.where(condition): the coordinates of the true (non-zero) elements, an
  -- int64 [n, rank] tensor.
  local function where(fname, op_type)
    return function(condition, x, y, name)
      if type(x) == "string" or args.is_options(x) then name, x = x, nil end
      name = name_of(name, fname)
      condition = G.convert(condition)
      if x == nil and y == nil then return G.op{"Where", inputs = {condition}, name = name} end
      if x == nil or y == nil then fail(fname .. ": give both x and y, or neither") end
      local ref = is_tensor(x) and x or is_tensor(y) and y
      x = G.convert(x, ref and ref.dtype, ref and ref.graph)
      y = G.convert(y, ref and ref.dtype, ref and ref.graph)
      return G.op{op_type, inputs = {condition, x, y}, name = name}
    end
  end
  ops.where, ops.where_v2 = where("tf.where", "Select"), where("tf.where_v2", "SelectV2")

  -- tf.while_loop ----------------------------------------------------------------------
  -- The shape invariant of a flattened loop variable: given (a TensorShape, a
  -- list, or nil), or the tensor's static shape. A TensorArray's buffer and
  -- metadata may change shape (dynamic size, first write): unknown.
  local function invariant_of(leaf, given, i)
    if leaf.ta then return nil end
    local have = leaf.tensor:get_shape().dims
    if given == nil then return have end
    local dims = getmetatable(given) == G.TensorShape and given.dims or given
    if type(dims) ~= "table" then fail("tf.while_loop: shape_invariants[" .. i .. "] must be a TensorShape or a list") end
    local ok = have == nil or #have == #dims
    for d = 1, ok and have and #dims or 0 do
      if dims[d] >= 0 and have[d] >= 0 and dims[d] ~= have[d] then ok = false end
    end
    if not ok then
      fail(string.format("tf.while_loop: The shape invariant specified for %s is not compatible with the " ..
                         "initial shape of the loop variable. It enters the loop with shape %s, but the " ..
                         "specified shape invariant is %s.", leaf.tensor.name, shape_str(have), shape_str(dims)))
    end
    return dims
  end

  -- tf.while_loop(cond, body, loop_vars, {shape_invariants=, maximum_iterations=,
  -- back_prop=, parallel_iterations=, swap_memory=, name=}): repeats
  -- loop_vars = body(loop_vars...) while cond(loop_vars...) holds; returns the
  -- loop variables as multiple values. loop_vars is a list of tensors,
  -- TensorArrays, numbers or tables of them; body returns them as multiple
  -- values or as one list. cond is traced twice: on the loop variables, and
  -- inside the body on its results (so an iteration is one function run).
  -- parallel_iterations and swap_memory are accepted: iterations run in turn.
  function tf.while_loop(cond, body, loop_vars, ...)
    local o = options("tf.while_loop", {"shape_invariants", "parallel_iterations", "back_prop", "swap_memory",
                                        "name", "maximum_iterations"}, ...)
    if type(cond) ~= "function" or type(body) ~= "function" then
      fail("tf.while_loop(cond, body, loop_vars): cond and body must be functions")
    end
    local m = o.maximum_iterations
    if m ~= nil and not is_tensor(m) and not (args.is_integer(m) and m >= 0) then
      fail("tf.while_loop: maximum_iterations must be a non-negative integer or an int32 scalar tensor, got " ..
           args.show(m))
    end
    if is_tensor(loop_vars) or getmetatable(loop_vars) == TensorArray then loop_vars = {loop_vars} end
    if type(loop_vars) ~= "table" or getmetatable(loop_vars) ~= nil or #loop_vars == 0 then
      fail("tf.while_loop: loop_vars must be a non-empty list")
    end
    local nvars = #loop_vars
    local leaves = {}
    local template = flatten(loop_vars, leaves, "tf.while_loop: loop_vars")
    for _, l in ipairs(leaves) do
      if l.op then fail("tf.while_loop: a loop variable cannot be an Operation") end
    end
    -- The initial values, and the invariants of the flat leaves.
    local given = {}
    if o.shape_invariants ~= nil then
      local inv_leaves = {}
      local function flat_invariants(v, t)
        if type(t) == "number" then inv_leaves[t] = v; return end
        for _, k in ipairs(t.keys) do flat_invariants(v and v[k], t.table[k]) end
      end
      flat_invariants(o.shape_invariants, template)
      given = inv_leaves
    end
    local initial = G.get_default_graph():as_default(function() return leaf_tensors(G.get_default_graph(), leaves) end)
    local outer = G.graph_of(initial)
    local arg_specs, pos, hints = {}, 0, {}
    for i, l in ipairs(leaves) do
      hints[i] = {tensor = l.tensor or initial[pos + 1]}
      if l.ta then
        arg_specs[#arg_specs + 1] = {initial[pos + 1].dtype, nil}
        arg_specs[#arg_specs + 1] = {initial[pos + 2].dtype, nil}
        pos = pos + 2
      else
        pos = pos + 1
        local leaf = l.tensor and l or {tensor = initial[pos]}
        arg_specs[#arg_specs + 1] = {initial[pos].dtype, invariant_of(leaf, given[i], i)}
      end
    end
    -- Traces fn over arguments standing for the loop variables.
    local function trace(fn)
      local fg = function_graph(outer)
      local args = fg:as_default(function()
        local out = {}
        for i, spec in ipairs(arg_specs) do
          local attrs = {dtype = spec[1]}
          if spec[2] then attrs.shape = G.attr.shape(spec[2]) end
          out[i] = G.op{"_Arg", attrs = attrs, name = "loop_var", graph = fg}
        end
        return out
      end)
      local vars = rebuild(template, leaves, args)
      return fg, args, call_traced(fg, fn, unpack(vars, 1, nvars))
    end
    local cfg, cargs, cres = trace(cond)
    if cres.n ~= 1 then fail("tf.while_loop: cond must return one value, got " .. cres.n) end
    local p = cres[1]
    if type(p) == "boolean" then p = cfg:as_default(function() return G.convert(p) end) end
    if not is_tensor(p) or p.dtype ~= dtypes.bool or (p:get_shape().dims and #p:get_shape().dims ~= 0) then
      fail("tf.while_loop: cond must return a scalar bool tensor, got " .. tostring(p))
    end
    p = cfg:as_default(function() return cfg:capture(p) end)
    local bfg, bargs, bres = trace(body)
    local returned = {unpack(bres, 1, bres.n)}
    if bres.n == 1 and nvars > 1 and type(bres[1]) == "table" and getmetatable(bres[1]) == nil then
      returned = bres[1]
    end
    local bleaves = {}
    local btemplate = flatten(returned, bleaves, "tf.while_loop: body")
    local diff = structure_diff(template, btemplate, "the loop variables")
    if #returned ~= nvars then
      diff = string.format("body returns %d values for %d loop variables", #returned, nvars)
    end
    if diff then fail("tf.while_loop: body must return the loop variables' structure: " .. diff) end
    for i, l in ipairs(bleaves) do
      if (l.ta == nil) ~= (leaves[i].ta == nil) or l.op then
        fail(string.format("tf.while_loop: body returns %s for loop variable %d, which is %s",
                           leaf_str(l), i, leaf_str(leaves[i])))
      end
    end
    local bouts = leaf_tensors(bfg, bleaves, hints)
    -- The condition once more, inside the body on its results: an iteration
    -- is then one run of the body (the cond function decides only the first).
    local next_p = bfg:as_default(function()
      local q = cond(unpack(rebuild(template, bleaves, bouts), 1, nvars))
      if type(q) == "boolean" then q = G.convert(q) end
      return bfg:capture(q)
    end)
    local nflat = #initial
    local explicit = {{}, {}}
    for i = 1, nflat do
      explicit[1][i] = C.mf_op_id(cargs[i].op.ptr)
      explicit[2][i] = C.mf_op_id(bargs[i].op.ptr)
    end
    bouts[#bouts + 1] = next_p
    local inputs, ins, refs, controls = collect_captures({cfg, bfg}, explicit)
    local all = {}
    for i = 1, nflat do all[i] = initial[i] end
    for _, t in ipairs(inputs) do all[#all + 1] = t end
    local attrs = {cond = G.attr.graph(cfg), body = G.attr.graph(bfg),
                   cond_in = G.attr.ints(ins[1]), body_in = G.attr.ints(ins[2]),
                   cond_out = G.attr.ints(port_list({p})), body_out = G.attr.ints(port_list(bouts)),
                   num_loop_vars = G.attr.int(nflat), back_prop = o.back_prop ~= false, fused_cond = true}
    if #refs > 0 then
      for i, r in ipairs(refs) do refs[i] = r + nflat end
      attrs._ref_inputs = G.attr.ints(refs)
    end
    if o.maximum_iterations ~= nil then
      local m = o.maximum_iterations
      all[#all + 1] = is_tensor(m) and m or G.convert(m, dtypes.int32, outer)
      attrs.has_max = true
    end
    local op = G.build{"While", inputs = all, attrs = attrs, control_inputs = controls,
                       name = o.name or "while", graph = outer}
    -- The body's TensorArrays know the element shapes their writes fixed.
    local r = rebuild(template, bleaves, op_outputs(op, nflat))
    return unpack(r, 1, nvars)
  end

  -- TensorArray ---------------------------------------------------------------------
  -- tf.TensorArray(dtype, size, {dynamic_size=, element_shape=, clear_after_read=,
  -- infer_shape=, name=}): a list of `size` tensors, written once each. It is
  -- a value: write, scatter, unstack and split return the new array (use what
  -- they return). Elements share one shape, except that a split into unequal
  -- lengths, or the writes of an array made with infer_shape = false, give
  -- elements that differ in their first dimension (read and concat take them;
  -- stack and gather need equal shapes). Its two tensors are `buffer` (the
  -- elements' rows) and `meta` (the size, which indices are written, and where
  -- ragged elements lie); as a loop variable it stands for both. With clear_after_read (true unless
  -- false, as in TensorFlow) a read (read, gather, stack, concat) clears the
  -- elements it reads, and reading one again in the run is an error; the
  -- recomputations of a gradient are exempt.
  TensorArray = {}
  TensorArray.__index = TensorArray

  local function merge_dims(a, b)
    if a == nil then return b end
    if b == nil or #a ~= #b then return a end
    local out = {}
    for d = 1, #a do out[d] = a[d] >= 0 and a[d] or b[d] end
    return out
  end

  local function index_tensor(i, ref, what)
    if is_tensor(i) then
      if i.dtype ~= dtypes.int32 and i.dtype ~= dtypes.int64 then
        fail(what .. ": the index must be an int32 or int64 tensor, got " .. i.dtype.name)
      end
      return i
    end
    -- Lua numbers become int32 indices, which they must fit (not wrap around).
    local function check(v, where)
      if type(v) ~= "number" or v % 1 ~= 0 then
        fail(string.format("%s: %s must be an integer%s, got %s", what, where,
                           where == "the index" and " or an int32 tensor" or "", tostring(v)))
      end
      if v < -2 ^ 31 or v >= 2 ^ 31 then
        fail(string.format("%s: %s %.0f does not fit an int32 index", what, where, v))
      end
    end
    if type(i) == "table" and getmetatable(i) == nil then
      for j, v in ipairs(i) do check(v, "indices[" .. j .. "]") end
      return G.constant(i, {dtype = dtypes.int32, graph = ref.graph})
    end
    check(i, "the index")
    return G.convert(i, dtypes.int32, ref.graph)
  end

  -- A TensorArray with this one's settings over new tensors.
  function TensorArray:_with(buffer, meta)
    local ta = setmetatable({}, TensorArray)
    for k, v in pairs(self) do ta[k] = v end
    ta.buffer, ta.meta, ta.flow = buffer, meta, meta
    local dims = buffer:get_shape().dims
    if dims and #dims > 0 and not ta._ragged then ta._element_dims = merge_dims(self._element_dims, {unpack(dims, 2)}) end
    ta.element_shape = G.TensorShape.new(ta._element_dims)
    return ta
  end

  function tf.TensorArray(dtype, ...)
    local o = options("tf.TensorArray", {"size", "dynamic_size", "clear_after_read", "tensor_array_name", "handle",
                                         "flow", "infer_shape", "element_shape", "colocate_with_first_write_call",
                                         "name"}, ...)
    dtype = core.as_dtype(dtype, "tf.TensorArray")
    local size = o.size
    if size == nil then
      if not o.dynamic_size then fail("tf.TensorArray: give a size (or dynamic_size = true)") end
      size = 0
    end
    if is_tensor(size) then
      if size.dtype ~= dtypes.int32 and size.dtype ~= dtypes.int64 then
        fail("tf.TensorArray: size must be an int32 tensor or an integer, got a " .. size.dtype.name .. " tensor")
      end
    elseif type(size) ~= "number" or size % 1 ~= 0 or size < 0 then
      fail("tf.TensorArray: size must be a non-negative integer or an int32 tensor, got " .. tostring(size))
    else
      size = G.convert(size, dtypes.int32)
    end
    local es = o.element_shape
    if getmetatable(es) == G.TensorShape then es = es.dims end
    local attrs = {dtype = dtype, dynamic_size = o.dynamic_size == true}
    if es ~= nil then attrs.element_shape = G.attr.shape(es) end
    local buffer, meta = G.op{"TensorArray", inputs = {size}, attrs = attrs, name = o.name or "TensorArray"}
    local proto = setmetatable({dtype = dtype, dynamic_size = o.dynamic_size == true,
                                clear_after_read = o.clear_after_read ~= false, infer_shape = o.infer_shape ~= false,
                                _ragged = o.infer_shape == false or nil, _element_dims = es}, TensorArray)
    return proto:_with(buffer, meta)
  end


  -- The attributes of a write: whether the array may grow, and whether its
  -- elements may differ in their first dimension (it is ragged).
  local function write_attrs(self)
    return {dynamic_size = self.dynamic_size, ragged = self._ragged or nil}
  end

  -- ta:write(index, value, name): the array with value at index.
  function TensorArray:write(index, value, name)
    index = index_tensor(index, self.meta, "TensorArray.write")
    value = G.convert(value, self.dtype, self.meta.graph)
    local b, m = G.op{"TensorArrayWrite", inputs = {self.buffer, self.meta, index, value},
                      attrs = write_attrs(self), name = name_of(name, "TensorArray.write") or "TensorArrayWrite"}
    return self:_with(b, m)
  end

  local function shaped(self, t, lead)
    if self._element_dims then
      local dims = {}
      for d = 1, lead do dims[d] = -1 end
      for _, d in ipairs(self._element_dims) do dims[#dims + 1] = d end
      t:set_shape(dims)
    end
    return t
  end

  -- The attributes of a read: whether it clears what it reads, and the
  -- element shape when known (an array nothing was written to has no buffer
  -- to tell it, as after a loop that ran zero times).
  local function read_attrs(self)
    local attrs = {clear_after_read = self.clear_after_read, ragged = self._ragged or nil}
    local known = self._element_dims ~= nil
    for _, d in ipairs(self._element_dims or {}) do known = known and d >= 0 end
    if known then attrs.element_shape = G.attr.shape(self._element_dims) end
    return attrs
  end

  -- ta:read(index, name): the element at index. With clear_after_read (the
  -- default) reading an index a second time is an error.
  function TensorArray:read(index, name)
    index = index_tensor(index, self.meta, "TensorArray.read")
    local dims = index:get_shape().dims
    if dims and #dims ~= 0 then fail("TensorArray.read: the index must be a scalar (use gather for several)") end
    return shaped(self, G.op{"TensorArrayRead", inputs = {self.buffer, self.meta, index}, attrs = read_attrs(self),
                              name = name_of(name, "TensorArray.read") or "TensorArrayRead"}, 0)
  end

  -- ta:gather(indices, name): the elements at indices, stacked.
  function TensorArray:gather(indices, name)
    indices = index_tensor(indices, self.meta, "TensorArray.gather")
    local dims = indices:get_shape().dims
    if dims and #dims ~= 1 then fail("TensorArray.gather: indices must be a vector") end
    return shaped(self, G.op{"TensorArrayRead", inputs = {self.buffer, self.meta, indices}, attrs = read_attrs(self),
                              name = name_of(name, "TensorArray.gather") or "TensorArrayGather"}, 1)
  end

  -- ta:stack(name): all elements as one tensor [size, element...]; they must
  -- have one shape.
  function TensorArray:stack(name)
    return shaped(self, G.op{"TensorArrayStack", inputs = {self.buffer, self.meta},
                              attrs = read_attrs(self),
                              name = name_of(name, "TensorArray.stack") or "TensorArrayStack"}, 1)
  end

  -- ta:unstack(value, name): the array with value's rows as elements 0, 1, ...
  function TensorArray:unstack(value, name)
    value = G.convert(value, self.dtype, self.meta.graph)
    local b, m = G.op{"TensorArrayUnstack", inputs = {self.buffer, self.meta, value},
                      attrs = write_attrs(self), name = name_of(name, "TensorArray.unstack") or "TensorArrayUnstack"}
    return self:_with(b, m)
  end

  -- ta:scatter(indices, value, name): the array with value's rows at indices.
  function TensorArray:scatter(indices, value, name)
    indices = index_tensor(indices, self.meta, "TensorArray.scatter")
    value = G.convert(value, self.dtype, self.meta.graph)
    local b, m = G.op{"TensorArrayScatter", inputs = {self.buffer, self.meta, indices, value},
                      attrs = write_attrs(self), name = name_of(name, "TensorArray.scatter") or "TensorArrayScatter"}
    return self:_with(b, m)
  end

  -- ta:concat(name): the elements concatenated along their first dimension
  -- (their shapes agree after it).
  function TensorArray:concat(name)
    local ed = self._element_dims
    if ed and #ed == 0 then
      fail("TensorArray.concat: TensorArray concat needs elements of rank >= 1, got scalars (use stack)")
    end
    local t = G.op{"TensorArrayConcat", inputs = {self.buffer, self.meta}, attrs = read_attrs(self),
                   name = name_of(name, "TensorArray.concat") or "TensorArrayConcat"}
    if ed then t:set_shape({-1, unpack(ed, 2)}) end
    return t
  end

  -- ta:split(value, lengths, name): the array with value split along its
  -- first dimension into elements 0, 1, ... of these lengths (a list, or an
  -- int32/int64 vector tensor), which sum to value's first dimension. Unequal
  -- (or not constant) lengths make the array ragged: its element shape has
  -- an unknown first dimension.
  function TensorArray:split(value, lengths, name)
    value = G.convert(value, self.dtype, self.meta.graph)
    local known = lengths
    if is_tensor(lengths) then
      if lengths.dtype ~= dtypes.int32 and lengths.dtype ~= dtypes.int64 then
        fail("TensorArray.split: lengths must be an int32 or int64 vector, got a " .. lengths.dtype.name .. " tensor")
      end
      local v = lengths.op.type == "Const" and lengths.op:get_attr("value") or nil
      known = v and v:totable() or nil
    else
      if type(lengths) ~= "table" or getmetatable(lengths) ~= nil or #lengths == 0 then
        fail("TensorArray.split: lengths must be a non-empty list or an int32 vector tensor")
      end
      for i, l in ipairs(lengths) do
        if type(l) ~= "number" or l % 1 ~= 0 or l < 0 then
          fail(string.format("TensorArray.split: lengths[%d] must be a non-negative integer, got %s", i, tostring(l)))
        end
      end
      lengths = G.constant(lengths, {dtype = dtypes.int32, graph = self.meta.graph})
    end
    local equal = type(known) == "table" and #known > 0
    for _, l in ipairs(equal and known or {}) do equal = equal and l == known[1] end
    local vdims = value:get_shape().dims
    local rest = vdims and {unpack(vdims, 2)}
    local ragged = self._ragged or not equal
    local b, m = G.op{"TensorArraySplit", inputs = {self.buffer, self.meta, value, lengths},
                      attrs = {dynamic_size = self.dynamic_size, ragged = ragged or nil},
                      name = name_of(name, "TensorArray.split") or "TensorArraySplit"}
    local proto = self
    if ragged and not self._ragged then
      proto = setmetatable({}, TensorArray)
      for k, v in pairs(self) do proto[k] = v end
      proto._ragged = true
      proto._element_dims = rest and {-1, unpack(rest)} or nil
    end
    local ta = proto:_with(b, m)
    if not ragged and rest then
      ta._element_dims = merge_dims(ta._element_dims, {known[1], unpack(rest)})
      ta.element_shape = G.TensorShape.new(ta._element_dims)
    end
    return ta
  end

  -- ta:size(name): the number of elements, an int32 scalar.
  function TensorArray:size(name)
    return G.op{"TensorArraySize", inputs = {self.meta}, name = name_of(name, "TensorArray.size") or "TensorArraySize"}
  end

  -- ta:close(name): an op to run when done with the array (values need no freeing).
  function TensorArray:close(name)
    return G.build{"NoOp", control_inputs = {self.meta.op},
                   name = name_of(name, "TensorArray.close") or "TensorArrayClose"}
  end

  function TensorArray:identity()
    return self:_with(ops.identity(self.buffer), ops.identity(self.meta))
  end

  function TensorArray:__tostring()
    return string.format("<tf.TensorArray dtype=%s element_shape=%s>", self.dtype.name, tostring(self.element_shape))
  end
end
