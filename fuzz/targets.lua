-- fuzz/targets.lua — what fuzz/fuzz.c hands each input to: one function per
-- target, taking the input's bytes. A Lua error rejects the input; only
-- crashes and sanitizer reports count. Files are written to one temporary
-- path, reused by every input.
local tf = require("moonflow")

local path = os.tmpname()

local function as_file(bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

-- A nested list of numbers and booleans written as a JSON array
-- ("[[1, 2.5], [true, -3e2]]"), as a Lua list, or nil: only those characters
-- may appear, so once its brackets become braces the text is a Lua table
-- constructor that can neither call nor index anything (it runs in an empty
-- environment, where a name is nil).
local function value_of(text)
  if text:find("[^%d%s%.,%[%]%-+eEtrufals]") then return nil end
  local chunk = loadstring("return " .. text:gsub("%[", "{"):gsub("%]", "}"))
  if not chunk then return nil end
  local ok, v = pcall(setfenv(chunk, {}))
  return ok and v or nil
end

-- The feeds target's placeholders: the input's first byte picks one.
local feed_graph = tf.Graph()
local placeholders = feed_graph:as_default(function()
  local list = {}
  for _, spec in ipairs({{tf.float32}, {tf.float32, {-1, 2}}, {tf.int32, {3}}, {tf.uint8}, {tf.bool, {-1}},
                         {tf.int64, {2, -1, 1}}, {tf.float64, {}}}) do
    local x = tf.placeholder(spec[1], spec[2])
    list[#list + 1] = {x = x, y = tf.identity(x)}
  end
  return list
end)
local feed_session = tf.Session(feed_graph)

local M = {}

function M.checkpoint(bytes)
  local file = as_file(bytes)
  for _, entry in ipairs(tf.train.list_variables(file)) do tf.train.load_variable(file, entry[1]) end
end

function M.graph(bytes)
  tf.train.import_graph(as_file(bytes))
end

function M.npy(bytes)
  tf.io.read_npy(as_file(bytes))
end

-- Every record of the file as (float32, int64, int32) columns, at most 64 of them.
function M.csv(bytes)
  local g = tf.Graph()
  local next_record = g:as_default(function()
    local ds = tf.data.experimental.CsvDataset(as_file(bytes), {tf.float32, tf.int64, tf.int32})
    return ds:take(64):make_one_shot_iterator():get_next()
  end)
  local sess = tf.Session(g)
  while pcall(sess.run, sess, next_record) do end
  sess:close()
end

-- Every record of a TFRecord file, read plainly, as gzip or as zlib (the
-- first byte modulo 4 picks: 1 gzip, 2 zlib, else plain), strictly and
-- skipping corrupt records.
local TFRECORD_COMPRESSION = {[1] = "GZIP", [2] = "ZLIB"}
function M.tfrecord(bytes)
  if #bytes < 1 then return end
  local compression = TFRECORD_COMPRESSION[bytes:byte(1) % 4] or ""
  local file = as_file(bytes:sub(2))
  pcall(function() for _ in tf.io.tf_record_iterator(file, compression) do end end)
  local reader = require("moonflow.tfrecord").open_reader(file, compression, true, "fuzz")
  while reader.next() do end
end

-- A serialized tf.train.Example: parsed into Lua tables, and by ParseExample
-- for a float, an int64 and a string feature of any length.
local example_graph = tf.Graph()
local example_input, example_parsed = example_graph:as_default(function()
  local serialized = tf.placeholder(tf.string, {})
  return serialized, tf.io.parse_single_example(serialized, {
    v = tf.io.VarLenFeature(tf.float32), id = tf.io.FixedLenFeature({}, tf.int64, 0),
    name = tf.io.VarLenFeature(tf.string)})
end)
local example_session = tf.Session(example_graph)
function M.example(bytes)
  pcall(tf.train.Example.FromString, bytes)
  example_session:run(example_parsed, {[example_input] = bytes})
end

-- A serialized tf.train.SequenceExample: parsed into Lua tables, and by
-- ParseSequenceExample for context and feature list features of each kind.
local sequence_graph = tf.Graph()
local sequence_input, sequence_parsed = sequence_graph:as_default(function()
  local serialized = tf.placeholder(tf.string, {})
  return serialized, {tf.io.parse_single_sequence_example(serialized, {
    id = tf.io.FixedLenFeature({}, tf.int64, 0), tags = tf.io.VarLenFeature(tf.string)}, {
    tokens = tf.io.FixedLenSequenceFeature({}, tf.int64, true), v = tf.io.FixedLenSequenceFeature({2}, tf.float32, true),
    words = tf.io.VarLenFeature(tf.string), x = tf.io.VarLenFeature(tf.float32)})}
end)
local sequence_session = tf.Session(sequence_graph)
function M.sequence_example(bytes)
  pcall(tf.train.SequenceExample.FromString, bytes)
  sequence_session:run(sequence_parsed, {[sequence_input] = bytes})
end

-- Image decoders fed the input as contents: each variant runs (the first
-- one's error is caught, so the second runs too), exercising libpng's and
-- libjpeg's conversions as well as their parsers.
local image_graph = tf.Graph()
local image_input, png_variants, jpeg_variants = image_graph:as_default(function()
  local contents = tf.placeholder(tf.string, {})
  return contents, {tf.image.decode_png(contents), tf.image.decode_png(contents, 4)},
         {tf.image.decode_jpeg(contents), tf.image.decode_jpeg(contents, {channels = 1, ratio = 2,
           fancy_upscaling = false, try_recover_truncated = true, dct_method = "INTEGER_ACCURATE"})}
end)
local image_session = tf.Session(image_graph)
local function decode_all(variants, bytes)
  pcall(image_session.run, image_session, variants[1], {[image_input] = bytes})
  image_session:run(variants[2], {[image_input] = bytes})
end
function M.decode_png(bytes) decode_all(png_variants, bytes) end
function M.decode_jpeg(bytes) decode_all(jpeg_variants, bytes) end

-- A binary GraphDef imported into a new graph, which is then written back as one.
function M.graphdef(bytes)
  tf.Graph():as_default(function()
    if pcall(tf.import_graph_def, bytes, {name = ""}) then tf.get_default_graph():as_graph_def() end
  end)
end

-- A serialized Summary: merged with a scalar summary by MergeSummary, added
-- to an event file, and read back as one Event (summary_iterator) from a
-- record file holding the bytes.
local summary_graph = tf.Graph()
local summary_input, summary_merged = summary_graph:as_default(function()
  local serialized = tf.placeholder(tf.string, {})
  return serialized, tf.summary.merge({serialized, tf.summary.scalar("fuzz", 1)})
end)
local summary_session = tf.Session(summary_graph)
local summary_writer = tf.summary.FileWriter(os.tmpname() .. ".d")
function M.summary(bytes)
  pcall(summary_session.run, summary_session, summary_merged, {[summary_input] = bytes})
  pcall(summary_writer.add_summary, summary_writer, bytes, 1)
  local file = os.tmpname()
  local w = tf.io.TFRecordWriter(file)
  w:write(bytes)
  w:close()
  pcall(function() for _ in tf.train.summary_iterator(file) do end end)
  os.remove(file)
end

-- A JSON array (value_of) after one byte choosing the placeholder it is fed to.
function M.feeds(bytes)
  if #bytes < 2 then return end
  local p = placeholders[bytes:byte(1) % #placeholders + 1]
  local v = value_of(bytes:sub(2))
  if v ~= nil then feed_session:run(p.y, {[p.x] = v}) end
end

return M
