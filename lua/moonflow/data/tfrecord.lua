-- data/tfrecord.lua — tf.data.TFRecordDataset(filenames, {compression_type=,
-- skip_corrupt=}): one element per record, a string scalar, file after file.
-- A corrupt record is an error naming the file and the record's offset;
-- with skip_corrupt = true it is skipped instead (TensorFlow's
-- ignore_errors), and ds:skipped_records() counts the records skipped so far
-- by every iterator over the dataset. A corrupt length or a truncated end
-- ends its file, since nothing after it can be found.
local core = require("moonflow.core")
local args = require("moonflow.args")
local new_dataset = require("moonflow.data.dataset").new
local records = require("moonflow.tfrecord")
local fail = core.fail

local OPTIONS = {"compression_type", "skip_corrupt", "buffer_size", positional = 2, empty = true}

local M = {}

function M.TFRecordDataset(filenames, ...)
  local what = "TFRecordDataset"
  local opts = args.options(what, OPTIONS, ...)
  local paths = type(filenames) == "string" and {filenames} or filenames
  if not args.is_plain(paths) or #paths == 0 then
    fail(what .. ": filenames must be a file name or a list of them, got " .. args.describe(filenames))
  end
  for i, p in ipairs(paths) do
    if type(p) ~= "string" then fail(what .. ": filenames[" .. i .. "] must be a string, got " .. args.describe(p)) end
  end
  local compression = records.compression_of(opts.compression_type, what)
  local skip = args.check_bool(opts.skip_corrupt, what, "skip_corrupt") or false
  local skipped_before = 0  -- by readers closed already
  local open_readers = setmetatable({}, {__mode = "k"})
  local ds = new_dataset(what, 1, {{dtype = core.dtypes.string, shape = {}}}, function(ctx)
    local fi, reader = 0, nil
    local function close()
      if reader then
        reader.close()
        skipped_before = skipped_before + reader.skipped()
        open_readers[reader] = nil
        reader = nil
      end
    end
    if ctx and ctx.readers then ctx.readers[close] = true end
    return function()
      while true do
        if reader == nil then
          fi = fi + 1
          if paths[fi] == nil then return nil end
          reader = records.open_reader(paths[fi], compression, skip, what)
          open_readers[reader] = true
        end
        local record = reader.next()
        if record ~= nil then return {record} end
        close()
      end
    end
  end)
  -- Corrupt records skipped so far (skip_corrupt).
  function ds.skipped_records()
    local n = skipped_before
    for r in pairs(open_readers) do n = n + r.skipped() end
    return n
  end
  return ds
end

return M
