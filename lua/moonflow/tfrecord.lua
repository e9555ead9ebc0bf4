-- tfrecord.lua — TFRecord files (src/io/tfrecord.c): tf.io.TFRecordWriter,
-- tf.io.tf_record_iterator (also under tf.python_io) and the reader that
-- tf.data.TFRecordDataset (data/tfrecord.lua) pulls records from.
local ffi = require("ffi")
local core = require("moonflow.core")
local args = require("moonflow.args")
local C, fail = core.C, core.fail

local M = {}

-- The compression type of an options argument: nil, "", "GZIP" or "ZLIB", or a
-- table {compression_type=} (TensorFlow's TFRecordOptions); `fname` names the caller.
function M.compression_of(options, fname)
  local c = options
  if args.is_plain(options) then
    for k in pairs(options) do
      if k ~= "compression_type" then
        fail(fname .. ": unknown option '" .. tostring(k) .. "' (expected compression_type)")
      end
    end
    c = options.compression_type
  end
  if c == nil then return "" end
  if type(c) ~= "string" then fail(fname .. ": compression_type must be \"\", \"GZIP\" or \"ZLIB\", got " .. args.describe(c)) end
  return c
end

local function status_error(fname)
  fail(fname .. ": " .. ffi.string(C.mf_status_message(core.status)))
end

-- A reader of one file: next() gives the next record as a Lua string, nil at
-- the end; corrupt records are errors naming the file and offset unless
-- skip_corrupt (then skipped() counts them). close() is idempotent.
function M.open_reader(path, compression, skip_corrupt, fname)
  if type(path) ~= "string" then fail(fname .. ": a file name must be a string, got " .. args.describe(path)) end
  local r = C.mf_record_reader_open(path, compression, skip_corrupt and true or false, core.status)
  if r == nil then status_error(fname) end
  r = ffi.gc(r, C.mf_record_reader_free)
  local data, n = ffi.new("const char*[1]"), ffi.new("size_t[1]")
  local reader = {}
  function reader.next()
    if r == nil then return nil end
    local code = C.mf_record_reader_next(r, data, n, core.status)
    if code == C.MF_OUT_OF_RANGE then
      reader.close()
      return nil
    end
    if code ~= 0 then status_error(fname) end
    return ffi.string(data[0], n[0])
  end
  function reader.skipped() return r ~= nil and tonumber(C.mf_record_reader_skipped(r)) or reader.last_skipped end
  function reader.close()
    if r ~= nil then
      reader.last_skipped = tonumber(C.mf_record_reader_skipped(r))
      C.mf_record_reader_free(ffi.gc(r, nil))
      r = nil
    end
  end
  return reader
end

-- Installs the tf functions (init.lua calls the module).
local function install(tf)
  tf.io = tf.io or {}
  tf.python_io = tf.python_io or {}

  -- tf.io.TFRecordWriter(path, options): options is "", "GZIP", "ZLIB" or
  -- {compression_type=}. w:write(bytes), w:flush(), w:close(): the file
  -- appears at path (crash-safely, all at once) when it is closed; a writer
  -- collected unclosed leaves path as it was.
  local Writer = {}
  Writer.__index = Writer
  function tf.io.TFRecordWriter(path, options)
    local fname = "tf.io.TFRecordWriter"
    if type(path) ~= "string" then fail(fname .. ": path must be a string, got " .. args.describe(path)) end
    local w = C.mf_record_writer_open(path, M.compression_of(options, fname), core.status)
    if w == nil then status_error(fname) end
    return setmetatable({ptr = ffi.gc(w, C.mf_record_writer_abandon), path = path}, Writer)
  end
  local function open_writer(w, what)
    if getmetatable(w) ~= Writer then
      fail("TFRecordWriter:" .. what .. ": call it as a method (w:" .. what .. "(...))")
    end
    if w.ptr == nil then fail("TFRecordWriter:" .. what .. ": the writer of " .. w.path .. " is closed") end
    return w.ptr
  end
  function Writer:write(record)
    local ptr = open_writer(self, "write")
    if type(record) ~= "string" then
      fail("TFRecordWriter:write: a record is a string of bytes, got " .. args.describe(record))
    end
    if C.mf_record_writer_write(ptr, record, #record, core.status) ~= 0 then status_error("TFRecordWriter:write") end
  end
  function Writer:flush()
    if C.mf_record_writer_flush(open_writer(self, "flush"), core.status) ~= 0 then
      status_error("TFRecordWriter:flush")
    end
  end
  function Writer:close()
    if getmetatable(self) == Writer and self.ptr == nil then return end  -- idempotent
    local ptr = open_writer(self, "close")
    self.ptr = nil
    if C.mf_record_writer_close(ffi.gc(ptr, nil), core.status) ~= 0 then status_error("TFRecordWriter:close") end
  end
  tf.python_io.TFRecordWriter = tf.io.TFRecordWriter

  -- tf.io.tf_record_iterator(path, options): a Lua iterator over the records
  -- of one file (for record in tf.io.tf_record_iterator(p) do ... end).
  function tf.io.tf_record_iterator(path, options)
    local fname = "tf.io.tf_record_iterator"
    return M.open_reader(path, M.compression_of(options, fname), false, fname).next
  end
  tf.python_io.tf_record_iterator = tf.io.tf_record_iterator
  tf.io.TFRecordCompressionType = {NONE = "", GZIP = "GZIP", ZLIB = "ZLIB"}
  tf.python_io.TFRecordCompressionType = tf.io.TFRecordCompressionType
  tf.io.TFRecordOptions = function(compression_type) return {compression_type = compression_type} end
  tf.python_io.TFRecordOptions = tf.io.TFRecordOptions
end

return setmetatable(M, {__call = function(_, tf) install(tf) end})
