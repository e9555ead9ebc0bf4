-- TensorBoard summaries: the summary ops (scalar, histogram, merge,
-- merge_all), event files written by tf.summary.FileWriter and read back
-- with tf.train.summary_iterator, and bad input.
local tf = require("moonflow")
local H = require("spec.helpers")

local DBL_MAX = 1.7976931348623157e308
-- The virtualenv of `make tensorboard-venv`.
local TENSORBOARD_PYTHON = (os.getenv("TENSORBOARD_VENV") or (os.getenv("HOME") .. "/.cache/moonflow/tensorboard-venv"))
                           .. "/bin/python3"

-- TensorFlow's positive bucket limits below 1e20 (histogram.cc: from 1e-12,
-- each 1.1 times the last), to find the buckets of hand-picked values.
local function positive_limits()
  local out, v = {}, 1.0e-12
  while v < 1.0e20 do
    out[#out + 1] = v
    v = v * 1.1
  end
  return out
end

local function events_of(dir)
  local files = H.files_in(dir)
  assert.equal(1, #files)
  assert.truthy(files[1]:match("^events%.out%.tfevents%.%d%d%d%d%d%d%d%d%d%d%."))
  local got = {}
  for e in tf.train.summary_iterator(dir .. "/" .. files[1]) do got[#got + 1] = e end
  return got, dir .. "/" .. files[1]
end

describe("tf.summary", function()
  local dir, sess
  before_each(function()
    tf.reset_default_graph()
    dir = H.tmpdir() .. "/logs/run1"  -- missing directories are made
    sess = tf.Session()
  end)

  it("writes scalars to an event file that summary_iterator reads back", function()
    local x = tf.placeholder(tf.float32, {})
    local s = tf.summary.scalar("loss", x)
    local merged = tf.summary.merge_all()
    local w = tf.summary.FileWriter(dir)
    for step = 1, 3 do w:add_summary(sess:run(merged, {[x] = step * 0.5}), step * 10) end
    w:close()
    w:close()  -- idempotent
    local events = events_of(dir)
    assert.equal(4, #events)
    assert.equal("brain.Event:2", events[1].file_version)
    assert.is_nil(events[1].summary)
    for i = 2, 4 do
      assert.equal((i - 1) * 10, events[i].step)
      assert.same({value = {{tag = "loss", simple_value = (i - 1) * 0.5}}}, events[i].summary)
      assert.truthy(math.abs(events[i].wall_time - os.time()) < 60)
    end
    assert.equal("loss/ScalarSummary", s.op.name)
  end)

  it("makes tags unique within the name scope, as TensorFlow's summary_scope", function()
    local a = tf.summary.scalar("acc", 1)
    local b = tf.summary.scalar("acc", 2)
    local c = tf.name_scope("eval", function() return tf.summary.scalar("acc", tf.constant(3, tf.int32)) end)
    local d = tf.summary.scalar("bad name!", 4.0, {family = "fam"})
    local tags = {}
    for _, t in ipairs({a, b, c, d}) do
      local w = tf.summary.FileWriter(dir)
      w:add_summary(sess:run(t), 1)
      w:close()
    end
    for _, f in ipairs(H.files_in(dir)) do
      for e in tf.train.summary_iterator(dir .. "/" .. f) do
        if e.summary then tags[#tags + 1] = e.summary.value[1].tag .. "=" .. e.summary.value[1].simple_value end
      end
    end
    table.sort(tags)
    assert.same({"acc=1", "acc_1=2", "eval/acc=3", "fam/bad_name_=4"}, tags)
  end)

  it("computes histograms in TensorFlow's buckets", function()
    local v = tf.constant({{-1, 0}, {0.5, 2}}, tf.float64)
    local w = tf.summary.FileWriter(dir)
    w:add_summary(sess:run(tf.summary.histogram("weights", v)), 7)
    w:flush()
    local events = events_of(dir)  -- flushed, readable before close
    w:close()
    local value = events[2].summary.value[1]
    assert.equal("weights", value.tag)
    local h = value.histo
    assert.same({-1, 2, 4, 1.5, 1 + 0 + 0.25 + 4}, {h.min, h.max, h.num, h.sum, h.sum_squares})
    -- The first limit above each value, runs of empty buckets merged into one.
    local pos = positive_limits()
    local function first_above(x)
      for i, l in ipairs(pos) do if l > x then return l, i end end
    end
    local function largest_below(x)
      local best, at
      for i, l in ipairs(pos) do if l < x then best, at = l, i end end
      return best, at
    end
    local below1, i1 = largest_below(1)
    assert.same({0, 1, 0, 1, 0, 1, 0, 1, 0}, h.bucket)
    assert.same({-pos[i1 + 1], -below1, 0, 1e-12, (largest_below(0.5)), first_above(0.5), (largest_below(2)),
                 first_above(2), DBL_MAX}, h.bucket_limit)
  end)

  it("keeps an empty histogram as one empty bucket", function()
    local w = tf.summary.FileWriter(dir)
    w:add_summary(sess:run(tf.summary.histogram("empty", tf.zeros({0}))), 1)
    w:close()
    local h = events_of(dir)[2].summary.value[1].histo
    assert.same({0, 0, 0}, {h.num, h.sum, h.sum_squares})
    assert.same({0}, h.bucket)
    assert.same({DBL_MAX}, h.bucket_limit)
  end)

  it("merges summaries, and merge_all reads the collections", function()
    local a = tf.summary.scalar("a", 1.5, {collections = {"mine"}})
    local b = tf.summary.scalar("b", 2.5, {collections = {"mine", "other"}})
    tf.summary.scalar("c", 3.5)
    assert.is_nil(tf.summary.merge_all("nothing"))
    local w = tf.summary.FileWriter(dir)
    w:add_summary(sess:run(tf.summary.merge_all("mine")), 1)
    w:add_summary(sess:run(tf.summary.merge({a, b, tf.summary.merge_all()})), 2)
    w:close()
    local events = events_of(dir)
    assert.same({{tag = "a", simple_value = 1.5}, {tag = "b", simple_value = 2.5}}, events[2].summary.value)
    assert.same({"a", "b", "c"}, {events[3].summary.value[1].tag, events[3].summary.value[2].tag,
                                  events[3].summary.value[3].tag})
    assert.equal(1, #tf.get_collection("other"))
  end)

  it("refuses bad input with TensorFlow's errors and the caller's line", function()
    local line = H.this_line() + 1
    local err = H.error_of(function() local _ = tf.summary.scalar("v", tf.constant({1, 2})) end)
    assert.truthy(err:find("tags and values not the same shape: [] != [2]", 1, true), err)
    assert.truthy(err:find("summary_spec.lua:" .. line, 1, true), err)
    err = H.error_of(tf.summary.scalar, "s", tf.constant("text"))
    assert.truthy(err:find("ScalarSummary", 1, true) and err:find("string", 1, true), err)
    err = H.error_of(tf.summary.scalar, "", 1)
    assert.truthy(err:find("tf.summary.scalar: name must be a non-empty string", 1, true), err)
    local nan = tf.summary.histogram("h", tf.constant({1, 0 / 0}))
    err = H.error_of(sess.run, sess, nan)
    assert.truthy(err:find("Nan in summary histogram for: h", 1, true), err)
    local inf = tf.summary.histogram("i", tf.constant({math.huge}))
    assert.truthy(H.error_of(sess.run, sess, inf):find("Infinity in summary histogram for: i", 1, true))
    local p = tf.placeholder(tf.string, {})
    local merged = tf.summary.merge({p, tf.summary.scalar("x", 1)})
    err = H.error_of(sess.run, sess, merged, {[p] = "\255\255not a summary"})
    assert.truthy(err:find("Could not parse one of the summary inputs", 1, true), err)
    local y = tf.summary.scalar("y", 1)
    local twice = tf.summary.merge({y, y})
    assert.truthy(H.error_of(sess.run, sess, twice):find("Duplicate tag", 1, true))
    assert.equal(1, sess:run(tf.constant(1)))  -- the session stays usable
  end)

  it("checks the FileWriter's arguments and state", function()
    local err = H.error_of(tf.summary.FileWriter, dir, tf.get_default_graph())
    assert.truthy(err:find("GraphDef exporter", 1, true), err)
    assert.truthy(H.error_of(tf.summary.FileWriter, 5):find("logdir must be a non-empty string", 1, true))
    local file = H.tmpdir() .. "/plain"
    H.write(file, "x")
    assert.truthy(H.error_of(tf.summary.FileWriter, file .. "/sub"):find("cannot create log directory", 1, true))
    local w = tf.summary.FileWriter(dir, nil, {filename_suffix = ".v2"})
    assert.truthy(w.path:match("%.v2$"))
    assert.truthy(H.error_of(w.add_summary, w, 5, 1):find("serialized Summary", 1, true))
    assert.truthy(H.error_of(w.add_summary, w, "\255\255", 1):find("no Summary", 1, true))
    assert.truthy(H.error_of(w.add_summary, w, "", 1.5):find("global_step must be an integer", 1, true))
    w:add_summary("", 3)  -- an empty Summary is a valid one
    w:close()
    assert.truthy(H.error_of(w.add_summary, w, "", 1):find("is closed", 1, true))
    local events = events_of(dir)
    assert.same({value = {}}, events[2].summary)
  end)

  it("stops quietly at a truncated last record (a writer that died mid-write)", function()
    local w = tf.summary.FileWriter(dir)
    w:add_summary(sess:run(tf.summary.scalar("a", 1)), 1)
    w:add_summary(sess:run(tf.summary.scalar("b", 2)), 2)
    w:close()
    local _, path = events_of(dir)
    local bytes = H.read(path)
    H.write(path, bytes:sub(1, #bytes - 5))
    local events = events_of(dir)
    assert.equal(2, #events)
    assert.equal("a", events[2].summary.value[1].tag)
  end)

  it("flushes on its own every flush_secs, and FileWriterCache keeps one writer per directory", function()
    local w = tf.summary.FileWriter(dir, nil, {flush_secs = 0})
    w:add_summary(sess:run(tf.summary.scalar("a", 1)), 1)
    assert.equal(2, #events_of(dir))  -- written without a flush or close
    w:close()
    local other = H.tmpdir()
    local c = tf.summary.FileWriterCache.get(other)
    assert.equal(c, tf.summary.FileWriterCache.get(other))
    tf.summary.FileWriterCache.clear()
    assert.is_nil(c.ptr)
  end)

  it("writes files that TensorBoard's own reader loads (tools/tensorboard_check.py)", function()
    local _, found = H.shell("'" .. TENSORBOARD_PYTHON .. "' -c 'import tensorboard' 2>/dev/null")
    if found ~= 0 then
      pending("tensorboard is not installed in " .. TENSORBOARD_PYTHON .. " (make tensorboard-venv installs it)")
      return
    end
    local x = tf.placeholder(tf.float32, {})
    tf.summary.scalar("loss", x)
    tf.name_scope("layer", function() tf.summary.histogram("w", tf.constant({{-1, 0}, {0.5, 2}})) end)
    local merged = tf.summary.merge_all()
    local w = tf.summary.FileWriter(dir)
    for step = 1, 3 do w:add_summary(sess:run(merged, {[x] = step * 0.25}), step * 5) end
    w:close()
    local out, status = H.shell("'" .. TENSORBOARD_PYTHON .. "' tools/tensorboard_check.py '" .. dir .. "' 2>/dev/null")
    assert.equal(0, status, out)
    local seen = require("moonflow.json").decode(out)
    assert.same({{5, 0.25}, {10, 0.5}, {15, 0.75}}, seen.scalars.loss)
    assert.is_false(seen.graph)
    local mine = events_of(dir)[2].summary.value[2].histo
    local h = seen.histograms["layer/w"]
    assert.equal(3, #h)
    assert.same({10, -1, 2, 4, 1.5, 5.25}, {h[2].step, h[2].min, h[2].max, h[2].num, h[2].sum, h[2].sum_squares})
    assert.same(mine.bucket, h[2].bucket)
    assert.same(mine.bucket_limit, h[2].bucket_limit)
  end)
end)

