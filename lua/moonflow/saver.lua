-- saver.lua — checkpoints: tf.train.Saver, tf.train.latest_checkpoint,
-- tf.train.get_checkpoint_state, tf.train.list_variables, tf.train.load_variable.
--
-- A checkpoint is one safetensors file, read and written by the engine
-- (src/io/checkpoint.c, mf_checkpoint_*): an 8-byte little-endian header
-- length n, n bytes of JSON (padded with spaces to a multiple of 8) mapping
-- each variable's name to {dtype ("F32", "F64", "I32", "I64", "U8", "BOOL", "C64", "C128"),
-- shape, data_offsets = {begin, end}} (offsets into the data that follows the
-- header), then the raw little-endian data. "__metadata__" holds
-- {"format": "moonflow"}.
--
-- Writes are atomic (src/io/file.c): the file is written under a temporary
-- name in the same directory, fsync'ed, renamed over the destination and the
-- directory fsync'ed, so a crash mid-write leaves the previous checkpoint
-- intact; the next save to that path removes the temporary file it left. The directory keeps
-- a small text file `checkpoint` in TensorFlow's format:
--   model_checkpoint_path: "model.ckpt-100"
--   all_model_checkpoint_paths: "model.ckpt-90"
--   all_model_checkpoint_paths: "model.ckpt-100"
-- naming the newest checkpoint last (paths relative to the directory).
--
-- Restoring reads and checks the whole file (header, offsets, every
-- variable's presence, dtype and shape) before it assigns anything; then one
-- run of the saver's restore op assigns every variable from placeholders fed
-- with the values (ops built once, when the saver is made, like TensorFlow's
-- save/restore_all).
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local fileio = require("moonflow.fileio")
local args = require("moonflow.args")
local C = core.C

local M = {}

local fail, options = core.fail, args.options

-- tf.train.Saver(var_list, {max_to_keep=, name=}); saver:save(sess, path, global_step).
local SAVER_OPTIONS = {"max_to_keep", "name", positional = 0, empty = true}
local SAVE_OPTIONS = {"global_step", empty = true}

local dirname, basename, exists = fileio.dirname, fileio.basename, fileio.exists
M.write_atomic = fileio.write_atomic

-- Reading checkpoints -----------------------------------------------------------------
-- Reads and checks a checkpoint (src/io/checkpoint.c). Returns {entries =
-- {name = {dtype, shape, index}}, handle = the mf_checkpoint}. Errors name
-- fname, the function reading, and say what is wrong with which file.
function M.read(path, fname)
  if type(path) ~= "string" then fail(fname .. ": a checkpoint path must be a string, got " .. type(path)) end
  local handle = C.mf_checkpoint_read(path, core.status)
  if handle == nil then fileio.fail_status(fname) end
  handle = ffi.gc(handle, C.mf_checkpoint_free)
  local entries = {}
  for i = 0, C.mf_checkpoint_num_entries(handle) - 1 do
    local t = C.mf_checkpoint_value(handle, i)
    local shape, dims = {}, C.mf_tensor_dims(t)
    for k = 0, C.mf_tensor_rank(t) - 1 do shape[k + 1] = tonumber(dims[k]) end
    entries[ffi.string(C.mf_checkpoint_name(handle, i))] =
      {dtype = core.by_enum[tonumber(C.mf_tensor_dtype(t))], shape = shape, index = i}
  end
  return {entries = entries, handle = handle, path = path}
end

-- The value of one entry as an Array (the value read from the file, shared).
function M.entry_value(ckpt, e)
  return Array.wrap(C.mf_tensor_retain(C.mf_checkpoint_value(ckpt.handle, e.index)))
end

-- The `checkpoint` index file of a directory --------------------------------------------
local function unquote(s)
  return (s:gsub('\\(.)', function(c) return c == "n" and "\n" or c end))
end
local function quote(s) return '"' .. s:gsub('[\\"]', "\\%0"):gsub("\n", "\\n") .. '"' end

-- {model_checkpoint_path =, all_model_checkpoint_paths = {...}} with paths as
-- written (relative to dir unless absolute), or nil without an index.
local function read_index(dir)
  local f = io.open(dir .. "/checkpoint", "rb")
  if not f then return nil end
  local state = {all_model_checkpoint_paths = {}}
  for line in f:lines() do
    local key, value = line:match('^%s*([%w_]+)%s*:%s*"(.*)"%s*$')
    if key == "model_checkpoint_path" then state.model_checkpoint_path = unquote(value)
    elseif key == "all_model_checkpoint_paths" then
      local all = state.all_model_checkpoint_paths
      all[#all + 1] = unquote(value)
    end
  end
  f:close()
  if not state.model_checkpoint_path then return nil end
  return state
end

local function resolve_in(dir, p)
  if p:sub(1, 1) == "/" then return p end
  return dir .. "/" .. p
end

local function write_index(dir, latest, all)
  local function rel(p) return dirname(p) == dir and basename(p) or p end
  local lines = {"model_checkpoint_path: " .. quote(rel(latest))}
  for _, p in ipairs(all) do lines[#lines + 1] = "all_model_checkpoint_paths: " .. quote(rel(p)) end
  M.write_atomic(dir .. "/checkpoint", {table.concat(lines, "\n") .. "\n"}, "Saver:save")
end

-- Saver ----------------------------------------------------------------------------------
local Saver = {}
Saver.__index = Saver
M.Saver = Saver

local is_variable = G.is_variable

return function(tf, ops)
  tf.train = tf.train or {}

  -- tf.train.Saver(var_list, {max_to_keep=, name=}): var_list is nil (every
  -- global variable), a list of variables (saved under their op names) or a
  -- map {name = variable}.
  function tf.train.Saver(var_list, ...)
    local rest = select("#", ...)
    if type(var_list) == "table" and getmetatable(var_list) == nil and var_list[1] == nil and rest == 0 then
      -- Saver({max_to_keep = 2}): an options table alone.
      local only_options = next(var_list) ~= nil
      for k, v in pairs(var_list) do
        if is_variable(v) or (k ~= "max_to_keep" and k ~= "name") then only_options = false end
      end
      if only_options then return tf.train.Saver(nil, var_list) end
    end
    local opts = options("tf.train.Saver", SAVER_OPTIONS, ...)
    local entries = {}
    local function add(name, v, where)
      if not is_variable(v) then
        fail("tf.train.Saver: " .. where .. " is not a variable: " .. tostring(v))
      end
      if entries[name] then fail("tf.train.Saver: the name '" .. name .. "' is given twice") end
      entries[name] = v
    end
    if var_list == nil then
      for i, v in ipairs(tf.global_variables()) do add(v.op.name, v, "global variable " .. i) end
    elseif type(var_list) ~= "table" or getmetatable(var_list) ~= nil then
      fail("tf.train.Saver: var_list must be a list of variables or a map {name = variable}")
    elseif var_list[1] ~= nil then
      for i, v in ipairs(var_list) do add(is_variable(v) and v.op.name or "?", v, "var_list[" .. i .. "]") end
    else
      for name, v in pairs(var_list) do
        if type(name) ~= "string" then fail("tf.train.Saver: var_list keys must be names (strings)") end
        add(name, v, "var_list['" .. name .. "']")
      end
    end
    local names = {}
    for name in pairs(entries) do names[#names + 1] = name end
    if #names == 0 then fail("tf.train.Saver: ValueError: No variables to save") end
    table.sort(names)
    local g = entries[names[1]].graph
    for _, name in ipairs(names) do
      if entries[name].graph ~= g then fail("tf.train.Saver: the variables are not all in one graph") end
    end
    local max_to_keep = opts.max_to_keep
    if max_to_keep == nil then max_to_keep = 5 end
    if type(max_to_keep) ~= "number" or max_to_keep < 0 or max_to_keep % 1 ~= 0 then
      fail("tf.train.Saver: max_to_keep must be a non-negative integer (0 keeps every checkpoint)")
    end
    local self = setmetatable({graph = g, names = names, vars = entries, max_to_keep = max_to_keep,
                               last_checkpoints = {}, _placeholders = {}}, Saver)
    -- The restore op: one placeholder and Assign per variable, grouped.
    g:as_default(function()
      tf.control_dependencies(nil, function()
        tf.name_scope(opts.name or "save", function()
          local assigns = {}
          for i, name in ipairs(names) do
            local v = entries[name]
            local dims = v:get_shape().dims
            local ph = tf.placeholder(v.dtype, dims, "restore_value")
            self._placeholders[i] = ph
            assigns[i] = tf.assign(v, ph, {validate_shape = dims ~= nil, name = "Assign"}).op
          end
          self.restore_op = tf.group(assigns, {name = "restore_all"})
        end)
      end)
    end)
    return self
  end

  function Saver:__tostring() return "<tf.train.Saver of " .. #self.names .. " variables>" end

  local function check_session(self, sess, what)
    if type(sess) ~= "table" or not sess.ptr then fail("Saver:" .. what .. "(sess, path): a session is required") end
    if sess.graph ~= self.graph then
      fail("Saver:" .. what .. ": the session runs another graph than the one of the saver's variables")
    end
  end

  -- saver:save(sess, path, global_step) or (sess, path, {global_step=}):
  -- writes the variables' values; returns the path written (path .. "-" ..
  -- step with a global step).
  function Saver:save(sess, path, ...)
    check_session(self, sess, "save")
    if type(path) ~= "string" or path == "" then fail("Saver:save: a path is required") end
    local step = options("Saver:save", SAVE_OPTIONS, ...).global_step
    if step ~= nil then
      if G.is_tensor(step) then step = sess:run(step) end
      if type(step) ~= "number" then fail("Saver:save: global_step must be a number or a scalar tensor") end
      -- It names the file (path-<step>): only an exact integer can.
      if step ~= step or step % 1 ~= 0 or math.abs(step) >= 2 ^ 53 then
        fail("Saver:save: global_step must be an integer (it names the file path-<step>), got " .. tostring(step))
      end
      path = string.format("%s-%d", path, step)
    end
    -- Under moonflow.mpi only rank 0 writes (core.writes_checkpoints).
    if not core.writes_checkpoints then return path end
    local n = #self.names
    local ports, values = core.ports(n), core.value_ptrs(n)
    for i, name in ipairs(self.names) do
      local v = self.vars[name]
      ports[i - 1].op, ports[i - 1].index = v.op.ptr, v.value_index
    end
    if C.mf_session_run(sess.ptr, nil, nil, 0, ports, values, n, nil, 0, core.status) ~= 0 then core.check() end
    local names = ffi.new("const char *[?]", n)
    for i, name in ipairs(self.names) do names[i - 1] = name end
    local code = C.mf_checkpoint_write(path, names, values, n, core.status)
    for i = 0, n - 1 do C.mf_tensor_release(values[i]) end
    if code ~= 0 then fileio.fail_status("Saver:save") end
    -- Bookkeeping: the newest last; older ones past max_to_keep are deleted.
    local kept = self.last_checkpoints
    for i = #kept, 1, -1 do if kept[i] == path then table.remove(kept, i) end end
    kept[#kept + 1] = path
    if self.max_to_keep > 0 then
      while #kept > self.max_to_keep do
        os.remove(table.remove(kept, 1))
      end
    end
    write_index(dirname(path), path, kept)
    return path
  end

  -- saver:recover_last_checkpoints(paths): takes over the checkpoints an
  -- earlier saver wrote (oldest first; those no longer on disk are left out),
  -- so that max_to_keep counts them and the index keeps listing them, as
  -- TensorFlow's Saver.recover_last_checkpoints.
  function Saver:recover_last_checkpoints(paths)
    if not args.is_plain(paths) then
      fail("Saver:recover_last_checkpoints: paths must be a list of checkpoint paths, got " .. args.describe(paths))
    end
    local kept = {}
    for i, p in ipairs(paths) do
      if type(p) ~= "string" then
        fail("Saver:recover_last_checkpoints: paths[" .. i .. "] is not a path: " .. args.describe(p))
      end
      if exists(p) then kept[#kept + 1] = p end
    end
    self.last_checkpoints = kept
  end

  -- saver:restore(sess, path): sets every variable of the saver from the file.
  function Saver:restore(sess, path)
    check_session(self, sess, "restore")
    if type(path) ~= "string" then
      fail("Saver:restore: a checkpoint path is required (tf.train.latest_checkpoint(dir) gave nil?)")
    end
    local ckpt = M.read(path, "Saver:restore")
    local missing = {}
    for _, name in ipairs(self.names) do
      if not ckpt.entries[name] then missing[#missing + 1] = name end
    end
    if #missing > 0 then
      fail(string.format("Saver:restore: NotFound: Key%s %s not found in checkpoint %s (%d of the saver's %d " ..
                         "variables); " ..
                         "restore a checkpoint saved from this model, or give the Saver a var_list of what it holds",
                         #missing > 1 and "s" or "", table.concat(missing, ", "), path, #missing, #self.names))
    end
    local feeds = {}
    for i, name in ipairs(self.names) do
      local v, e = self.vars[name], ckpt.entries[name]
      if e.dtype ~= v.dtype then
        fail(string.format("Saver:restore: InvalidArgument: checkpoint %s holds '%s' as %s but the variable %s is %s",
                           path, name, e.dtype.name, v.op.name, v.dtype.name))
      end
      local dims = v:get_shape().dims
      local same = dims == nil or #dims == #e.shape
      for k = 1, same and dims and #dims or 0 do
        if dims[k] >= 0 and dims[k] ~= e.shape[k] then same = false end
      end
      if not same then
        fail(string.format("Saver:restore: InvalidArgument: Assign requires shapes of both tensors to match: " ..
                           "checkpoint %s " ..
                           "holds '%s' with shape %s but the variable %s has shape %s", path, name,
                           tostring(G.TensorShape.new(e.shape)), v.op.name, tostring(v:get_shape())))
      end
      feeds[self._placeholders[i]] = M.entry_value(ckpt, e)
    end
    sess:run(self.restore_op, feeds)
  end

  -- tf.train.latest_checkpoint(dir): the newest checkpoint's path, or nil.
  function tf.train.latest_checkpoint(dir)
    dir = (dir or "."):gsub("/+$", "")
    if dir == "" then dir = "/" end
    local state = read_index(dir)
    if not state then return nil end
    local p = resolve_in(dir, state.model_checkpoint_path)
    return exists(p) and p or nil
  end

  -- tf.train.get_checkpoint_state(dir): {model_checkpoint_path=,
  -- all_model_checkpoint_paths=} with full paths, or nil.
  function tf.train.get_checkpoint_state(dir)
    dir = (dir or "."):gsub("/+$", "")
    local state = read_index(dir)
    if not state then return nil end
    state.model_checkpoint_path = resolve_in(dir, state.model_checkpoint_path)
    for i, p in ipairs(state.all_model_checkpoint_paths) do state.all_model_checkpoint_paths[i] = resolve_in(dir, p) end
    return state
  end

  -- tf.train.list_variables(path): {{name, shape}, ...} sorted by name.
  function tf.train.list_variables(path)
    local ckpt = M.read(path, "tf.train.list_variables")
    local out = {}
    for name, e in pairs(ckpt.entries) do out[#out + 1] = {name, e.shape} end
    table.sort(out, function(a, b) return a[1] < b[1] end)
    return out
  end

  -- tf.train.load_variable(path, name): the saved value as a tf.Array.
  function tf.train.load_variable(path, name)
    local ckpt = M.read(path, "tf.train.load_variable")
    local e = ckpt.entries[name]
    if not e then
      fail("tf.train.load_variable: NotFound: Key " .. tostring(name) .. " not found in checkpoint " .. path)
    end
    return M.entry_value(ckpt, e)
  end
end
