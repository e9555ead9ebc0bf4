-- data/rowwise.lua — map-and-batch fusion. A map function traced over one
-- element (data/trace.lua) is elementwise along a batch when every op
-- between its arguments and its results is elementwise (each output element
-- depends on the input elements at the same index, after broadcasting)
-- with operands that broadcast the same way once every argument gains a
-- leading batch axis: the arguments' descendants all keep their rank, and
-- the other operands (constants, ops of constants) have no more axes than
-- the elementwise op's result, so they line up with its trailing axes.
-- Such a function gives, run once on a block of rows, exactly the rows it
-- gives run on each row alone, bit for bit (an elementwise kernel computes
-- each value the same way however many there are). So its ops are copied
-- into a second private graph whose arguments are [-1, ...] placeholders
-- (names, attributes and the user's Lua lines kept, so errors read the
-- same), and map runs that graph once per block of rows (data/block.lua).
-- Anything else — reductions, reshapes, matmul, shape reads, random or
-- stateful ops, tf.lua_func, control flow — is not fused: map runs per
-- element. The check reads only the graph, never the function, so the
-- function is traced once.
local ffi = require("ffi")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local block = require("moonflow.data.block")
local traced = require("moonflow.data.trace")
local prefetch = require("moonflow.data.prefetch")
local give_back = require("moonflow.data.recycler").give_back
local row_reader = require("moonflow.data.component").row_reader
local C = core.C

local rows, stack = block.rows, block.stack
local run_traced, prepare, runs = traced.run, traced.prepare, prefetch.runs

local M = {}

-- Blocks run through a batched copy so far (for tests: tf.data._fused_blocks).
M.fused_blocks = 0

local function set(list)
  local s = {}
  for _, k in ipairs(list) do s[k] = true end
  return s
end

