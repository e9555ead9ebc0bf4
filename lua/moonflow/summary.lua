-- summary.lua — TensorBoard summaries: the summary ops (tf.summary.scalar,
-- histogram, image, text, merge, merge_all), event files (tf.summary.FileWriter through
-- src/io/event_writer.c) and tf.train.summary_iterator reading them back.
local ffi = require("ffi")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local tfrecord = require("moonflow.tfrecord")
local C, fail = core.C, core.fail

local M = {}

local function status_error(fname)
  fail(fname .. ": " .. ffi.string(C.mf_status_message(core.status)))
end

-- TensorFlow's tag cleaning: characters other than letters, digits, '_',
-- '-', '.' and '/' become '_', and leading slashes go.
local function clean_tag(name)
  return (name:gsub("[^%w_%-%./]", "_"):gsub("^/+", ""))
end

local SUMMARY_OPTIONS = {"collections", "family"}

-- The API function of a summary op type: fn(name, tensor, {collections=,
-- family=}) builds the op in a new name scope named after `name` (made
-- unique, as TensorFlow's summary_scope), whose name is the tag; `family`
-- puts it under "family/". The op goes into the collections (default
-- `default_key`).
local function summary_function(fname, op_type, default_key, attrs_of)
  return function(name, tensor, ...)
    local opts = args.options(fname, attrs_of and attrs_of.options or SUMMARY_OPTIONS, ...)
    local attrs, extra = nil, {}
    if attrs_of then attrs, extra = attrs_of(fname, opts) end
    if type(name) ~= "string" or name == "" then
      fail(fname .. ": name must be a non-empty string, got " .. args.describe(name))
    end
    if opts.family ~= nil then
      if type(opts.family) ~= "string" then
        fail(fname .. ": family must be a string, got " .. args.describe(opts.family))
      end
      name = opts.family .. "/" .. name
    end
    if opts.collections ~= nil and not args.is_plain(opts.collections) then
      fail(fname .. ": collections must be a list of collection names, got " .. args.describe(opts.collections))
    end
    local x = G.convert(tensor)
    local g = G.get_default_graph()
    local op = G.in_name_scope(g, clean_tag(name), function()
      local tag = ffi.string(C.mf_graph_name_scope(g.ptr)):gsub("/$", "")
      local inputs = {G.convert(tag, core.dtypes.string), x}
      for _, input in ipairs(extra) do inputs[#inputs + 1] = G.convert(input, core.dtypes.string) end
      return G.op{op_type, inputs = inputs, attrs = attrs, name = op_type}
    end)
    for _, key in ipairs(opts.collections or {default_key}) do g:add_to_collection(key, op) end
    return op
  end
end

-- The options, attributes and string inputs after the tensor of summary ops
-- other than ScalarSummary and HistogramSummary.
-- ImageSummary: max_outputs (3), TensorFlow's third argument.
local image_attrs = setmetatable({options = {"max_outputs", "collections", "family"}}, {
  __call = function(_, fname, opts)
    local max_outputs = opts.max_outputs or 3
    if not args.is_integer(max_outputs) or max_outputs < 1 then
      fail(fname .. ": max_outputs must be an integer >= 1, got " .. args.describe(max_outputs))
    end
    return {max_images = G.attr.int(max_outputs)}, {}
  end})

-- The serialized SummaryMetadata naming a TensorBoard plugin.
local function plugin_metadata(plugin_name)
  local out, out_n = ffi.new("char*[1]"), ffi.new("size_t[1]")
  if C.mf_summary_plugin_metadata(plugin_name, out, out_n, core.status) ~= 0 then status_error("summary") end
  local bytes = ffi.string(out[0], out_n[0])
  C.mf_free_bytes(out[0])
  return bytes
end

-- TensorSummaryV2 of tf.summary.text: the text plugin's metadata.
local text_inputs = setmetatable({options = {"collections"}}, {
  __call = function() return nil, {plugin_metadata("text")} end})

-- The serialized Summary of scalars {tag = number, ...} (tags sorted), made
-- without a graph: what the Estimator writes of its loss and metrics.
function M.scalars(values)
  local tags = {}
  for tag, v in pairs(values) do if type(v) == "number" then tags[#tags + 1] = tag end end
  table.sort(tags)
  local n = #tags
  local ptrs, lengths, nums = ffi.new("const char*[?]", n + 1), ffi.new("size_t[?]", n + 1), ffi.new("double[?]", n + 1)
  for i, tag in ipairs(tags) do ptrs[i - 1], lengths[i - 1], nums[i - 1] = tag, #tag, values[tag] end
  local out, out_n = ffi.new("char*[1]"), ffi.new("size_t[1]")
  if C.mf_summary_scalars(n, ptrs, lengths, nums, out, out_n, core.status) ~= 0 then status_error("summary") end
  local bytes = ffi.string(out[0], out_n[0])
  C.mf_free_bytes(out[0])
  return bytes
end

local function install(tf)
  tf.summary = tf.summary or {}
  tf.train = tf.train or {}

  -- tf.summary.scalar(name, tensor, {collections=, family=}): a scalar string
  -- tensor holding a serialized Summary with the value of `tensor` (a real
  -- scalar) under the tag `name` (made unique in the graph, within the
  -- current name scope).
  tf.summary.scalar = summary_function("tf.summary.scalar", "ScalarSummary", tf.GraphKeys.SUMMARIES)

  -- tf.summary.histogram(name, values, {collections=, family=}): a histogram
  -- of all the values of a real tensor in TensorFlow's buckets.
  tf.summary.histogram = summary_function("tf.summary.histogram", "HistogramSummary", tf.GraphKeys.SUMMARIES)

  -- tf.summary.image(name, tensor, max_outputs = 3, {collections=, family=}):
  -- the first max_outputs images of a [batch, height, width, 1|3|4] uint8
  -- or float tensor as PNGs, tagged name/image/0... (name/image when
  -- max_outputs is 1); floats scaled into uint8 as TensorFlow does.
  tf.summary.image = summary_function("tf.summary.image", "ImageSummary", tf.GraphKeys.SUMMARIES, image_attrs)

  -- tf.summary.text(name, tensor, {collections=}): a string tensor of any
  -- shape for TensorBoard's text plugin (TensorSummaryV2).
  tf.summary.text = summary_function("tf.summary.text", "TensorSummaryV2", tf.GraphKeys.SUMMARIES, text_inputs)

  -- tf.summary.merge(inputs, {collections=, name=}): one Summary of all the
  -- values of a list of summary tensors (a tag twice is an error when run).
  local MERGE_OPTIONS = {"collections", "name"}
  function tf.summary.merge(inputs, ...)
    local fname = "tf.summary.merge"
    local opts = args.options(fname, MERGE_OPTIONS, ...)
    if not args.is_plain(inputs) or #inputs == 0 then
      fail(fname .. ": inputs must be a non-empty list of summary tensors, got " .. args.describe(inputs))
    end
    local parts = {}
    for i, x in ipairs(inputs) do parts[i] = G.convert(x, core.dtypes.string) end
    local op = G.op{"MergeSummary", inputs = parts, name = opts.name}
    for _, key in ipairs(opts.collections or {}) do G.get_default_graph():add_to_collection(key, op) end
    return op
  end

  -- tf.summary.merge_all(key = tf.GraphKeys.SUMMARIES): the merge of the
  -- summaries in collection `key`; nil when it holds none (as TensorFlow).
  function tf.summary.merge_all(key, ...)
    local opts = args.options("tf.summary.merge_all", {"name"}, ...)
    if type(key) == "table" then opts, key = args.options("tf.summary.merge_all", {"key", "name"}, key), nil end
    key = key or opts.key or tf.GraphKeys.SUMMARIES
    local list = G.get_default_graph():get_collection(key)
    if #list == 0 then return nil end
    return tf.summary.merge(list, {name = opts.name})
  end

  -- tf.summary.FileWriter(logdir, graph, {flush_secs=120, filename_suffix=,
  -- graph_def=}): a new event file in logdir (created when missing), with
  -- the graph (see add_graph) when one is given. add_summary(summary,
  -- global_step) takes the serialized Summary a summary op's run gave;
  -- events reach the file on flush, every flush_secs while adding, and on
  -- close (idempotent; a writer collected unclosed is closed then).
  local Writer = {}
  Writer.__index = Writer
  -- The GraphDef bytes of a graph (a tf.Graph) or given as they are
  -- (graph_def, a string): TensorBoard's graph. A graph with ops that
  -- TensorFlow's GraphDef cannot hold is an error listing them.
  local function graph_def_of(fname, graph, graph_def)
    if graph ~= nil and graph_def ~= nil then fail(fname .. ": give a graph or a graph_def, not both") end
    if graph_def ~= nil then
      if type(graph_def) ~= "string" then
        fail(fname .. ": graph_def must be serialized GraphDef bytes (a string), got " .. args.describe(graph_def))
      end
      return graph_def
    end
    if getmetatable(graph) ~= G.Graph then fail(fname .. ": graph must be a tf.Graph, got " .. args.describe(graph)) end
    local out, n = ffi.new("char *[1]"), ffi.new("size_t[1]")
    if C.mf_graphdef_serialize(graph.ptr, false, out, n, core.status) ~= 0 then
      fail(fname .. ": cannot write the graph for TensorBoard: " .. ffi.string(C.mf_status_message(core.status)))
    end
    local bytes = ffi.string(out[0], n[0])
    C.mf_free_bytes(out[0])
    return bytes
  end
  local function add_graph_def(w, graph_def, fname)
    if C.mf_event_writer_add_graph(w.ptr, graph_def, #graph_def, C.mf_wall_time(), core.status) ~= 0 then
      status_error(fname)
    end
  end
  local WRITER_OPTIONS = {"max_queue", "flush_secs", "filename_suffix", "graph_def", "session"}
  function tf.summary.FileWriter(logdir, graph, ...)
    local fname = "tf.summary.FileWriter"
    local opts = args.options(fname, WRITER_OPTIONS, ...)
    if type(logdir) ~= "string" or logdir == "" then
      fail(fname .. ": logdir must be a non-empty string, got " .. args.describe(logdir))
    end
    -- Exported before the file is made, so a graph that cannot be leaves none.
    local graph_def = (graph ~= nil or opts.graph_def ~= nil) and graph_def_of(fname, graph, opts.graph_def)
    local flush_secs = opts.flush_secs or 120
    if type(flush_secs) ~= "number" or flush_secs < 0 then
      fail(fname .. ": flush_secs must be a number >= 0, got " .. args.describe(flush_secs))
    end
    local suffix = opts.filename_suffix or ""
    if type(suffix) ~= "string" then
      fail(fname .. ": filename_suffix must be a string, got " .. args.describe(suffix))
    end
    local w = C.mf_event_writer_open(logdir, suffix, core.status)
    if w == nil then status_error(fname) end
    local writer = setmetatable({ptr = ffi.gc(w, C.mf_event_writer_free), logdir = logdir,
                                 path = ffi.string(C.mf_event_writer_path(w)), flush_secs = flush_secs,
                                 last_flush = C.mf_wall_time()}, Writer)
    if graph_def then add_graph_def(writer, graph_def, fname) end
    return writer
  end
  local function open_writer(w, what)
    if getmetatable(w) ~= Writer then fail("FileWriter:" .. what .. ": call it as a method (w:" .. what .. "(...))") end
    if w.ptr == nil then fail("FileWriter:" .. what .. ": the writer of " .. w.path .. " is closed") end
    return w.ptr
  end
  local function flush_if_due(w)
    local now = C.mf_wall_time()
    if now - w.last_flush >= w.flush_secs then
      w.last_flush = now
      if C.mf_event_writer_flush(w.ptr, core.status) ~= 0 then status_error("FileWriter:flush") end
    end
  end
  function Writer:add_summary(summary, global_step)
    local ptr = open_writer(self, "add_summary")
    if type(summary) ~= "string" then
      fail("FileWriter:add_summary: summary must be a serialized Summary (the string a summary op's run gives), " ..
           "got " .. args.describe(summary))
    end
    if global_step ~= nil and not args.is_integer(global_step) then
      fail("FileWriter:add_summary: global_step must be an integer, got " .. args.describe(global_step))
    end
    if C.mf_event_writer_add_summary(ptr, summary, #summary, global_step or 0, C.mf_wall_time(), core.status) ~= 0 then
      status_error("FileWriter:add_summary")
    end
    flush_if_due(self)
  end
  function Writer:add_event(event)
    local ptr = open_writer(self, "add_event")
    if type(event) ~= "string" then
      fail("FileWriter:add_event: event must be a serialized Event, got " .. args.describe(event))
    end
    if C.mf_event_writer_add_event(ptr, event, #event, core.status) ~= 0 then status_error("FileWriter:add_event") end
    flush_if_due(self)
  end
  -- w:add_graph(graph, {graph_def=}): the graph (or GraphDef bytes) as an
  -- event TensorBoard's graph view shows.
  function Writer:add_graph(graph, ...)
    local fname = "FileWriter:add_graph"
    open_writer(self, "add_graph")
    local opts = args.options(fname, {"graph_def"}, ...)
    add_graph_def(self, graph_def_of(fname, graph, opts.graph_def), fname)
    flush_if_due(self)
  end
  function Writer:flush()
    if C.mf_event_writer_flush(open_writer(self, "flush"), core.status) ~= 0 then status_error("FileWriter:flush") end
    self.last_flush = C.mf_wall_time()
  end
  function Writer:close()
    if getmetatable(self) == Writer and self.ptr == nil then return end  -- idempotent
    local ptr = open_writer(self, "close")
    self.ptr = nil
    if C.mf_event_writer_close(ffi.gc(ptr, nil), core.status) ~= 0 then status_error("FileWriter:close") end
  end
  function Writer:get_logdir() return self.logdir end
  Writer.__tostring = function(w) return "<tf.summary.FileWriter " .. w.path .. ">" end

  -- tf.summary.FileWriterCache.get(logdir): one FileWriter per log directory.
  local cache = {}
  tf.summary.FileWriterCache = {
    get = function(logdir)
      local w = cache[logdir]
      if not w or w.ptr == nil then
        w = tf.summary.FileWriter(logdir)
        cache[logdir] = w
      end
      return w
    end,
    clear = function()
      for _, w in pairs(cache) do w:close() end
      cache = {}
    end,
  }

  -- tf.train.summary_iterator(path): a Lua iterator over the events of an
  -- event file, as tables named as the Event message's fields: wall_time,
  -- step, and file_version, graph_def or summary = {value = {{tag=,
  -- simple_value= | histo={min, max, num, sum, sum_squares, bucket_limit,
  -- bucket} | image={height, width, colorspace, encoded_image_string} |
  -- tensor={shape, string_val},
  -- metadata={plugin_data={plugin_name=}}}...}}. A truncated last record (a
  -- writer that died in a write) ends the file quietly.
  function tf.train.summary_iterator(path)
    local fname = "tf.train.summary_iterator"
    local reader = tfrecord.open_reader(path, "", true, fname)
    return function()
      local record = reader.next()
      if record == nil then return nil end
      local e = C.mf_event_parse(record, #record, core.status)
      if e == nil then status_error(fname) end
      e = ffi.gc(e, C.mf_event_free)
      local event = {wall_time = C.mf_event_wall_time(e), step = tonumber(C.mf_event_step(e))}
      local version = C.mf_event_file_version(e)
      if version ~= nil then event.file_version = ffi.string(version) end
      local n = ffi.new("size_t[1]")
      local graph = C.mf_event_graph_def(e, n)
      if graph ~= nil then event.graph_def = ffi.string(graph, n[0]) end
      if C.mf_event_has_summary(e) then
        local values = {}
        for i = 0, C.mf_event_num_values(e) - 1 do
          local v = {tag = ffi.string(C.mf_event_value_tag(e, i))}
          local kind = C.mf_event_value_kind(e, i)
          if kind == C.MF_SUMMARY_SCALAR then
            v.simple_value = C.mf_event_value_scalar(e, i)
          elseif kind == C.MF_SUMMARY_HISTOGRAM then
            local h = ffi.new("mf_histogram")
            C.mf_event_value_histogram(e, i, h)
            local limits, counts = {}, {}
            for b = 0, tonumber(h.num_buckets) - 1 do
              limits[b + 1], counts[b + 1] = h.bucket_limit[b], h.bucket[b]
            end
            v.histo = {min = h.min, max = h.max, num = h.num, sum = h.sum, sum_squares = h.sum_squares,
                       bucket_limit = limits, bucket = counts}
          elseif kind == C.MF_SUMMARY_IMAGE then
            local hw = ffi.new("int[3]")
            local bytes = C.mf_event_value_image(e, i, hw, hw + 1, hw + 2, n)
            v.image = {height = hw[0], width = hw[1], colorspace = hw[2],
                       encoded_image_string = ffi.string(bytes, n[0])}
          elseif kind == C.MF_SUMMARY_TENSOR then
            local dims = ffi.new("int64_t[?]", C.MF_MAX_RANK)
            local shape = {}
            for d = 0, math.min(C.mf_event_value_tensor_shape(e, i, dims), C.MF_MAX_RANK) - 1 do
              shape[d + 1] = tonumber(dims[d])
            end
            local strings = {}
            for j = 0, tonumber(C.mf_event_value_tensor_num_strings(e, i)) - 1 do
              strings[j + 1] = ffi.string(C.mf_event_value_tensor_string(e, i, j, n), n[0])
            end
            v.tensor = {shape = shape, string_val = strings}
          end
          local plugin = C.mf_event_value_plugin(e, i)
          if plugin ~= nil then v.metadata = {plugin_data = {plugin_name = ffi.string(plugin)}} end
          values[#values + 1] = v
        end
        event.summary = {value = values}
      end
      C.mf_event_free(ffi.gc(e, nil))
      return event
    end
  end
end

return setmetatable(M, {__call = function(_, tf) install(tf) end})
