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

-- A JSON array (value_of) after one byte choosing the placeholder it is fed to.
function M.feeds(bytes)
  if #bytes < 2 then return end
  local p = placeholders[bytes:byte(1) % #placeholders + 1]
  local v = value_of(bytes:sub(2))
  if v ~= nil then feed_session:run(p.y, {[p.x] = v}) end
end

return M
