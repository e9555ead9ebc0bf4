-- graph_io.lua — graph files and pictures: tf.train.write_graph,
-- tf.train.import_graph, g:to_dot(); TensorFlow's GraphDef:
-- tf.train.write_graph's .pb/.pbtxt forms, g:as_graph_def(),
-- tf.import_graph_def (read and written by src/io/tf_graphdef_*.c).
--
-- Graph files are read and written by the engine (src/io/graph_file.c, which
-- describes the format, mf_graph_file_*): the graph's ops and function graphs,
-- and beside them what lives in Lua here: the variables (initializer, initial
-- value, trainable), the collections and the variable store. Collection items
-- that are neither tensors, ops nor plain values (Lua objects such as a Saver)
-- are not written. What lives only in Lua is not in the file: a tf.lua_func op
-- is refused (its function cannot be written), and a tf.data iterator's
-- get_next tensors come back as the plain placeholders they are, to be fed.
local ffi = require("ffi")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local fileio = require("moonflow.fileio")
local C = core.C

local fail = core.fail

-- Writing ------------------------------------------------------------------------------
local function add(code, fname)
  if code ~= 0 then fileio.fail_status(fname) end
end

-- The file of graph g (an mf_graph_file, collected): the graph and its Lua side.
local function graph_file_of(g, fname)
  if getmetatable(g) ~= G.Graph then fail(fname .. ": expected a tf.Graph, got " .. tostring(g)) end
  if g._parent then fail(fname .. ": a function graph (a branch or loop body) cannot be written alone") end
  local f = C.mf_graph_file_new(g.ptr)
  if f == nil then fail(fname .. ": out of memory") end
  f = ffi.gc(f, C.mf_graph_file_free)
  local keys = {}
  for key in pairs(g.collections) do keys[#keys + 1] = key end
  table.sort(keys)
  local item = ffi.new("mf_graph_file_item")
  for _, key in ipairs(keys) do
    for _, x in ipairs(g.collections[key]) do
      item.collection, item.text = key, nil
      local t, written = type(x), true
      -- (a tensor or op of another graph, e.g. a traced function's, cannot be named)
      if G.is_tensor(x) and x.graph == g then item.kind, item.text = C.MF_ITEM_TENSOR, x.name
      elseif G.is_operation(x) and x.graph == g then item.kind, item.text = C.MF_ITEM_OP, x.name
      elseif t == "number" then item.kind, item.number = C.MF_ITEM_NUMBER, x
      elseif t == "string" then item.kind, item.text = C.MF_ITEM_STRING, x
      elseif t == "boolean" then item.kind, item.flag = C.MF_ITEM_BOOL, x
      else written = false end
      if written then add(C.mf_graph_file_add_item(f, item, core.status), fname) end
    end
  end
  local var = ffi.new("mf_graph_file_variable")
  for _, op in ipairs(g:get_operations()) do
    if op.type == "VariableV2" then
      local v = op:output(0)
      local init = rawget(v, "initializer")
      if init then
        local iv = rawget(v, "initial_value")
        var.tensor, var.initializer, var.initial_value = v.name, init.name, iv and iv.name or nil
        var.trainable = rawget(v, "trainable") and true or false
        add(C.mf_graph_file_add_variable(f, var, core.status), fname)
      end
    end
  end
  if g._variables then
    for name, v in pairs(g._variables.store) do add(C.mf_graph_file_add_stored(f, name, v.name, core.status), fname) end
  end
  return f
end

-- Reading ------------------------------------------------------------------------------
-- Whether graph pointer gp or one of its function graphs has an op of type.
local function has_op(gp, type_)
  for id = 0, C.mf_graph_num_ops(gp) - 1 do
    local op = C.mf_graph_op(gp, id)
    if ffi.string(C.mf_op_type(op)) == type_ then return true end
    for a = 0, C.mf_op_num_attrs(op) - 1 do
      if C.mf_op_attr_kind(op, a) == C.MF_ATTR_GRAPH and has_op(C.mf_op_attr_graph(op, C.mf_op_attr_name(op, a)), type_) then
        return true
      end
    end
  end
  return false
end

-- The Lua graph of a graph file read by the engine, with its variables, collections and store.
local function graph_in(f, tf)
  local g = G.Graph.new(C.mf_graph_retain(C.mf_graph_file_graph(f)))
  -- Print ops write through Lua (host.lua), in the graph or its functions.
  if has_op(g.ptr, "Print") then require("moonflow.host").attach(g) end
  local vars = ffi.new("const mf_graph_file_variable *[1]")
  for i = 0, C.mf_graph_file_variables(f, vars) - 1 do
    local v = vars[0][i]
    local var = g:get_tensor_by_name(ffi.string(v.tensor))
    rawset(var, "initializer", g:get_operation_by_name(ffi.string(v.initializer)))
    if v.initial_value ~= nil then rawset(var, "initial_value", g:get_tensor_by_name(ffi.string(v.initial_value))) end
    rawset(var, "trainable", v.trainable)
  end
  local items = ffi.new("const mf_graph_file_item *[1]")
  for i = 0, C.mf_graph_file_items(f, items) - 1 do
    local item = items[0][i]
    local list = g:get_collection_ref(ffi.string(item.collection))
    local kind = item.kind
    if kind == C.MF_ITEM_TENSOR then list[#list + 1] = g:get_tensor_by_name(ffi.string(item.text))
    elseif kind == C.MF_ITEM_OP then list[#list + 1] = g:get_operation_by_name(ffi.string(item.text))
    elseif kind == C.MF_ITEM_NUMBER then list[#list + 1] = item.number
    elseif kind == C.MF_ITEM_STRING then list[#list + 1] = ffi.string(item.text)
    else list[#list + 1] = item.flag end
  end
  local stored = ffi.new("const mf_graph_file_name *[1]")
  local n = C.mf_graph_file_stored(f, stored)
  if n > 0 then
    g:as_default(tf.get_variable_scope)  -- makes the graph's variable store
    for i = 0, n - 1 do
      g._variables.store[ffi.string(stored[0][i].name)] = g:get_tensor_by_name(ffi.string(stored[0][i].tensor))
    end
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

  -- tf.train.write_graph(g, path) or (g, dir, name[, as_text | {as_text=}]):
  -- writes g as a graph file (see the top of this file) or, when as_text is
  -- given or the name ends in .pb or .pbtxt, as TensorFlow's GraphDef
  -- (binary; protobuf's text format when as_text is true or the name ends in
  -- .pbtxt). Returns the path. The write is atomic.
  function tf.train.write_graph(g, path, name, as_text)
    local fname = "tf.train.write_graph"
    if type(path) ~= "string" then fail(fname .. "(g, path): a path is required") end
    if type(name) == "string" then path = path:gsub("/+$", "") .. "/" .. name end
    if type(as_text) == "table" then as_text = as_text.as_text end
    if as_text == nil and path:find("%.pbtxt$") then as_text = true
    elseif as_text == nil and path:find("%.pb$") then as_text = false end
    if as_text ~= nil then
      if type(as_text) ~= "boolean" then fail(fname .. ": as_text must be a boolean, got " .. tostring(as_text)) end
      if getmetatable(g) ~= G.Graph then fail(fname .. ": expected a tf.Graph, got " .. tostring(g)) end
      add(C.mf_graphdef_write(g.ptr, path, as_text, core.status), fname)
      return path
    end
    local f = graph_file_of(g, fname)
    add(C.mf_graph_file_write(f, path, core.status), fname)
    return path
  end

  -- g:as_graph_def({as_text=}): g as TensorFlow GraphDef bytes (a Lua string).
  function G.Graph:as_graph_def(options)
    local as_text = type(options) == "table" and options.as_text or false
    local out, n = ffi.new("char *[1]"), ffi.new("size_t[1]")
    add(C.mf_graphdef_serialize(self.ptr, as_text, out, n, core.status), "Graph:as_graph_def")
    local bytes = ffi.string(out[0], n[0])
    C.mf_free_bytes(out[0])
    return bytes
  end

  -- tf.import_graph_def(graph_def, {input_map=, return_elements=, name=}):
  -- adds the nodes of a binary TensorFlow GraphDef (bytes, or the path of a
  -- .pb file) to the default graph under name scope `name` ("import"; "" for
  -- none): input_map {["x:0"] = tensor} puts tensors of this graph in place
  -- of the GraphDef's; returns the list of return_elements ("y:0" a tensor,
  -- "y" an op) found in the imported graph, or nil without them.
  function tf.import_graph_def(graph_def, options)
    local fname = "tf.import_graph_def"
    if type(graph_def) ~= "string" then
      fail(fname .. ": expected GraphDef bytes or a path, got " .. tostring(graph_def))
    end
    options = options or {}
    if type(options) ~= "table" then fail(fname .. ": options must be a table") end
    local bytes, file = graph_def, #graph_def < 4096 and not graph_def:find("%z") and io.open(graph_def, "rb")
    if file then bytes = file:read("*a"); file:close() end
    local g = G.get_default_graph()
    local names, ports, n = {}, nil, 0
    for key, t in pairs(options.input_map or {}) do
      if type(key) ~= "string" or not G.is_tensor(t) or t.graph ~= g then
        fail(fname .. ": input_map maps names (\"x:0\") to tensors of the default graph; got " .. tostring(key))
      end
      n = n + 1
      names[n] = key
    end
    table.sort(names)
    local c_names, c_ports = ffi.new("const char *[?]", n + 1), ffi.new("mf_output[?]", n + 1)
    for i, key in ipairs(names) do
      local t = options.input_map[key]
      c_names[i - 1], c_ports[i - 1].op, c_ports[i - 1].index = key, t.op.ptr, t.value_index
    end
    local opts = ffi.new("mf_graphdef_options", n, c_names, c_ports)
    local name = options.name == nil and "import" or options.name
    local scope = name == "" and "" or G.in_name_scope(g, name, function()
      add(C.mf_graphdef_import(g.ptr, bytes, #bytes, opts, core.status), fname)
      return ffi.string(C.mf_graph_name_scope(g.ptr))
    end)
    if name == "" then add(C.mf_graphdef_import(g.ptr, bytes, #bytes, opts, core.status), fname) end
    if not options.return_elements then return nil end
    local out = {}
    for i, e in ipairs(options.return_elements) do
      local found, why
      if tostring(e):find(":%d+$") then found, why = g:_find_tensor(scope .. e)
      else found, why = g:_find_operation(scope .. tostring(e)) end
      if not found then fail(fname .. ": return_elements: " .. why) end
      out[i] = found
    end
    return out
  end

  -- tf.train.import_graph(path): a new tf.Graph holding the file's graph:
  -- the same op names, collections and variables (so tf.train.Saver() works
  -- on it); find tensors with g:get_tensor_by_name("y:0").
  function tf.train.import_graph(path)
    if type(path) ~= "string" then fail("tf.train.import_graph(path): a path is required") end
    local f = C.mf_graph_file_read(path, core.status)
    if f == nil then
      if C.mf_status_code(core.status) == C.MF_INVALID_ARGUMENT then  -- the message names the file and what is wrong
        fail("tf.train.import_graph: " .. ffi.string(C.mf_status_message(core.status)))
      end
      fileio.fail_status("tf.train.import_graph")
    end
    return graph_in(ffi.gc(f, C.mf_graph_file_free), tf)
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
