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

-- A JSON array (value_of) after one byte choosing the placeholder it is fed to.
function M.feeds(bytes)
  if #bytes < 2 then return end
  local p = placeholders[bytes:byte(1) % #placeholders + 1]
  local v = value_of(bytes:sub(2))
  if v ~= nil then feed_session:run(p.y, {[p.x] = v}) end
end

return M