-- Op types whose output element i depends on their inputs' elements at i
-- only, after NumPy broadcasting (all inputs broadcast; AddN's are equal).
local ELEMENTWISE = set{
  "Identity", "Cast", "Neg", "Abs", "Sign", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Sin", "Cos",
  "Tanh", "Sigmoid", "Floor", "Ceil", "Round", "LogicalNot", "Relu", "Relu6", "LeakyRelu", "Elu", "Selu",
  "Softplus", "Softsign",
  "Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "TruncateDiv", "TruncateMod", "Pow", "Maximum", "Minimum",
  "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
  "LogicalXor", "AddN", "Select", "SelectV2"}

local info = ffi.new("mf_op_info")
local shape = ffi.new("mf_shape")

local function rank_of(port)
  C.mf_op_output_shape(port.op, port.index, shape)
  return shape.rank
end

-- Whether op (elementwise, some inputs row-derived: is_row[id]) keeps
-- broadcasting the same with a batch axis on its row inputs.
local function broadcasts_alike(op, is_row)
  local r = rank_of({op = op, index = 0})
  if r < 0 then return false end
  local all_rows = true
  for i = 0, C.mf_op_num_inputs(op) - 1 do
    local inp = C.mf_op_input(op, i)
    local ri = rank_of(inp)
    if ri < 0 then return false end
    if is_row[C.mf_op_id(inp.op)] then
      if ri ~= r then return false end
    else
      all_rows = false
      if ri > r then return false end
      -- TensorFlow 1.x's Select picks whole rows with a vector condition.
      if i == 0 and ffi.string(C.mf_op_type(op)) == "Select" and ri == 1 then return false end
    end
  end
  return all_rows or ffi.string(C.mf_op_type(op)) ~= "AddN"
end

-- The ids of the ops of traced function t (data/trace.lua) that its results
-- need, in creation order, when it is elementwise along a batch; else nil.
local function fusable_ops(t)
  local gp = t.graph.ptr
  local is_row, needed = {}, {}
  for _, a in ipairs(t.args) do is_row[C.mf_op_id(a.op.ptr)] = true end
  local pending = {}
  for _, o in ipairs(t.outs) do pending[#pending + 1] = o.op.ptr end
  while #pending > 0 do
    local op = pending[#pending]
    pending[#pending] = nil
    local id = C.mf_op_id(op)
    if not needed[id] then
      needed[id] = true
      if C.mf_op_num_control_inputs(op) > 0 then return nil end
      for i = 0, C.mf_op_num_inputs(op) - 1 do pending[#pending + 1] = C.mf_op_input(op, i).op end
    end
  end
  local order = {}
  for id = 0, C.mf_graph_num_ops(gp) - 1 do
    if needed[id] then
      order[#order + 1] = id
      local op = C.mf_graph_op(gp, id)
      local type_ = ffi.string(C.mf_op_type(op))
      if not is_row[id] then
        if not C.mf_registry_op_info(type_, info) or info.stateful or info.variable then return nil end
        for a = 0, C.mf_op_num_attrs(op) - 1 do
          if C.mf_op_attr_kind(op, a) == C.MF_ATTR_GRAPH then return nil end
        end
        for i = 0, C.mf_op_num_inputs(op) - 1 do
          if is_row[C.mf_op_id(C.mf_op_input(op, i).op)] then is_row[id] = true end
        end
        if is_row[id] and not (ELEMENTWISE[type_] and broadcasts_alike(op, is_row)) then return nil end
      end
    end
  end
  for _, o in ipairs(t.outs) do
    if not is_row[C.mf_op_id(o.op.ptr)] then return nil end
  end
  return order
end

-- Copies attribute `name` of kind `kind` from op to desc d.
local i64, f64, flag, dtype_ = ffi.new("int64_t[1]"), ffi.new("double[1]"), ffi.new("bool[1]"), ffi.new("mf_dtype[1]")
local ints = ffi.new("const int64_t*[1]")
local copy_attr = {
  [tonumber(C.MF_ATTR_INT)] = function(op, d, name)
    C.mf_op_attr_int(op, name, i64); C.mf_op_desc_set_attr_int(d, name, i64[0])
  end,
  [tonumber(C.MF_ATTR_FLOAT)] = function(op, d, name)
    C.mf_op_attr_float(op, name, f64); C.mf_op_desc_set_attr_float(d, name, f64[0])
  end,
  [tonumber(C.MF_ATTR_BOOL)] = function(op, d, name)
    C.mf_op_attr_bool(op, name, flag); C.mf_op_desc_set_attr_bool(d, name, flag[0])
  end,
  [tonumber(C.MF_ATTR_TYPE)] = function(op, d, name)
    C.mf_op_attr_type(op, name, dtype_); C.mf_op_desc_set_attr_type(d, name, dtype_[0])
  end,
  [tonumber(C.MF_ATTR_INTS)] = function(op, d, name)
    local n = C.mf_op_attr_ints(op, name, ints); C.mf_op_desc_set_attr_ints(d, name, ints[0], n)
  end,
  [tonumber(C.MF_ATTR_SHAPE)] = function(op, d, name)
    C.mf_op_attr_shape(op, name, shape); C.mf_op_desc_set_attr_shape(d, name, shape.dims, shape.rank)
  end,
  [tonumber(C.MF_ATTR_STRING)] = function(op, d, name)
    C.mf_op_desc_set_attr_string(d, name, C.mf_op_attr_string(op, name))
  end,
  [tonumber(C.MF_ATTR_TENSOR)] = function(op, d, name)
    C.mf_op_desc_set_attr_tensor(d, name, C.mf_op_attr_tensor(op, name))
  end,
}

-- For traced function t, when it is elementwise along a batch: its copy over
-- blocks, {graph=, args= ([-1, ...] placeholders), outs=}; else nil.
local function batched(t)
  local order = fusable_ops(t)
  if not order then return nil end
  local src = t.graph.ptr
  local g = G.Graph.new()
  C.mf_graph_set_seed(g.ptr, C.mf_graph_seed(src))
  local copies, args = {}, {}
  g:as_default(function()
    for i, a in ipairs(t.args) do
      local dims = a:get_shape():as_list()
      table.insert(dims, 1, -1)
      args[i] = G.placeholder(a.dtype, dims, a.op.name)
      copies[C.mf_op_id(a.op.ptr)] = args[i].op.ptr
    end
  end)
  for _, id in ipairs(order) do
    if not copies[id] then
      local op = C.mf_graph_op(src, id)
      local d = C.mf_op_desc_new(g.ptr, C.mf_op_type(op), C.mf_op_name(op))
      for i = 0, C.mf_op_num_inputs(op) - 1 do
        local inp = C.mf_op_input(op, i)
        C.mf_op_desc_add_input(d, ffi.new("mf_output", copies[C.mf_op_id(inp.op)], inp.index))
      end
      for a = 0, C.mf_op_num_attrs(op) - 1 do
        copy_attr[tonumber(C.mf_op_attr_kind(op, a))](op, d, C.mf_op_attr_name(op, a))
      end
      C.mf_op_desc_set_origin(d, C.mf_op_origin(op))
      C.mf_op_desc_set_device(d, C.mf_op_device(op))
      local copy = C.mf_op_desc_finish(d, core.status)
      -- (the ops were built once already, from the same inputs, one axis shorter)
      if copy == nil then core.check() end
      copies[id] = copy
    end
  end
  local outs = {}
  for i, o in ipairs(t.outs) do outs[i] = g:_op(copies[C.mf_op_id(o.op.ptr)]):output(o.value_index) end
  return {graph = g, args = args, outs = outs}
end

-- The block stream of ds:map(fn) (fn traced as t) over parent, when fn is
-- elementwise along a batch and parent's element shapes are fully known:
-- open_blocks(ctx, ahead, n) for the map dataset, else nil. Each block of
-- the parent runs the batched copy once (read ahead on the worker thread
-- when `ahead` blocks are wanted, or `depth` elements for num_parallel_calls).
-- A block whose run fails is run again row by row through t, which raises
-- the failing element's error at that element, exactly as the unfused map
-- would, and hands on the rows around it as one-row blocks.
function M.open_blocks(parent, t, depth, what)
  local copy = batched(t)
  if not copy then return nil end
  local fused = nil  -- its session and callables, made on first use
  local nin, nout = #parent.spec, #t.outs
  return function(ctx, ahead, n)
    fused = fused or prepare(copy.graph, copy.args, copy.outs)
    if depth then ahead = math.max(ahead or 0, math.ceil(depth / n)) end
    local tuning = ctx.node[copy] or {}
    ctx.node[copy] = tuning
    local run = runs(ctx, block.open(parent, ctx, ahead, n), ahead, fused, nin, nout, what, tuning)
    local row, i, m = nil, 0, 0  -- a failed block's rows, replayed one at a time
    return function()
      while i >= m do
        local b, ok, r = run()
        if b == nil then return nil end
        if ok then
          M.fused_blocks = M.fused_blocks + 1
          -- The input block is dead unless a result is one of its arrays (refcount).
          for c = 1, nin do if b[c]._pool_key then give_back(b[c]) end end
          return r
        end
        row, i, m = row_reader(b), 0, rows(b)
      end
      i = i + 1
      return stack({run_traced(t.call, row(i - 1), nin, what)}, 1, t.spec)
    end
  end
end

return M
