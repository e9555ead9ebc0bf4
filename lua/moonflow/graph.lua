-- graph.lua — Graph, Operation and Tensor, and the one function that builds ops.
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local hygiene = require("moonflow.hygiene")
local args = require("moonflow.args")
local C = core.C
local fail = core.fail

local M = {}

-- Op wrappers register here (add, reduce_sum, …) so that every op is also a
-- Tensor method and so that operators can find them.
M.ops = {}

local Graph, Operation, Tensor, TensorShape = {}, {}, {}, {}
M.Graph, M.Operation, M.Tensor, M.TensorShape = Graph, Operation, Tensor, TensorShape

local function is_tensor(x) return getmetatable(x) == Tensor end
local function is_operation(x) return getmetatable(x) == Operation end
M.is_tensor, M.is_operation = is_tensor, is_operation
-- A variable is the Tensor of its VariableV2 op (variables.lua).
function M.is_variable(x) return is_tensor(x) and x.op.type == "VariableV2" end

-- TensorShape ------------------------------------------------------------------
TensorShape.__index = TensorShape

-- dims: a Lua list with -1 for unknown dimensions, or nil for unknown rank.
function TensorShape.new(dims) return setmetatable({dims = dims, ndims = dims and #dims or nil}, TensorShape) end

function TensorShape.from_c(s)
  if s.rank < 0 then return TensorShape.new(nil) end
  local dims = {}
  for i = 0, s.rank - 1 do dims[i + 1] = tonumber(s.dims[i]) end
  return TensorShape.new(dims)
end

function TensorShape:as_list()
  if not self.dims then fail("TensorShape:as_list: as_list() is not defined on an unknown TensorShape") end
  local out = {}
  for i, d in ipairs(self.dims) do out[i] = d end
  return out
end
function TensorShape:is_fully_defined()
  if not self.dims then return false end
  for _, d in ipairs(self.dims) do if d < 0 then return false end end
  return true
end
function TensorShape:num_elements()
  if not self:is_fully_defined() then return nil end
  local n = 1
  for _, d in ipairs(self.dims) do n = n * d end
  return n
end
-- Whether the two shapes could be of one value (unknown ranks and dimensions
-- agree with anything); other may be a Lua list of dims.
function TensorShape:is_compatible_with(other)
  local a, b = self.dims, other
  if getmetatable(other) == TensorShape then b = other.dims end
  if a == nil or b == nil then return true end
  if #a ~= #b then return false end
  for i, d in ipairs(a) do
    if d >= 0 and b[i] >= 0 and d ~= b[i] then return false end
  end
  return true
end
-- Whether this shape broadcasts against `other` leaving other's shape as it
-- is (NumPy's rule: from the last axis, each dimension is 1 or other's);
-- unknown ranks and dimensions are taken to fit.
function TensorShape:broadcasts_to(other)
  local a, b = self.dims, other.dims
  if not a or not b then return true end
  if #a > #b then return false end
  for i = 1, #a do
    local x, y = a[#a - i + 1], b[#b - i + 1]
    if x >= 0 and y >= 0 and x ~= 1 and x ~= y then return false end
  end
  return true
end

function TensorShape:__tostring()
  if not self.dims then return "<unknown>" end
  local parts = {}
  for i, d in ipairs(self.dims) do parts[i] = d < 0 and "?" or tostring(d) end
  if #parts == 1 then return "(" .. parts[1] .. ",)" end
  return "(" .. table.concat(parts, ", ") .. ")"
end
-- TensorFlow 1.x's repr: TensorShape([Dimension(None), Dimension(128)]).
function TensorShape:__repr()
  if not self.dims then return "TensorShape(None)" end
  local parts = {}
  for i, d in ipairs(self.dims) do parts[i] = "Dimension(" .. (d < 0 and "None" or tostring(d)) .. ")" end
  return "TensorShape([" .. table.concat(parts, ", ") .. "])"
end
function TensorShape.__eq(a, b)
  if (a.dims == nil) ~= (b.dims == nil) then return false end
  if not a.dims then return true end
  if #a.dims ~= #b.dims then return false end
  for i = 1, #a.dims do if a.dims[i] ~= b.dims[i] then return false end end
  return true
end

-- Fills an mf_shape from a Lua list (nil = unknown rank); `what` (the op's
-- attribute, the method) opens the error for too many dimensions.
function M.c_shape(dims, what)
  what = what or "shape"
  local s = ffi.new("mf_shape")
  if dims == nil then s.rank = -1; return s end
  if not args.is_plain(dims) then
    fail(what .. ": a shape must be a Lua list of integers (-1 for unknown), got " .. args.describe(dims))
  end
  if #dims > C.MF_MAX_RANK then
    fail(string.format("%s: shapes have at most %d dimensions, got %d", what, C.MF_MAX_RANK, #dims))
  end
  s.rank = #dims
  for i, d in ipairs(dims) do
    if not args.is_integer(d) or d < -1 or d >= 2 ^ 63 then
      fail(string.format("%s: shape[%d] must be a size or -1 (unknown), got %s", what, i, tostring(d)))
    end
    s.dims[i - 1] = d
  end
  return s
end

-- Graph ----------------------------------------------------------------------------
Graph.__index = Graph

-- The graph keeps its ops in C; Lua objects for them (Operation, Tensor)
-- are made when asked for and kept only while in use: the weak caches give
-- the same object for an op or output while one exists, so identity holds
-- (tables keyed by tensors, ==). An object given fields of its own (a
-- variable's `initializer`) is kept for the graph's life (`_kept`).
local WEAK_VALUES = {__mode = "v"}

-- A Graph of graph pointer ptr (a new reference, taken over), or of a new graph.
function Graph.new(ptr)
  ptr = ptr or C.mf_graph_new()
  if ptr == nil then fail("tf.Graph: out of memory creating a graph") end
  return setmetatable({
    ptr = ffi.gc(ptr, C.mf_graph_release),
    _ops = setmetatable({}, WEAK_VALUES),      -- Operation by op id
    _tensors = setmetatable({}, WEAK_VALUES),  -- Tensor by op id (output 0) or id + index * 2^32
    _kept = {},           -- set of Operations and Tensors holding fields of their own
    _control_deps = {},   -- stack of lists of ops (tf.control_dependencies)
    _devices = {},        -- stack of device strings (tf.device)
    collections = {},
  }, Graph)
end

local default_graphs = {Graph.new()}

function M.get_default_graph() return default_graphs[#default_graphs] end

function M.reset_default_graph()
  if #default_graphs > 1 then
    fail("tf.reset_default_graph: not allowed inside a graph's as_default block")
  end
  default_graphs[1] = Graph.new()
end

-- Runs fn with a stack entry pushed, popping it even when fn errors.
function M.with_pushed(stack, value, fn, ...)
  stack[#stack + 1] = value
  local results = {pcall(fn, ...)}
  table.remove(stack)
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

function Graph:as_default(fn)
  if type(fn) ~= "function" then fail("Graph:as_default(fn): fn must be a function, got " .. args.describe(fn)) end
  return M.with_pushed(default_graphs, self, fn)
end

-- Runs fn(...) with graph g's name scope pushed, popping it even when fn
-- errors: `scope` "" is the root, "a/b/" exactly that scope, a plain name a
-- new scope of that name inside the current one, made unique (src/graph.c).
function M.in_name_scope(g, scope, fn, ...)
  if C.mf_graph_push_name_scope(g.ptr, scope, core.status) == nil then
    fail((args.api_caller(M.in_name_scope) or "tf.name_scope") .. ": " .. ffi.string(C.mf_status_message(core.status)))
  end
  local results = {pcall(fn, ...)}
  C.mf_graph_pop_name_scope(g.ptr)
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

-- The Operation of op `id` of graph g (ptr: its mf_op*, when at hand).
local function operation(g, id, ptr)
  local op = g._ops[id]
  if not op then
    op = setmetatable({graph = g, _id = id, ptr = ptr or C.mf_graph_op(g.ptr, id)}, Operation)
    g._ops[id] = op
  end
  return op
end

-- The Tensor of output i of op `id` of graph g (ptr: its mf_op*, when at hand).
local function tensor(g, id, i, ptr)
  local key = i == 0 and id or id + i * 2 ^ 32  -- exact: ids and indices stay below 2^31 and 2^20
  local cache = g._tensors
  local t = cache[key]
  if not t then
    ptr = ptr or C.mf_graph_op(g.ptr, id)
    t = setmetatable({graph = g, _id = id, value_index = i,
                      dtype = core.by_enum[tonumber(C.mf_op_output_dtype(ptr, i))]}, Tensor)
    cache[key] = t
  end
  return t
end

function Graph:_op(ptr) return operation(self, C.mf_op_id(ptr), ptr) end

function Graph:get_operations()
  local out = {}
  for i = 0, C.mf_graph_num_ops(self.ptr) - 1 do out[i + 1] = self:_op(C.mf_graph_op(self.ptr, i)) end
  return out
end

-- The op named `name`, or nil and TensorFlow's words for why not.
function Graph:_find_operation(name)
  local ptr = type(name) == "string" and C.mf_graph_op_by_name(self.ptr, name) or nil
  if ptr == nil then return nil, "The name '" .. tostring(name) .. "' refers to an Operation not in the graph." end
  return self:_op(ptr)
end

-- The tensor named "op:i", or nil and TensorFlow's words for why not.
function Graph:_find_tensor(name)
  local opname, index = tostring(name):match("^(.*):(%d+)$")
  if not opname then
    return nil, "The name '" .. tostring(name) .. "' looks like an (invalid) Operation name, not a Tensor. " ..
                "Tensor names must be of the form \"<op_name>:<output_index>\"."
  end
  local ptr = C.mf_graph_op_by_name(self.ptr, opname)
  if ptr == nil then
    return nil, "The name '" .. name .. "' refers to a Tensor which does not exist. The operation, '" ..
                opname .. "', does not exist in the graph."
  end
  index = tonumber(index)
  if index >= C.mf_op_num_outputs(ptr) then
    return nil, "The name '" .. name .. "' refers to a Tensor which does not exist. The operation, '" ..
                opname .. "', exists but only has " .. C.mf_op_num_outputs(ptr) .. " outputs."
  end
  return self:_op(ptr):output(index)
end

function Graph:get_operation_by_name(name)
  local op, why = self:_find_operation(name)
  if not op then fail("Graph:get_operation_by_name: " .. why) end
  return op
end

function Graph:get_tensor_by_name(name)
  local t, why = self:_find_tensor(name)
  if not t then fail("Graph:get_tensor_by_name: " .. why) end
  return t
end

-- Collections: named lists of anything (tf.add_to_collection, tf.GraphKeys).
function Graph:get_collection_ref(name)
  local list = self.collections[name]
  if not list then list = {}; self.collections[name] = list end
  return list
end

function Graph:add_to_collection(name, value)
  local list = self:get_collection_ref(name)
  list[#list + 1] = value
end

-- A copy of the collection; with `scope`, only the items whose name starts
-- with it (a plain prefix, not a pattern).
function Graph:get_collection(name, scope)
  local out = {}
  for _, item in ipairs(self.collections[name] or {}) do
    local item_name = scope and type(item) == "table" and item.name
    if not scope or (type(item_name) == "string" and item_name:sub(1, #scope) == scope) then
      out[#out + 1] = item
    end
  end
  return out
end

function Graph:clear_collection(name) self.collections[name] = nil end

function Graph:get_all_collection_keys()
  local keys = {}
  for k, list in pairs(self.collections) do if #list > 0 then keys[#keys + 1] = k end end
  table.sort(keys)
  return keys
end

function Graph:finalize() C.mf_graph_finalize(self.ptr) end
function Graph:num_ops() return C.mf_graph_num_ops(self.ptr) end
function Graph:__tostring() return "<tf.Graph with " .. self:num_ops() .. " ops>" end

-- Operation --------------------------------------------------------------------
local op_props = {
  name = function(op) return ffi.string(C.mf_op_name(op.ptr)) end,
  type = function(op) return ffi.string(C.mf_op_type(op.ptr)) end,
  device = function(op) return ffi.string(C.mf_op_device(op.ptr)) end,
  origin = function(op) return ffi.string(C.mf_op_origin(op.ptr)) end,
  inputs = function(op)
    local out = {}
    for i = 0, C.mf_op_num_inputs(op.ptr) - 1 do
      local o = C.mf_op_input(op.ptr, i)
      out[i + 1] = op.graph:_op(o.op):output(o.index)
    end
    return out
  end,
  control_inputs = function(op)
    local out = {}
    for i = 0, C.mf_op_num_control_inputs(op.ptr) - 1 do
      out[i + 1] = op.graph:_op(C.mf_op_control_input(op.ptr, i))
    end
    return out
  end,
  outputs = function(op)
    local out = {}
    for i = 0, C.mf_op_num_outputs(op.ptr) - 1 do out[i + 1] = op:output(i) end
    return out
  end,
}
local op_methods = {}
M.op_methods = op_methods

function Operation.__index(op, k)
  local m = op_methods[k]
  if m then return m end
  local p = op_props[k]
  if p then return p(op) end
end

function op_methods.output(op, i) return tensor(op.graph, op._id, i, op.ptr) end

function op_methods.get_attr(op, name)
  local i64 = ffi.new("int64_t[1]")
  if C.mf_op_attr_int(op.ptr, name, i64) then return tonumber(i64[0]) end
  local f = ffi.new("double[1]")
  if C.mf_op_attr_float(op.ptr, name, f) then return f[0] end
  local b = ffi.new("bool[1]")
  if C.mf_op_attr_bool(op.ptr, name, b) then return b[0] end
  local t = ffi.new("mf_dtype[1]")
  if C.mf_op_attr_type(op.ptr, name, t) then return core.by_enum[tonumber(t[0])] end
  local p = ffi.new("const int64_t*[1]")
  local n = C.mf_op_attr_ints(op.ptr, name, p)
  if n >= 0 then
    local out = {}
    for i = 0, n - 1 do out[i + 1] = tonumber(p[0][i]) end
    return out
  end
  local s = C.mf_op_attr_string(op.ptr, name)
  if s ~= nil then return ffi.string(s) end
  local v = C.mf_op_attr_tensor(op.ptr, name)
  if v ~= nil then return Array.wrap(C.mf_tensor_retain(v)) end
  -- A shape attr as a tf.TensorShape (dims nil for an unknown rank, -1 for an unknown dimension).
  local shape = ffi.new("mf_shape")
  if C.mf_op_attr_shape(op.ptr, name, shape) then return TensorShape.from_c(shape) end
  fail("Operation:get_attr: Operation '" .. op.name .. "' has no attr named '" .. name .. "'.")
end

function Operation.__tostring(op)
  return "<tf.Operation '" .. op.name .. "' type=" .. op.type .. ">"
end

-- An Operation or Tensor given a field of its own is kept (see Graph.new).
local function keep_and_set(x, k, v)
  x.graph._kept[x] = true
  rawset(x, k, v)
end
Operation.__newindex = keep_and_set

-- Tensor -------------------------------------------------------------------------
local function op_ptr(t) return C.mf_graph_op(t.graph.ptr, t._id) end

local tensor_props = {
  op = function(t) return operation(t.graph, t._id) end,
  name = function(t) return ffi.string(C.mf_op_name(op_ptr(t))) .. ":" .. t.value_index end,
  shape = function(t) return t:get_shape() end,
  device = function(t) return ffi.string(C.mf_op_device(op_ptr(t))) end,
}
local tensor_methods = {}
M.tensor_methods = tensor_methods

function Tensor.__index(t, k)
  local m = tensor_methods[k]
  if m then return m end
  local p = tensor_props[k]
  if p then return p(t) end
  if type(k) == "number" then return M.ops.index_first_axis(t, k) end
  return M.ops[k]
end
Tensor.__newindex = keep_and_set

function tensor_methods.get_shape(t)
  local s = ffi.new("mf_shape")
  C.mf_op_output_shape(op_ptr(t), t.value_index, s)
  return TensorShape.from_c(s)
end

function tensor_methods.set_shape(t, shape)
  local dims = getmetatable(shape) == TensorShape and shape.dims or shape
  if C.mf_op_set_output_shape(op_ptr(t), t.value_index, M.c_shape(dims, "Tensor:set_shape"), core.status) ~= 0 then
    fail("Tensor:set_shape: " .. ffi.string(C.mf_status_message(core.status)))
  end
end

function tensor_methods.port(t) return ffi.new("mf_output", op_ptr(t), t.value_index) end

function tensor_methods.consumers(t)
  local out = {}
  for _, op in ipairs(t.graph:get_operations()) do
    for _, input in ipairs(op.inputs) do
      if input == t then out[#out + 1] = op; break end
    end
  end
  return out
end

function Tensor.__tostring(t)
  if rawget(t, "initializer") then  -- a variable (variables.lua)
    return string.format("<tf.Variable '%s' shape=%s dtype=%s>", t.name, tostring(t:get_shape()), t.dtype.name)
  end
  return string.format('Tensor("%s", shape=%s, dtype=%s)', t.name, tostring(t:get_shape()), t.dtype.name)
end
-- TensorFlow 1.x's repr, which the REPL shows: <tf.Tensor 'MatMul:0' shape=(10, 10) dtype=float32>.
function Tensor.__repr(t)
  if rawget(t, "initializer") then return tostring(t) end
  return string.format("<tf.Tensor '%s' shape=%s dtype=%s>", t.name, tostring(t:get_shape()), t.dtype.name)
end

-- Operators: M.ops entries are looked up when called, so op modules can load later.
local function operator(name)
  return function(a, b) return M.ops[name](a, b) end
end
-- The binary operators of tensors (and of arrays: eager.lua): metamethod -> op.
M.binary_operators = {__add = "add", __sub = "subtract", __mul = "multiply", __div = "divide", __mod = "mod",
                      __pow = "pow"}
for metamethod, name in pairs(M.binary_operators) do Tensor[metamethod] = operator(name) end
Tensor.__unm = function(a) return M.ops.negative(a) end

-- Attributes ---------------------------------------------------------------------------
-- Op wrappers tag numbers and lists with their kind: attr.int(3), attr.ints{0, 1},
-- attr.float(0.5), attr.shape{-1, 3}, attr.value(array). Booleans, strings and
-- dtypes need no tag. {kind = "scalar", v = number, dtype = DType} is the
-- value of a constant made from a Lua number, with no tf.Array in between.
local attr = {}
M.attr = attr
for _, kind in ipairs({"int", "float", "ints", "shape", "value", "graph"}) do
  attr[kind] = function(v) return {kind = kind, v = v} end
end

-- Attribute values are checked (check_attr) before an op description exists
-- and set (set_attr) after: once a description exists nothing may raise, or
-- it would never be finished (and freed).
local function bad_attr(op_type, name, a)
  fail(op_type .. ": attr '" .. name .. "' has an unsupported value " .. tostring(a))
end

local function check_attr(op_type, name, a)
  local kind = type(a)
  if kind == "boolean" or kind == "string" or getmetatable(a) == core.DType then return end
  if kind ~= "table" then bad_attr(op_type, name, a) end
  local v = a.v
  if a.kind == "int" or a.kind == "float" then
    if type(v) ~= "number" then bad_attr(op_type, name, a) end
  elseif a.kind == "ints" then
    for i = 1, #v do if type(v[i]) ~= "number" then bad_attr(op_type, name, a) end end
  elseif a.kind == "shape" then
    M.c_shape(v, op_type .. ": attr '" .. name .. "'")
  elseif not ((a.kind == "value" and Array.is(v)) or (a.kind == "graph" and getmetatable(v) == Graph) or
              a.kind == "scalar") then
    bad_attr(op_type, name, a)
  end
end

local function set_attr(desc, name, a)
  local kind = type(a)
  if kind == "boolean" then C.mf_op_desc_set_attr_bool(desc, name, a)
  elseif kind == "string" then C.mf_op_desc_set_attr_string(desc, name, a)
  elseif getmetatable(a) == core.DType then C.mf_op_desc_set_attr_type(desc, name, a.enum)
  elseif a.kind == "int" then C.mf_op_desc_set_attr_int(desc, name, a.v)
  elseif a.kind == "float" then C.mf_op_desc_set_attr_float(desc, name, a.v)
  elseif a.kind == "ints" then
    local v, n = a.v, #a.v
    local buf = core.dims_buffer(n > 0 and n or 1)
    for i = 1, n do buf[i - 1] = v[i] end
    C.mf_op_desc_set_attr_ints(desc, name, buf, n)
  elseif a.kind == "shape" then
    local shape = M.c_shape(a.v)
    C.mf_op_desc_set_attr_shape(desc, name, shape.dims, shape.rank)
  elseif a.kind == "value" then C.mf_op_desc_set_attr_tensor(desc, name, a.v.ptr)
  elseif a.kind == "scalar" then C.mf_op_desc_set_attr_scalar(desc, name, a.dtype.enum, a.v)
  else C.mf_op_desc_set_attr_graph(desc, name, a.v.ptr) end
end

-- Function graphs ---------------------------------------------------------------------
-- A graph traced from a Lua closure (a branch of tf.cond, the body of
-- tf.while_loop: ops/control_flow.lua) has `_parent`, the graph it is traced in.
-- While it is the default graph, ops whose inputs live in it or in its
-- ancestors are built in it, and each tensor of an ancestor is captured:
-- `_capture_arg(outer)` (set by the tracer) makes the function's stand-in for
-- `outer`, a tensor of the parent, once per tensor; `_captures` lists the
-- pairs {outer =, inner =} in order. Control inputs from ancestors are noted
-- in `_control_captures`: the op calling the function waits for them.

-- Whether graph a is g or one of g's ancestors.
local function is_ancestor(a, g)
  while g do
    if g == a then return true end
    g = g._parent
  end
  return false
end

-- The graph this one is traced in, transitively (itself when it is no function).
function Graph:outermost()
  local g = self
  while g._parent do g = g._parent end
  return g
end

-- The tensor of this graph standing for t, a tensor of it or of an ancestor.
function Graph:capture(t)
  if t.graph == self then return t end
  local outer = self._parent:capture(t)
  local inner = self._capture_map[outer]
  if not inner then
    inner = self._capture_arg(outer)
    self._capture_map[outer] = inner
    self._captures[#self._captures + 1] = {outer = outer, inner = inner}
  end
  return inner
end

-- Notes that the function must run after op, an op of an ancestor.
function Graph:capture_control(op)
  if op.graph == self or self._control_captured[op] then return end
  self._control_captured[op] = true
  self._control_captures[#self._control_captures + 1] = op
end

local function mixed_graphs(a, b, who)
  if type(who) == "function" then who = who() end
  fail(string.format('%sTensor("%s") must be from the same graph as Tensor("%s"); ' ..
                     "build all ops of a computation inside one graph", who and who .. ": " or "", a.name, b.name))
end

-- The graph an op of these inputs goes to: the deepest of their graphs, or
-- the function being traced inside it. A tensor of a function that is no
-- longer being traced cannot be used.
local function target_graph(g, first)
  local d = default_graphs[#default_graphs]
  if d ~= g and is_ancestor(g, d) then return d end
  if g._parent and not is_ancestor(g, d) then
    fail(string.format('Tensor("%s") was made inside a tf.cond branch or tf.while_loop body and ' ..
                       "cannot be used outside it: return it from the function instead", first and first.name or "?"))
  end
  return g
end

-- Building ops ----------------------------------------------------------------------------
-- The graph shared by a list of tensors, or an error naming the two that
-- differ, opened by `who` (the op or function; a function giving it).
function M.graph_of(inputs, who)
  local g, first
  for _, t in ipairs(inputs) do
    if is_tensor(t) then
      local tg = t.graph
      if g == nil then g, first = tg, t
      elseif tg ~= g then
        if is_ancestor(g, tg) then g, first = tg, t
        elseif not is_ancestor(tg, g) then mixed_graphs(t, first, who) end
      end
    end
  end
  if g == nil then return M.get_default_graph() end
  return target_graph(g, first)
end

-- The device of the innermost tf.device (devices.lua) around ops built in g,
-- or in the graph g is traced in (a function: branches, loop bodies); nil or
-- "" when none.
function M.current_device(g)
  while g do
    local d = g._devices[#g._devices]
    if d then return d end
    g = g._parent
  end
end

local NONE = {}

-- Creates an op. spec = {type, inputs = {tensors}, attrs = {name = value},
-- name = "optional", control_inputs = {ops}, graph = g, origin = the user's
-- line when the caller looked it up already}. Returns the graph
-- and the new op's mf_op* (M.build and M.op make the Lua objects).
local function build(spec)
  local op_type = spec[1]
  local inputs = spec.inputs or NONE
  local g = spec.graph and target_graph(spec.graph) or M.graph_of(inputs, op_type)
  for i = 1, #inputs do
    local t = inputs[i]
    if not is_tensor(t) then
      fail(op_type .. ": expected a Tensor input, got " .. tostring(t))
    end
    local tg = t.graph
    if tg ~= g then
      if not is_ancestor(tg, g) then
        fail(string.format('%s: Tensor("%s") must be from the same graph as the op it feeds; ' ..
                           "build all ops of a computation inside one graph", op_type, t.name))
      end
      -- A tensor of an ancestor: the function being traced captures it.
      if inputs == spec.inputs then inputs = {unpack(inputs)} end
      inputs[i] = g:capture(t)
    end
  end
  local control = spec.control_inputs or NONE
  for _, op in ipairs(control) do
    if op.graph ~= g and not is_ancestor(op.graph, g) then
      fail(string.format("%s: control input '%s' is not an op of this graph", op_type, op.name))
    end
  end
  local name = spec.name
  if name ~= nil and type(name) ~= "string" then
    fail(op_type .. ": name must be a string, got " .. args.describe(name))
  end
  local attrs = spec.attrs
  if attrs then for k, a in pairs(attrs) do check_attr(op_type, k, a) end end
  local device = spec.device or M.current_device(g)
  if device ~= nil and type(device) ~= "string" then
    fail(op_type .. ": the device must be a string, got " .. args.describe(device))
  end
  local origin = spec.origin or core.user_location()
  -- From here on nothing raises until the description is finished.
  local desc = C.mf_op_desc_new(g.ptr, op_type, name)
  if desc == nil then fail(op_type .. ": out of memory building an op") end
  for i = 1, #inputs do
    local t = inputs[i]
    C.mf_op_desc_add_input_id(desc, t._id, t.value_index)
  end
  for _, op in ipairs(control) do
    if op.graph == g then C.mf_op_desc_add_control_input(desc, op.ptr) else g:capture_control(op) end
  end
  local deps = g._control_deps
  for i = 1, #deps do
    for _, op in ipairs(deps[i]) do C.mf_op_desc_add_control_input(desc, op.ptr) end
  end
  if attrs then for k, a in pairs(attrs) do set_attr(desc, k, a) end end
  if device and device ~= "" then C.mf_op_desc_set_device(desc, device) end
  C.mf_op_desc_set_origin(desc, origin)
  local ptr = C.mf_op_desc_finish(desc, core.status)
  if ptr == nil then core.check() end
  return g, ptr
end

-- Builds an op and returns its Operation.
function M.build(spec)
  local g, ptr = build(spec)
  return operation(g, C.mf_op_id(ptr), ptr)
end

-- Builds an op and returns its outputs as multiple values.
function M.op(spec)
  local g, ptr = build(spec)
  local id, n = C.mf_op_id(ptr), C.mf_op_num_outputs(ptr)
  if n == 1 then return tensor(g, id, 0, ptr) end
  local outs = {}
  for i = 1, n do outs[i] = tensor(g, id, i - 1, ptr) end
  return unpack(outs, 1, n)
end

-- A Placeholder's output: dims a Lua list (-1 unknown) or nil (unknown rank).
-- As in TensorFlow, the shape attr is always set (unknown rank when dims is nil).
function M.placeholder(dtype, dims, name)
  return M.op{"Placeholder", attrs = {dtype = dtype, shape = attr.shape(dims)}, name = name}
end

-- Constants and conversion -------------------------------------------------------------------
-- Float32 constants whose dtype was not asked for but came from Lua numbers
-- (tf.constant({0, 2}), y + 1): where TensorFlow would have seen Python ints,
-- int_convert takes them for ints. Weak keys: the graph keeps the op either way.
local from_lua_numbers = setmetatable({}, {__mode = "k"})
local function lua_numbers(t)
  from_lua_numbers[t] = true
  return t
end
-- A Const op holding Array a, in graph (nil: the default one).
local function const_op(a, name, graph)
  local t = M.op{"Const", attrs = {value = attr.value(a)}, name = name, graph = graph}
  local bytes = a:size() * a.dtype.size
  if bytes > hygiene.large_constant_bytes then hygiene.constant_built(t, bytes, core.user_location()) end
  return t
end

-- A Const op holding the number x as a scalar of dtype, made in C with no
-- tf.Array in between (constants of one value share it); `who` names the
-- caller in the error for a number the dtype cannot hold exactly.
local function scalar_const(x, dtype, name, graph, who, origin)
  if dtype.is_integer then Array.check_exact(x, dtype, who) end
  return M.op{"Const", attrs = {value = {kind = "scalar", v = x, dtype = dtype}}, name = name, graph = graph,
              origin = origin}
end

-- Array a filled into shape `want` (tf.constant's shape option): a single
-- value repeated, or the values in row-major order; a itself without one.
local function reshaped(a, want)
  if want then
    local n = 1
    for _, d in ipairs(want) do n = n * d end
    if a.dtype.name == "string" and (a:size() == n or a:size() == 1) then  -- strings move as Lua strings
      local flat = Array.flat_strings(a)
      for i = 2, n do flat[i] = flat[i] or flat[1] end
      a = Array.from_strings(flat, want)
    elseif a:size() == 1 and n ~= 1 then
      local filled = Array.new(a.dtype, want)
      for i = 0, n - 1 do filled._data[i] = a._data[0] end
      a = filled
    elseif a:size() == n then
      local reshaped = Array.new(a.dtype, want)
      ffi.copy(reshaped._data, a._data, n * a.dtype.size)
      a = reshaped
    else
      fail(string.format("tf.constant: %d values cannot fill shape {%s}", a:size(), table.concat(want, ", ")))
    end
  end
  return a
end

-- tf.constant(value, dtype, shape, name) or (value, {dtype=, shape=, name=});
-- the option graph (internal) is the graph it joins, else the default one.
local CONSTANT_OPTIONS = {"dtype", "shape", "name", "graph", positional = 3, empty = true}
function M.constant(value, ...)
  local opts = args.options("tf.constant", CONSTANT_OPTIONS, ...)
  local dtype = opts.dtype and core.as_dtype(opts.dtype, "tf.constant") or nil
  if type(value) == "number" and not opts.shape and dtype ~= core.dtypes.bool then
    local t = scalar_const(value, dtype or core.dtypes.float32, opts.name, opts.graph, "tf.constant")
    return dtype and t or lua_numbers(t)
  end
  local a = Array.from(value, dtype, true, "tf.constant")
  local t = const_op(reshaped(a, opts.shape), opts.name, opts.graph)
  return (dtype == nil and a.dtype == core.dtypes.float32) and lua_numbers(t) or t
end
-- The first Tensor in a nested Lua list, or nil; `who` names the caller.
local function tensor_in(x, who)
  if is_tensor(x) then return x end
  if not args.is_plain(x) then return nil end
  Array.list_length(x, who)
  for _, v in ipairs(x) do
    local t = tensor_in(v, who)
    if t then return t end
  end
end

local CONVERTIBLE = "expected a Tensor or a Lua number, boolean, string, nested list or tf.Array"

-- x as a tensor (a Tensor passes through); `dtype` is the dtype numbers take,
-- `graph` the graph a new constant joins; `who` names the caller in errors
-- (a string, or a function giving it: see Array.from); `origin`, when given,
-- is the user's line that a scalar constant records (the caller looked it up
-- for the op it builds from x: one look-up serves both).
local function to_tensor(x, dtype, graph, who, origin)
  if is_tensor(x) then return x end
  if Array.is(x) then return const_op(x, nil, graph) end
  local kind = type(x)
  if kind == "number" and (dtype == nil or (getmetatable(dtype) == core.DType and dtype ~= core.dtypes.bool)) then
    local t = scalar_const(x, dtype or core.dtypes.float32, nil, graph, who, origin)  -- the common case: y + 1
    return dtype and t or lua_numbers(t)
  end
  if kind ~= "number" and kind ~= "boolean" and kind ~= "string" and not args.is_plain(x) and
     not Array.is_complex_number(x) then
    fail((type(who) == "function" and who() or who) .. ": " .. CONVERTIBLE .. ", got " .. args.describe(x))
  end
  -- A list holding Tensors is stacked along a new first axis, as TensorFlow
  -- packs {x, y} automatically; its numbers take the Tensors' dtype.
  local inner = tensor_in(x, who)
  if inner then
    local parts = {}
    for i, v in ipairs(x) do parts[i] = to_tensor(v, dtype or inner.dtype, graph, who) end
    return M.ops.stack(parts)
  end
  local a = Array.from(x, dtype, true, who)
  local t = const_op(a, nil, graph)
  return (dtype == nil and a.dtype == core.dtypes.float32) and lua_numbers(t) or t
end

-- x as a tensor for the API function the user called (a Lua value becomes a
-- constant); errors name that function and its parameter holding x, found on
-- the call stack (args.argument_of).
--
-- The value being converted waits in `converting` for convert_who, which
-- only an error calls: no closure per call, which would keep LuaJIT from
-- compiling the loops that build ops.
local converting
local function convert_who()
  local fname, pname = args.argument_of(converting, M.convert, "tf.convert_to_tensor")
  return pname and fname .. ": argument " .. pname or fname
end
function M.convert(x, dtype, graph, origin)
  if is_tensor(x) then return x end
  local outer = converting
  converting = x
  local t = to_tensor(x, dtype, graph, convert_who, origin)
  converting = outer
  return t  -- not a tail call: argument_of looks above this frame
end

-- x as an int tensor for an index argument (indices, ids, labels, lengths,
-- depths, shapes): Lua values become int32 constants, as TensorFlow makes
-- Python ints int32. Lua cannot tell 2 from 2.0, so a constant that took
-- float32 from Lua numbers (see from_lua_numbers), or such a tf.Array, whose
-- values are all integers stands for such ints too and becomes an int32
-- constant beside it; any other tensor passes as it is (the op checks its dtype).
local function integral_int32(a)
  local data = a._data
  for i = 0, a._size - 1 do
    local v = data[i]
    if v % 1 ~= 0 or v < -2 ^ 31 or v >= 2 ^ 31 then return nil end
  end
  return Array.from(a, core.dtypes.int32)
end
function M.int_convert(x, graph)
  if is_tensor(x) then
    if not from_lua_numbers[x] then return x end
    local ints = integral_int32(x.op:get_attr("value"))
    return ints and const_op(ints, nil, x.graph) or x
  end
  if Array.is(x) and x.from_lua_numbers then x = integral_int32(x) or x end
  local t = M.convert(x, core.dtypes.int32, graph)
  return t  -- not a tail call: argument_of looks above this frame
end

-- x as a tensor for argument `what` of fname, named so in errors; `dtype`
-- and `graph` as for convert.
function M.tensor_arg(fname, what, x, dtype, graph) return to_tensor(x, dtype, graph, fname .. ": " .. what) end

-- A shape argument as an int tensor. Lists of numbers become an int32
-- constant, int64 when a size needs it (shape inference then sees every
-- value); lists holding scalar tensors are stacked, as TensorFlow does.
function M.shape_tensor(shape, fname, graph)
  if is_tensor(shape) or Array.is(shape) then return M.int_convert(shape, graph) end
  if getmetatable(shape) == TensorShape then
    if not shape.dims then fail(fname .. ": the shape must have a known rank") end
    shape = shape.dims
  end
  if type(shape) == "number" then shape = {shape} end
  if type(shape) ~= "table" or getmetatable(shape) ~= nil then
    fail(fname .. ": expected a shape (a Lua list of integers or an int32 tensor), got " .. args.describe(shape))
  end
  local packed, dtype = false, core.dtypes.int32
  for i, d in ipairs(shape) do
    if is_tensor(d) then packed = true
    elseif not args.is_integer(d) or math.abs(d) >= 2 ^ 63 then
      fail(string.format("%s: shape[%d] must be an integer (of int64's range) or a scalar tensor, got %s", fname, i,
                         tostring(d)))
    elseif math.abs(d) >= 2 ^ 31 then dtype = core.dtypes.int64 end
  end
  if not packed then return M.constant(shape, {dtype = dtype, graph = graph}) end
  return M.ops.stack(shape, {name = "shape"})
end

-- The graph of the tensors among the arguments, looking one level into lists.
function M.graph_of_args(...)
  local found = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if is_tensor(v) then found[#found + 1] = v
    elseif args.is_plain(v) then
      for _, x in ipairs(v) do if is_tensor(x) then found[#found + 1] = x end end
    end
  end
  local g = M.graph_of(found, function() return args.api_caller(M.graph_of_args) end)
  return g  -- not a tail call: api_caller looks above this frame
end

return M
