-- graph_io.lua — graph files and pictures: tf.train.write_graph,
-- tf.train.import_graph, g:to_dot().
--
-- A graph file is JSON (format "moonflow.graph", version 1):
--   {"format": "moonflow.graph", "version": 1, "seed": -1,
--    "ops": [op, ...],              the graph's ops in creation order
--    "functions": [fn, ...],        function graphs (branches, loop bodies)
--    "collections": {key: [item]},  {"tensor": "w:0"}, {"op": "train"},
--                                   {"number": 1}, {"string": "s"}, {"bool": true}
--    "variables": [{"tensor": "w:0", "initializer": "w/Assign",
--                   "initial_value": "w/initial_value:0", "trainable": true}],
--    "variable_store": {"scope/w": "scope/w:0"}}   (tf.get_variable's names)
-- op = {"name", "type", "inputs": ["x:0", ...], "control_inputs": ["init", ...],
--       "device", "origin", "shapes": [[2, -1] or null (unknown rank), ...]
--       (each output's static shape, refined by set_shape), "attrs": {name: value}}
-- and each attribute value is an object with one key naming its kind:
--   {"int": 3}, {"float": 0.5} (or "inf", "-inf", "nan"), {"bool": true},
--   {"type": "float32"}, {"ints": [0, 1]}, {"shape": [2, -1] or null},
--   {"string": "s"}, {"tensor": {"dtype": "float32", "shape": [2],
--   "data": base64 of the raw little-endian bytes}} (strings: {"dtype": "string",
--   "shape": [2], "strings": [base64 of each string]}), {"graph": i} (functions[i+1]).
-- Integers beyond 2^53 are written as decimal strings. fn = {"seed", "ops"}: a
-- function graph refers to its ops by id (attrs then_in, body_out, ...: see
-- src/ops/call.c), and a variable used inside one by the id of the outer
-- VariableV2 op (attr _var_id), so ops are recreated in their order and a
-- graph file imports into a new graph, where every id and name comes back
-- the same. Collection items that are neither tensors, ops nor plain values
-- (Lua objects such as a Saver) are not written. What lives only in Lua is
-- not in the file: a tf.lua_func op is refused (its function cannot be
-- written), and a tf.data iterator's get_next tensors come back as the plain
-- placeholders they are, to be fed.
local ffi = require("ffi")
local bit = require("bit")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local json = require("moonflow.json")
local C = core.C

local FORMAT, VERSION = "moonflow.graph", 1

local fail = core.fail

-- base64 ---------------------------------------------------------------------------
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local enc_tab, dec_tab = ffi.new("uint8_t[64]"), ffi.new("int16_t[256]")
for i = 0, 255 do dec_tab[i] = -1 end
for i = 1, 64 do enc_tab[i - 1] = B64:byte(i); dec_tab[B64:byte(i)] = i - 1 end

local function base64_encode(ptr, n)
  local src = ffi.cast("const uint8_t *", ptr)
  local out = ffi.new("uint8_t[?]", math.floor((n + 2) / 3) * 4 + 1)
  local o = 0
  for i = 0, n - 1, 3 do
    local b0, b1, b2 = src[i], i + 1 < n and src[i + 1] or 0, i + 2 < n and src[i + 2] or 0
    local v = bit.bor(bit.lshift(b0, 16), bit.lshift(b1, 8), b2)
    out[o] = enc_tab[bit.rshift(v, 18)]
    out[o + 1] = enc_tab[bit.band(bit.rshift(v, 12), 63)]
    out[o + 2] = i + 1 < n and enc_tab[bit.band(bit.rshift(v, 6), 63)] or 61
    out[o + 3] = i + 2 < n and enc_tab[bit.band(v, 63)] or 61
    o = o + 4
  end
  return ffi.string(out, o)
end

-- Decodes into dst (n bytes expected); false when s is not that much base64.
local function base64_decode(s, dst, n)
  if #s ~= math.floor((n + 2) / 3) * 4 then return false end
  local src = ffi.cast("const uint8_t *", s)
  local out = ffi.cast("uint8_t *", dst)
  local o = 0
  for i = 0, #s - 1, 4 do
    local c0, c1, c2, c3 = dec_tab[src[i]], dec_tab[src[i + 1]], dec_tab[src[i + 2]], dec_tab[src[i + 3]]
    if c0 < 0 or c1 < 0 then return false end
    if c2 < 0 then c2 = 0 end
    if c3 < 0 then c3 = 0 end
    local v = bit.bor(bit.lshift(c0, 18), bit.lshift(c1, 12), bit.lshift(c2, 6), c3)
    if o < n then out[o] = bit.rshift(v, 16) end
    if o + 1 < n then out[o + 1] = bit.band(bit.rshift(v, 8), 255) end
    if o + 2 < n then out[o + 2] = bit.band(v, 255) end
    o = o + 3
  end
  return true
end

-- int64 values: numbers when exact, else decimal strings.
local function int_out(v)
  if v > -2 ^ 53 and v < 2 ^ 53 then return tonumber(v) end
  return (tostring(ffi.cast("int64_t", v)):gsub("LL$", ""))
end
local function int_in(v, what)
  if type(v) == "number" then
    if v % 1 ~= 0 then fail(what .. ": expected an integer, got " .. v) end
    return v
  end
  if type(v) == "string" and v:match("^%-?%d+$") then
    local neg = v:sub(1, 1) == "-"
    local r = ffi.new("int64_t", 0)
    for d in v:gmatch("%d") do r = r * 10 + (neg and -tonumber(d) or tonumber(d)) end
    return r
  end
  fail(what .. ": expected an integer, got " .. tostring(v))
end

local function float_out(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  return v
end
local function float_in(v, what)
  if type(v) == "number" then return v end
  if v == "nan" then return 0 / 0 elseif v == "inf" then return math.huge elseif v == "-inf" then return -math.huge end
  fail(what .. ": expected a number, got " .. tostring(v))
end

local function shape_out(s)
  if s.rank < 0 then return json.null end
  local dims = json.array({})
  for i = 0, s.rank - 1 do dims[i + 1] = tonumber(s.dims[i]) end
  return dims
end

-- Writing ------------------------------------------------------------------------------
local kinds = {}
for _, k in ipairs({"INT", "FLOAT", "BOOL", "TYPE", "INTS", "SHAPE", "STRING", "TENSOR", "GRAPH"}) do
  kinds[tonumber(C["MF_ATTR_" .. k])] = k:lower()
end

local string_length = ffi.new("int64_t[1]")
local function tensor_out(t)
  local dtype = core.by_enum[tonumber(C.mf_tensor_dtype(t))]
  local dims = json.array({})
  local cd = C.mf_tensor_dims(t)
  for i = 0, C.mf_tensor_rank(t) - 1 do dims[i + 1] = tonumber(cd[i]) end
  if dtype.name == "string" then  -- each string's bytes, not the value's layout
    local strings = json.array({})
    for i = 0, tonumber(C.mf_tensor_size(t)) - 1 do
      local bytes = C.mf_tensor_string(t, i, string_length)
      strings[i + 1] = base64_encode(bytes, tonumber(string_length[0]))
    end
    return {dtype = dtype.name, shape = dims, strings = strings}
  end
  return {dtype = dtype.name, shape = dims,
          data = base64_encode(C.mf_tensor_data(t), tonumber(C.mf_tensor_nbytes(t)))}
end

-- Serializes the ops of graph pointer gp; function graphs go to ctx.functions
-- (each once, before any graph using it).
local function ops_out(gp, ctx)
  local out = json.array({})
  local i64, f64, b = ffi.new("int64_t[1]"), ffi.new("double[1]"), ffi.new("bool[1]")
  local dt, pints, shape = ffi.new("mf_dtype[1]"), ffi.new("const int64_t*[1]"), ffi.new("mf_shape")
  for id = 0, C.mf_graph_num_ops(gp) - 1 do
    local op = C.mf_graph_op(gp, id)
    local e = {name = ffi.string(C.mf_op_name(op)), type = ffi.string(C.mf_op_type(op)),
               inputs = json.array({}), control_inputs = json.array({}), shapes = json.array({}), attrs = {}}
    if e.type == "LuaFunc" then
      fail("tf.train.write_graph: op '" .. e.name .. "' is a tf.lua_func, whose Lua function cannot be " ..
           "written to a file; build it again after importing the graph")
    end
    for i = 0, C.mf_op_num_inputs(op) - 1 do
      local o = C.mf_op_input(op, i)
      e.inputs[i + 1] = ffi.string(C.mf_op_name(o.op)) .. ":" .. o.index
    end
    for i = 0, C.mf_op_num_control_inputs(op) - 1 do
      e.control_inputs[i + 1] = ffi.string(C.mf_op_name(C.mf_op_control_input(op, i)))
    end
    for i = 0, C.mf_op_num_outputs(op) - 1 do
      C.mf_op_output_shape(op, i, shape)
      e.shapes[i + 1] = shape_out(shape)
    end
    local device, origin = ffi.string(C.mf_op_device(op)), ffi.string(C.mf_op_origin(op))
    if device ~= "" then e.device = device end
    if origin ~= "" then e.origin = origin end
    for a = 0, C.mf_op_num_attrs(op) - 1 do
      local name = ffi.string(C.mf_op_attr_name(op, a))
      local kind = kinds[tonumber(C.mf_op_attr_kind(op, a))]
      local v
      if kind == "int" then C.mf_op_attr_int(op, name, i64); v = int_out(i64[0])
      elseif kind == "float" then C.mf_op_attr_float(op, name, f64); v = float_out(f64[0])
      elseif kind == "bool" then C.mf_op_attr_bool(op, name, b); v = b[0]
      elseif kind == "type" then C.mf_op_attr_type(op, name, dt); v = core.by_enum[tonumber(dt[0])].name
      elseif kind == "ints" then
        local n = C.mf_op_attr_ints(op, name, pints)
        v = json.array({})
        for k = 0, n - 1 do v[k + 1] = int_out(pints[0][k]) end
      elseif kind == "shape" then C.mf_op_attr_shape(op, name, shape); v = shape_out(shape)
      elseif kind == "string" then v = ffi.string(C.mf_op_attr_string(op, name))
      elseif kind == "tensor" then v = tensor_out(C.mf_op_attr_tensor(op, name))
      elseif kind == "graph" then
        local fg = C.mf_op_attr_graph(op, name)
        local key = tostring(ffi.cast("uintptr_t", fg))
        if not ctx.index[key] then
          local f = {seed = int_out(C.mf_graph_seed(fg)), ops = ops_out(fg, ctx)}
          ctx.functions[#ctx.functions + 1] = f
          ctx.index[key] = #ctx.functions - 1
        end
        v = ctx.index[key]
      else
        fail("tf.train.write_graph: op " .. e.name .. " has attribute " .. name .. " of an unknown kind")
      end
      e.attrs[name] = {[kind] = v}
    end
    out[id + 1] = e
  end
  return out
end

local function item_out(x)
  if G.is_tensor(x) then return {tensor = x.name} end
  if G.is_operation(x) then return {op = x.name} end
  local t = type(x)
  if t == "number" then return {number = float_out(x)} end
  if t == "string" then return {string = x} end
  if t == "boolean" then return {bool = x} end
  return nil
end

-- The whole graph as a Lua table ready for JSON.
local function graph_out(g)
  if getmetatable(g) ~= G.Graph then fail("tf.train.write_graph: expected a tf.Graph, got " .. tostring(g)) end
  if g._parent then fail("tf.train.write_graph: a function graph (a branch or loop body) cannot be written alone") end
  local ctx = {functions = json.array({}), index = {}}
  local doc = {format = FORMAT, version = VERSION, seed = int_out(C.mf_graph_seed(g.ptr)), ops = ops_out(g.ptr, ctx)}
  doc.functions = ctx.functions
  doc.collections = {}
  for key, list in pairs(g.collections) do
    local items = json.array({})
    for _, x in ipairs(list) do
      local item = item_out(x)
      -- (a tensor or op of another graph, e.g. a traced function's, cannot be named)
      if item and (type(x) ~= "table" or x.graph == g) then items[#items + 1] = item end
    end
    if #items > 0 then doc.collections[key] = items end
  end
  doc.variables = json.array({})
  for _, op in ipairs(g:get_operations()) do
    if op.type == "VariableV2" then
      local v = op:output(0)
      local init = rawget(v, "initializer")
      if init then
        local iv = rawget(v, "initial_value")
        doc.variables[#doc.variables + 1] = {tensor = v.name, initializer = init.name,
                                             initial_value = iv and iv.name or nil,
                                             trainable = rawget(v, "trainable") and true or false}
      end
    end
  end
  doc.variable_store = {}
  if g._variables then
    for name, v in pairs(g._variables.store) do doc.variable_store[name] = v.name end
  end
  return doc
end

-- Reading ------------------------------------------------------------------------------
local function dims_of(v, what)
  if v == json.null then return nil end
  if type(v) ~= "table" then fail(what .. ": expected a shape list") end
  local dims = {}
  for i, d in ipairs(v) do dims[i] = int_in(d, what) end
  return dims
end

-- A string tensor: {dtype = "string", shape, strings = [base64 of each, in order]}.
local function strings_in(v, dims, what)
  if type(v.strings) ~= "table" then fail(what .. ": expected {dtype, shape, strings}") end
  local numel = 1
  for i = 1, #dims do numel = numel * tonumber(dims[i]) end
  if numel ~= #v.strings then
    fail(string.format("%s: %d strings for a shape of %.0f elements", what, #v.strings, numel))
  end
  local bytes, lengths = ffi.new("const char*[?]", numel + 1), ffi.new("int64_t[?]", numel + 1)
  local keep = {}
  for i, enc in ipairs(v.strings) do
    local n = type(enc) == "string" and math.floor(#enc / 4) * 3 - #enc:match("=*$") or -1
    local buf = n >= 0 and ffi.new("uint8_t[?]", n + 1)
    if not (buf and base64_decode(enc, buf, n)) then fail(what .. ": string " .. i .. " is not base64") end
    keep[i] = buf
    bytes[i - 1], lengths[i - 1] = ffi.cast("const char *", buf), n
  end
  local cdims = core.dims_buffer(#dims > 0 and #dims or 1)
  for i = 1, #dims do cdims[i - 1] = dims[i] end
  local t = C.mf_tensor_new_strings(#dims, cdims, bytes, lengths, core.status)
  if t == nil then core.check_here() end
  return require("moonflow.array").wrap(t)
end

local function tensor_in(v, what)
  local dtype = type(v) == "table" and core.dtypes[v.dtype]
  if dtype and dtype.name == "string" then
    return strings_in(v, dims_of(v.shape, what) or fail(what .. ": a tensor needs a shape"), what)
  end
  if type(v) ~= "table" or type(v.data) ~= "string" then fail(what .. ": expected {dtype, shape, data}") end
  if not dtype then fail(what .. ": unknown dtype " .. tostring(v.dtype)) end
  local dims = dims_of(v.shape, what) or fail(what .. ": a tensor needs a shape")
  -- Size the data from the declared shape before allocating anything, so a
  -- tampered shape cannot make us allocate (and zero) more than the file
  -- holds. The product stops growing once it passes what the base64 can
  -- carry, so it cannot overflow.
  local cap = math.floor(#v.data / 4) * 3
  local numel, zero = 1, false
  for i = 1, #dims do
    local d = tonumber(dims[i])
    if d < 0 then fail(what .. ": dimension " .. i .. " is negative (" .. tostring(dims[i]) .. ")") end
    if d == 0 then zero = true end
  end
  if zero then
    numel = 0
  else
    for i = 1, #dims do
      numel = numel * tonumber(dims[i])
      if numel * dtype.size > cap then break end
    end
  end
  local nbytes = numel * dtype.size
  if #v.data ~= math.floor((nbytes + 2) / 3) * 4 then
    local shown = {}
    for i = 1, #dims do shown[i] = (tostring(dims[i]):gsub("LL$", "")) end
    fail(string.format("%s: the data (%d characters of base64) is not the %.0f bytes that shape [%s] of %s needs",
                       what, #v.data, nbytes, table.concat(shown, ", "), dtype.name))
  end
  local a = require("moonflow.array").new(dtype, dims)
  if not base64_decode(v.data, a:data(), a:size() * dtype.size) then
    fail(what .. ": the data is not " .. a:size() * dtype.size .. " bytes of base64")
  end
  return a
end

-- Decodes attribute `name` (encoded value `enc`) into a function that sets
-- it on a desc; errors come before any desc exists. Keeps Lua values the
-- desc must outlive in `keep`.
local function attr_in(name, enc, fgraphs, keep, what)
  if type(enc) ~= "table" then fail(what .. ": bad attribute value") end
  local kind, v = next(enc)
  if kind == "int" then
    local i = int_in(v, what)
    return function(d) C.mf_op_desc_set_attr_int(d, name, i) end
  elseif kind == "float" then
    local f = float_in(v, what)
    return function(d) C.mf_op_desc_set_attr_float(d, name, f) end
  elseif kind == "bool" then
    if type(v) ~= "boolean" then fail(what .. ": expected a boolean") end
    return function(d) C.mf_op_desc_set_attr_bool(d, name, v) end
  elseif kind == "type" then
    local dtype = core.dtypes[v] or fail(what .. ": unknown dtype " .. tostring(v))
    return function(d) C.mf_op_desc_set_attr_type(d, name, dtype.enum) end
  elseif kind == "ints" then
    local n = type(v) == "table" and #v or fail(what .. ": expected a list")
    local buf = core.dims_buffer(n > 0 and n or 1)
    for i = 1, n do buf[i - 1] = int_in(v[i], what) end
    return function(d) C.mf_op_desc_set_attr_ints(d, name, buf, n) end
  elseif kind == "shape" then
    local dims = dims_of(v, what)
    if dims and #dims > C.MF_MAX_RANK then fail(what .. ": shapes have at most " .. C.MF_MAX_RANK .. " dimensions") end
    local sh = G.c_shape(dims)
    return function(d) C.mf_op_desc_set_attr_shape(d, name, sh.dims, sh.rank) end
  elseif kind == "string" then
    if type(v) ~= "string" then fail(what .. ": expected a string") end
    return function(d) C.mf_op_desc_set_attr_string(d, name, v) end
  elseif kind == "tensor" then
    local a = tensor_in(v, what)
    keep[#keep + 1] = a
    return function(d) C.mf_op_desc_set_attr_tensor(d, name, a.ptr) end
  elseif kind == "graph" then
    local fg = type(v) == "number" and fgraphs[v + 1]
    if not fg then fail(what .. ": function " .. tostring(v) .. " is not defined before its use") end
    return function(d) C.mf_op_desc_set_attr_graph(d, name, fg) end
  end
  fail(what .. ": unknown attribute kind " .. tostring(kind))
end

local NONE = {}

-- A label for error messages, joined only when one is raised: importing
-- 100k ops would otherwise make 100k strings that no one reads.
local Label = {}
Label.__tostring = function(l)
  local parts = {}
  for i = 1, #l do parts[i] = tostring(l[i]) end
  return table.concat(parts)
end
Label.__concat = function(a, b) return tostring(a) .. tostring(b) end
local function label(a, b, c, d) return setmetatable({a, b, c, d}, Label) end

-- Rebuilds the ops `list` into graph pointer gp (empty, at the root scope).
local function ops_in(gp, list, fgraphs, where)
  if type(list) ~= "table" then fail(where .. ": 'ops' must be a list") end
  local keep = {}
  for id, e in ipairs(list) do
    if type(e) ~= "table" or type(e.name) ~= "string" or type(e.type) ~= "string" then
      fail(string.format("%s: op %d: expected {name, type, ...}", where, id - 1))
    end
    local what = label(where, ": op '", e.name, "'")
    -- Everything is checked and decoded first: a desc, once made, must be finished.
    -- Inputs are kept as op ids and output indices (ids[2k-1], ids[2k]).
    local inputs, controls, setters, shapes = {}, {}, {}, {}
    for _, input in ipairs(e.inputs or NONE) do
      local opname, index = tostring(input):match("^(.*):(%d+)$")
      local src = opname and C.mf_graph_op_by_name(gp, opname)
      if src == nil then fail(what .. ": input " .. tostring(input) .. " is not an earlier op's output") end
      inputs[#inputs + 1] = C.mf_op_id(src)
      inputs[#inputs + 1] = tonumber(index)
    end
    for _, name in ipairs(e.control_inputs or NONE) do
      local src = C.mf_graph_op_by_name(gp, tostring(name))
      if src == nil then fail(what .. ": control input " .. tostring(name) .. " is not an earlier op") end
      controls[#controls + 1] = src
    end
    for name, enc in pairs(e.attrs or NONE) do
      setters[#setters + 1] = attr_in(name, enc, fgraphs, keep, label(what, ", attribute ", name))
    end
    for i, dims in ipairs(e.shapes or NONE) do
      dims = dims_of(dims, what)
      if dims and #dims > C.MF_MAX_RANK then fail(what .. ": shapes have at most " .. C.MF_MAX_RANK .. " dimensions") end
      shapes[i] = G.c_shape(dims)
    end
    local d = C.mf_op_desc_new(gp, e.type, e.name)
    for k = 1, #inputs, 2 do C.mf_op_desc_add_input_id(d, inputs[k], inputs[k + 1]) end
    for _, c in ipairs(controls) do C.mf_op_desc_add_control_input(d, c) end
    for _, set in ipairs(setters) do set(d) end
    if e.device then C.mf_op_desc_set_device(d, tostring(e.device)) end
    if e.origin then C.mf_op_desc_set_origin(d, tostring(e.origin)) end
    local op = C.mf_op_desc_finish(d, core.status)
    if op == nil then fail(what .. ": " .. ffi.string(C.mf_status_message(core.status))) end
    if C.mf_op_id(op) ~= id - 1 or C.mf_graph_op_by_name(gp, e.name) ~= op then
      fail(what .. ": came back as '" .. ffi.string(C.mf_op_name(op)) .. "' (duplicate names in the file?)")
    end
    for i, want in ipairs(shapes) do
      if i <= C.mf_op_num_outputs(op) and C.mf_op_set_output_shape(op, i - 1, want, core.status) ~= 0 then
        fail(what .. ": " .. ffi.string(C.mf_status_message(core.status)))
      end
    end
  end
end

-- A tensor or op of g by name, or an error naming the graph file.
local function lookup(g, name, path, is_tensor)
  local x, why
  if is_tensor then x, why = g:_find_tensor(name) else x, why = g:_find_operation(name) end
  if not x then fail("tf.train.import_graph: graph file " .. path .. ": " .. why) end
  return x
end

local function graph_in(doc, path, tf)
  if type(doc) ~= "table" or doc.format ~= FORMAT then
    fail("tf.train.import_graph: graph file " .. path .. " is not a moonflow graph (format '" .. FORMAT .. "')")
  end
  if type(doc.version) ~= "number" or doc.version > VERSION then
    fail("tf.train.import_graph: graph file " .. path .. " has version " .. tostring(doc.version) ..
         "; this moonflow reads version " .. VERSION .. " and older")
  end
  local where = "tf.train.import_graph: graph file " .. path
  local fgraphs = {}
  for i, f in ipairs(doc.functions or {}) do
    local fg = C.mf_graph_new()
    if fg == nil then fail("tf.train.import_graph: out of memory creating a graph") end
    fgraphs[i] = ffi.gc(fg, C.mf_graph_release)
    C.mf_graph_set_seed(fg, int_in(f.seed or -1, where))
    ops_in(fg, f.ops, fgraphs, where .. ", function " .. (i - 1))
  end
  local g = G.Graph.new()
  C.mf_graph_set_seed(g.ptr, int_in(doc.seed or -1, where))
  ops_in(g.ptr, doc.ops, fgraphs, where)
  -- Print ops write through Lua (host.lua), in the graph or its functions.
  local function has_print(list)
    for _, e in ipairs(list or {}) do if e.type == "Print" then return true end end
    return false
  end
  local prints = has_print(doc.ops)
  for _, f in ipairs(doc.functions or {}) do prints = prints or has_print(f.ops) end
  if prints then require("moonflow.host").attach(g) end
  for _, v in ipairs(doc.variables or {}) do
    local var = lookup(g, v.tensor, path, true)
    rawset(var, "initializer", lookup(g, v.initializer, path, false))
    if v.initial_value then rawset(var, "initial_value", lookup(g, v.initial_value, path, true)) end
    rawset(var, "trainable", v.trainable == true)
  end
  for key, items in pairs(doc.collections or {}) do
    local list = g:get_collection_ref(key)
    for _, item in ipairs(items) do
      if item.tensor then list[#list + 1] = lookup(g, item.tensor, path, true)
      elseif item.op then list[#list + 1] = lookup(g, item.op, path, false)
      elseif item.number ~= nil then list[#list + 1] = float_in(item.number, where)
      elseif item.string ~= nil then list[#list + 1] = item.string
      elseif item.bool ~= nil then list[#list + 1] = item.bool end
    end
  end
  if doc.variable_store and next(doc.variable_store) then
    g:as_default(tf.get_variable_scope)  -- makes the graph's variable store
    for name, tname in pairs(doc.variable_store) do g._variables.store[name] = lookup(g, tname, path, true) end
  end
  return g
end

-- Graphviz -----------------------------------------------------------------------------
local function dot_quote(s) return '"' .. tostring(s):gsub('[\\"]', "\\%0"):gsub("\n", "\\n") .. '"' end

local shape_of_type = {Placeholder = "ellipse", _Arg = "ellipse", VariableV2 = "cylinder", Const = "note",
                       If = "diamond", While = "hexagon"}

-- Emits the nodes and edges of graph pointer gp with ids prefixed `prefix`;
-- function graphs become clusters. Returns the id of its first node (or nil).
local function dot_graph(gp, prefix, lines, indent, counter)
  local shape = ffi.new("mf_shape")
  local n = C.mf_graph_num_ops(gp)
  local function node(op) return prefix .. C.mf_op_id(op) end
  for id = 0, n - 1 do
    local op = C.mf_graph_op(gp, id)
    local name, type_ = ffi.string(C.mf_op_name(op)), ffi.string(C.mf_op_type(op))
    local attrs = string.format("label=%s", dot_quote(name .. "\n" .. type_))
    if shape_of_type[type_] then attrs = attrs .. ", shape=" .. shape_of_type[type_] end
    lines[#lines + 1] = string.format("%s%s [%s];", indent, prefix .. id, attrs)
  end
  for id = 0, n - 1 do
    local op = C.mf_graph_op(gp, id)
    for i = 0, C.mf_op_num_inputs(op) - 1 do
      local o = C.mf_op_input(op, i)
      C.mf_op_output_shape(o.op, o.index, shape)
      local label = tostring(G.TensorShape.from_c(shape))
      if o.index > 0 then label = ":" .. o.index .. " " .. label end
      lines[#lines + 1] = string.format("%s%s -> %s [label=%s];", indent, node(o.op), prefix .. id, dot_quote(label))
    end
    for i = 0, C.mf_op_num_control_inputs(op) - 1 do
      lines[#lines + 1] = string.format("%s%s -> %s [style=dashed, arrowhead=odot];", indent,
                                        node(C.mf_op_control_input(op, i)), prefix .. id)
    end
    for a = 0, C.mf_op_num_attrs(op) - 1 do
      if C.mf_op_attr_kind(op, a) == C.MF_ATTR_GRAPH then
        local aname = ffi.string(C.mf_op_attr_name(op, a))
        local fg = C.mf_op_attr_graph(op, aname)
        counter[1] = counter[1] + 1
        local cid = "cluster_" .. counter[1]
        lines[#lines + 1] = string.format("%ssubgraph %s {", indent, cid)
        lines[#lines + 1] = string.format("%s  label=%s; style=rounded; color=gray;", indent,
                                          dot_quote(ffi.string(C.mf_op_name(op)) .. " / " .. aname))
        local first = dot_graph(fg, "f" .. counter[1] .. "_", lines, indent .. "  ", counter)
        lines[#lines + 1] = indent .. "}"
        if first then
          lines[#lines + 1] = string.format("%s%s -> %s [lhead=%s, style=dotted, label=%s];", indent,
                                            prefix .. id, first, cid, dot_quote(aname))
        end
      end
    end
  end
  return n > 0 and prefix .. "0" or nil
end

return function(tf, ops)
  tf.train = tf.train or {}

  -- tf.train.write_graph(g, path) or (g, dir, name): writes g as a graph file
  -- (see the top of this file); returns the path. The write is atomic.
  function tf.train.write_graph(g, path, name)
    if type(path) ~= "string" then fail("tf.train.write_graph(g, path): a path is required") end
    if type(name) == "string" then path = path:gsub("/+$", "") .. "/" .. name end
    local text = json.encode(graph_out(g), " ", 2) .. "\n"
    require("moonflow.fileio").write_atomic(path, {text}, "tf.train.write_graph")
    return path
  end

  -- tf.train.import_graph(path): a new tf.Graph holding the file's graph:
  -- the same op names, collections and variables (so tf.train.Saver() works
  -- on it); find tensors with g:get_tensor_by_name("y:0").
  function tf.train.import_graph(path)
    if type(path) ~= "string" then fail("tf.train.import_graph(path): a path is required") end
    local f = io.open(path, "rb")
    if not f then fail("tf.train.import_graph: NotFound: graph file " .. path .. " does not exist") end
    local text = f:read("*a")
    f:close()
    local ok, doc = pcall(json.decode, text)
    if not ok then fail("tf.train.import_graph: graph file " .. path .. " is not valid JSON: " .. tostring(doc)) end
    return graph_in(doc, path, tf)
  end

  -- g:to_dot(): the graph as Graphviz text. Nodes are ops labeled with their
  -- name and type, edges tensors labeled with their static shape (dashed:
  -- control dependencies); the functions of control flow are clusters.
  function G.Graph:to_dot()
    local lines = {"digraph moonflow {", "  compound=true;",
                   '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];',
                   '  edge [fontname="Helvetica", fontsize=9];'}
    dot_graph(self.ptr, "n", lines, "  ", {0})
    lines[#lines + 1] = "}"
    return table.concat(lines, "\n") .. "\n"
  end
end
