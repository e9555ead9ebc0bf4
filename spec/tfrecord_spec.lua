-- TFRecord files: moonflow's writer and reader against files TensorFlow
-- wrote (spec/fixtures/tfrecord/make.py), corrupt records, and
-- tf.data.TFRecordDataset.
local tf = require("moonflow")
local H = require("spec.helpers")

local FIXTURES = "spec/fixtures/tfrecord/"

-- The records make.py wrote.
local function fixture_records()
  local all = {}
  for i = 0, 255 do all[i + 1] = string.char(i) end
  return {"", "hello", table.concat(all), string.rep("x", 70000), "h\195\169llo w\195\182rld"}
end

local function read_all(path, options)
  local got = {}
  for r in tf.io.tf_record_iterator(path, options) do got[#got + 1] = r end
  return got
end

local function write_all(path, records, options)
  local w = tf.io.TFRecordWriter(path, options)
  for _, r in ipairs(records) do w:write(r) end
  w:close()
end

describe("TFRecord files", function()
  local dir
  before_each(function()
    tf.reset_default_graph()
    dir = H.tmpdir()
  end)

  it("reads the records TensorFlow wrote, plain, gzip and zlib", function()
    assert.same(fixture_records(), read_all(FIXTURES .. "records.tfrecord"))
    assert.same(fixture_records(), read_all(FIXTURES .. "records.tfrecord.zlib", "ZLIB"))
    assert.same(fixture_records(), read_all(FIXTURES .. "records.tfrecord.zlib", tf.io.TFRecordOptions("ZLIB")))
    assert.same(fixture_records(), read_all(FIXTURES .. "records.tfrecord.gz", "GZIP"))
    assert.same(fixture_records(), read_all(FIXTURES .. "records.tfrecord.gz", {compression_type = "GZIP"}))
  end)

  it("writes TensorFlow's bytes exactly (length, masked CRC-32C, data, masked CRC-32C)", function()
    write_all(dir .. "/r.tfrecord", fixture_records())
    assert.equal(H.read(FIXTURES .. "records.tfrecord"), H.read(dir .. "/r.tfrecord"))
    -- One record by hand: CRC-32C("123456789") is 0xE3069283 (RFC 3720's check value).
    write_all(dir .. "/one.tfrecord", {"123456789"})
    local bytes = H.read(dir .. "/one.tfrecord")
    local function u32(at) local a, b, c, d = bytes:byte(at, at + 3) return a + b * 256 + c * 65536 + d * 16777216 end
    local crc = 0xE3069283
    local masked = (bit.bor(bit.rshift(crc, 15), bit.lshift(crc, 17)) + 0xa282ead8) % 2 ^ 32
    if masked < 0 then masked = masked + 2 ^ 32 end
    assert.equal(9 + 8 + 4 + 4, #bytes)
    assert.equal("\9\0\0\0\0\0\0\0", bytes:sub(1, 8))
    assert.equal("123456789", bytes:sub(13, 21))
    assert.equal(masked, u32(22))
  end)

  it("round-trips gzip files, and writes crash-safely", function()
    local path = dir .. "/r.tfrecord.gz"
    write_all(path, fixture_records(), "GZIP")
    assert.equal("\31\139", H.read(path):sub(1, 2))  -- gzip's magic
    assert.same(fixture_records(), read_all(path, "GZIP"))
    -- An unclosed writer leaves nothing at its path; a closed one the file.
    local w = tf.python_io.TFRecordWriter(dir .. "/later.tfrecord")
    w:write("a")
    w:flush()
    assert.is_nil(io.open(dir .. "/later.tfrecord", "rb"))
    w:close()
    w:close()  -- idempotent
    assert.same({"a"}, read_all(dir .. "/later.tfrecord"))
    assert.truthy(H.error_of(w.write, w, "b"):find("TFRecordWriter:write: the writer of .* is closed"))
  end)

  it("round-trips zlib files, flushed mid-stream or not", function()
    local path = dir .. "/r.tfrecord.zlib"
    local w = tf.io.TFRecordWriter(path, {compression_type = "ZLIB"})
    for i, r in ipairs(fixture_records()) do
      w:write(r)
      if i == 2 then w:flush() end  -- a sync flush mid-stream keeps the stream whole
    end
    w:close()
    local bytes = H.read(path)
    assert.equal(0x78, bytes:byte(1))  -- zlib's header (deflate, 32K window)
    assert.equal(0, (bytes:byte(1) * 256 + bytes:byte(2)) % 31)
    assert.is_true(#bytes < 1000)  -- 70000 "x" compress
    assert.same(fixture_records(), read_all(path, "ZLIB"))
    local ds = tf.data.TFRecordDataset({path, FIXTURES .. "records.tfrecord.zlib"}, {compression_type = "ZLIB"})
    local it = ds:make_one_shot_iterator():get_next()
    local sess = tf.Session()
    for _ = 1, 2 do
      for _, want in ipairs(fixture_records()) do assert.equal(want, sess:run(it)) end
    end
    -- A stream cut short, or not zlib at all, is an error naming the file and offset.
    H.write(dir .. "/cut.zlib", bytes:sub(1, #bytes - 10))
    local err = H.error_of(read_all, dir .. "/cut.zlib", "ZLIB")
    assert.truthy(err:find("cut.zlib at offset %d+ failed %(the zlib stream is truncated%)"), err)
    H.write(dir .. "/plain.zlib", H.read(FIXTURES .. "records.tfrecord"))
    err = H.error_of(read_all, dir .. "/plain.zlib", "ZLIB")
    assert.truthy(err:find("plain.zlib at offset 0 failed (unknown compression method)", 1, true), err)
  end)

  it("names bad arguments", function()
    assert.truthy(H.error_of(tf.io.TFRecordWriter, dir .. "/x", "LZ4")
                    :find('compression_type must be "", "GZIP" or "ZLIB", got "LZ4"', 1, true))
    assert.truthy(H.error_of(tf.io.TFRecordWriter, "/nonexistent/dir/x")
                    :find("does not exist or is not writable", 1, true))
    assert.truthy(H.error_of(tf.io.tf_record_iterator, dir .. "/none"):find("No such file or directory", 1, true))
    local w = tf.io.TFRecordWriter(dir .. "/x")
    assert.truthy(H.error_of(w.write, w, 5):find("a record is a string of bytes, got 5", 1, true))
    w:close()
  end)

  describe("with corrupt records", function()
    -- records "aaaa", "bbbb", "cccc": each 4 + 16 bytes, at offsets 0, 20, 40.
    local function file_with(edit)
      local path = dir .. "/c.tfrecord"
      write_all(path, {"aaaa", "bbbb", "cccc"})
      local bytes = edit(H.read(path))
      H.write(path, bytes)
      return path
    end
    local function flip(bytes, at)
      return bytes:sub(1, at - 1) .. string.char(255 - bytes:byte(at)) .. bytes:sub(at + 1)
    end

    it("a bad data checksum is an error naming the file and offset, or a skipped record", function()
      local path = file_with(function(b) return flip(b, 20 + 12 + 1) end)  -- a byte of "bbbb"
      local it = tf.io.tf_record_iterator(path)
      assert.equal("aaaa", it())
      local err = H.error_of(it)
      assert.truthy(err:find("corrupted record at offset 20 of " .. path .. ": the data's checksum does not match", 1,
                             true), err)
      local ds = tf.data.TFRecordDataset(path, {skip_corrupt = true})
      local nxt = ds:make_one_shot_iterator():get_next()
      local sess = tf.Session()
      assert.equal("aaaa", sess:run(nxt))
      assert.equal("cccc", sess:run(nxt))
      assert.truthy(H.error_of(sess.run, sess, nxt):find("End of sequence", 1, true))
      assert.equal(1, ds.skipped_records())
      -- Without skipping, the dataset's run fails naming the file and offset.
      local strict = tf.data.TFRecordDataset(path):make_one_shot_iterator():get_next()
      assert.equal("aaaa", sess:run(strict))
      assert.truthy(H.error_of(sess.run, sess, strict):find("corrupted record at offset 20", 1, true))
    end)

    it("a bad length or a truncated file ends the file", function()
      local path = file_with(function(b) return flip(b, 20 + 2) end)  -- the length of record 2
      local it = tf.io.tf_record_iterator(path)
      assert.equal("aaaa", it())
      assert.truthy(H.error_of(it):find("offset 20 of .*: the length's checksum does not match"))
      local ds = tf.data.TFRecordDataset(path, {skip_corrupt = true})
      local nxt = ds:make_one_shot_iterator():get_next()
      local sess = tf.Session()
      assert.equal("aaaa", sess:run(nxt))
      assert.truthy(H.error_of(sess.run, sess, nxt):find("End of sequence", 1, true))
      assert.equal(1, ds.skipped_records())
      path = file_with(function(b) return b:sub(1, 50) end)  -- record 3 cut short
      local got = {}
      local cut = tf.io.tf_record_iterator(path)
      got[1], got[2] = cut(), cut()
      assert.same({"aaaa", "bbbb"}, got)
      assert.truthy(H.error_of(cut):find("corrupted record at offset 40 of .*: truncated record"))
    end)
  end)

  it("feeds tf.data pipelines: map and batch over TFRecordDataset", function()
    write_all(dir .. "/a.tfrecord", {"1,2", "3,4"})
    write_all(dir .. "/b.tfrecord.gz", {"5,6"}, "GZIP")
    local plain = tf.data.TFRecordDataset({dir .. "/a.tfrecord"})
    local pairs_ = tf.data.TFRecordDataset({dir .. "/a.tfrecord"}):map(function(line)
      local cols = tf.io.decode_csv(line, {{0}, {0}})
      return cols[1] + cols[2]
    end):batch(2)
    local sess = tf.Session()
    assert.same({3, 7}, sess:run(pairs_:make_one_shot_iterator():get_next()):totable())
    local gz = tf.data.TFRecordDataset(dir .. "/b.tfrecord.gz", "GZIP"):batch(2)
    assert.same({"5,6"}, sess:run(gz:make_one_shot_iterator():get_next()):totable())
    assert.equal(tf.string, plain:make_one_shot_iterator():get_next().dtype)
  end)
end)
