-- TensorBoard summaries: the summary ops (scalar, histogram, image, text,
-- merge, merge_all), event files written by tf.summary.FileWriter and read back
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

  it("writes images as PNGs under TensorFlow's tags, uint8 as they are", function()
    -- 3 RGB images of 2 x 3 pixels, each pixel (b, row, col) = {10b + 3row + col, 100 + b, 255 - col}.
    local batch = {}
    for b = 0, 2 do
      local image = {}
      for row = 0, 1 do
        image[row + 1] = {}
        for col = 0, 2 do image[row + 1][col + 1] = {10 * b + 3 * row + col, 100 + b, 255 - col} end
      end
      batch[b + 1] = image
    end
    local x = tf.constant(batch, tf.uint8)
    local two = tf.summary.image("img", x, 2)
    local one = tf.summary.image("single", x, {max_outputs = 1, family = "fam"})
    local w = tf.summary.FileWriter(dir)
    w:add_summary(sess:run(tf.summary.merge({two, one, tf.summary.image("gray", tf.ones({4, 1, 5, 1}, tf.uint8))})), 3)
    w:close()
    local values = events_of(dir)[2].summary.value
    local tags = {}
    for i, v in ipairs(values) do tags[i] = v.tag end
    assert.same({"img/image/0", "img/image/1", "fam/single/image", "gray/image/0", "gray/image/1", "gray/image/2"},
                tags)
    for i, b in ipairs({1, 2, 1}) do
      local im = values[i].image
      assert.same({2, 3, 3}, {im.height, im.width, im.colorspace})
      assert.equal("\137PNG", im.encoded_image_string:sub(1, 4))
      H.assert_values(batch[b], H.value(tf.image.decode_png(im.encoded_image_string)))
    end
    assert.same({1, 5, 1}, {values[4].image.height, values[4].image.width, values[4].image.colorspace})
    H.assert_values({{{1}, {1}, {1}, {1}, {1}}}, H.value(tf.image.decode_png(values[6].image.encoded_image_string)))
  end)

  it("scales float images into uint8 as TensorFlow's ImageSummary, non-finite pixels red", function()
    local cases = {
      -- none negative: v * 255 / max, truncated
      {{{{0}, {0.5}}, {{1}, {2}}}, {{{0}, {63}}, {{127}, {255}}}, tf.float32},
      -- some negative: v * 127 / max|v| + 128, truncated
      {{{{-1}, {0.5}}, {{0}, {1}}}, {{{1}, {191}}, {{128}, {255}}}, tf.float64},
      -- all zero (max below 1e-6): zero
      {{{{0}, {1e-7}}}, {{{0}, {0}}}, tf.float32},
      -- a pixel with a NaN sample is red; the others scale by the finite ones
      {{{{0 / 0, 0, 0}, {0.25, 0.5, 1}}}, {{{255, 0, 0}, {63, 127, 255}}}, tf.float32},
    }
    for i, case in ipairs(cases) do
      local w = tf.summary.FileWriter(dir .. i)
      w:add_summary(sess:run(tf.summary.image("f", tf.constant({case[1]}, case[3]))), 1)
      w:close()
      local files = H.files_in(dir .. i)
      local png
      for e in tf.train.summary_iterator(dir .. i .. "/" .. files[1]) do
        if e.summary then png = e.summary.value[1].image.encoded_image_string end
      end
      H.assert_values(case[2], H.value(tf.image.decode_png(png)))
    end
  end)

  it("writes text as a string tensor for TensorBoard's text plugin", function()
    local p = tf.placeholder(tf.string, {-1, 2})
    local t = tf.summary.text("notes", p)
    local s = tf.summary.text("scalar", "**hello**")
    assert.equal("notes/TensorSummaryV2", t.op.name)
    local w = tf.summary.FileWriter(dir)
    w:add_summary(sess:run(tf.summary.merge({t, s}), {[p] = {{"a", "b c"}, {"", "d\0e"}}}), 4)
    w:close()
    local values = events_of(dir)[2].summary.value
    assert.same({tag = "notes", metadata = {plugin_data = {plugin_name = "text"}},
                 tensor = {shape = {2, 2}, string_val = {"a", "b c", "", "d\0e"}}}, values[1])
    assert.same({tag = "scalar", metadata = {plugin_data = {plugin_name = "text"}},
                 tensor = {shape = {}, string_val = {"**hello**"}}}, values[2])
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
    err = H.error_of(tf.summary.image, "im", tf.zeros({2, 2, 2}))
    assert.truthy(err:find("ImageSummary: Tensor must be 4-D with last dim 1, 3, or 4, not [2,2,2]", 1, true), err)
    err = H.error_of(tf.summary.image, "im", tf.zeros({1, 2, 2, 2}))
    assert.truthy(err:find("not [1,2,2,2]", 1, true), err)
    err = H.error_of(tf.summary.image, "im", tf.zeros({1, 2, 2, 1}, tf.int32))
    assert.truthy(err:find("ImageSummary", 1, true) and err:find("int32", 1, true), err)
    err = H.error_of(tf.summary.image, "im", tf.zeros({1, 2, 2, 1}), 0)
    assert.truthy(err:find("tf.summary.image: max_outputs must be an integer >= 1, got 0", 1, true), err)
    local any = tf.placeholder(tf.float32)
    err = H.error_of(sess.run, sess, tf.summary.image("im", any), {[any] = {1, 2}})
    assert.truthy(err:find("ImageSummary: Tensor must be 4-D with last dim 1, 3, or 4, not [2]", 1, true), err)
    err = H.error_of(tf.summary.text, "t", tf.constant({1.5}))
    assert.truthy(err:find("TensorSummaryV2", 1, true) and err:find("float32", 1, true), err)
    assert.truthy(H.error_of(tf.summary.text, "t", "x", {family = "f"}):find("unknown option 'family'", 1, true))
    local y = tf.summary.scalar("y", 1)
    local twice = tf.summary.merge({y, y})
    assert.truthy(H.error_of(sess.run, sess, twice):find("Duplicate tag", 1, true))
    assert.equal(1, sess:run(tf.constant(1)))  -- the session stays usable
  end)

  it("checks the FileWriter's arguments and state", function()
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

  it("writes the graph as TensorFlow's GraphDef, and refuses one that has none", function()
    local x = tf.placeholder(tf.float32, {2}, "x")
    tf.summary.scalar("total", tf.reduce_sum(x * 2))
    tf.summary.merge_all()
    local g = tf.get_default_graph()
    local w = tf.summary.FileWriter(dir, g)
    w:add_graph(nil, {graph_def = "raw bytes"})
    w:close()
    local events = events_of(dir)
    assert.equal(3, #events)
    assert.equal(g:as_graph_def(), events[2].graph_def)
    assert.equal("raw bytes", events[3].graph_def)
    -- The bytes read back load as a graph of the same ops.
    tf.reset_default_graph()
    tf.import_graph_def(events[2].graph_def, {name = ""})
    local types = {}
    for _, op in ipairs(tf.get_default_graph():get_operations()) do types[op.type] = true end
    assert.truthy(types.ScalarSummary and types.MergeSummary and types.Sum and types.Placeholder)
    -- A While has no TensorFlow GraphDef form: a clear error, and no event file is left.
    local other = H.tmpdir() .. "/loop"
    tf.while_loop(function(i) return tf.less(i, 3) end, function(i) return i + 1 end, {tf.constant(0)})
    local line = H.this_line() + 1
    local err = H.error_of(function() local _ = tf.summary.FileWriter(other, tf.get_default_graph()) end)
    assert.truthy(err:find("tf.summary.FileWriter: cannot write the graph for TensorBoard: the graph has ops " ..
                           "that cannot be written as a TensorFlow GraphDef: While (1)", 1, true), err)
    assert.truthy(err:find("summary_spec.lua:" .. line, 1, true), err)
    assert.is_nil(io.open(other, "r"))
    local w2 = tf.summary.FileWriter(other)
    err = H.error_of(w2.add_graph, w2, tf.get_default_graph())
    assert.truthy(err:find("FileWriter:add_graph: cannot write the graph", 1, true), err)
    assert.truthy(H.error_of(w2.add_graph, w2, 5):find("graph must be a tf.Graph", 1, true))
    assert.truthy(H.error_of(w2.add_graph, w2, g, {graph_def = "x"}):find("not both", 1, true))
    w2:close()
    assert.equal(1, #events_of(other))
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
    tf.summary.image("picture", tf.zeros({2, 4, 7, 3}), 1)
    tf.summary.text("note", tf.constant({"step", "é"}))
    local merged = tf.summary.merge_all()
    local w = tf.summary.FileWriter(dir, tf.get_default_graph())
    for step = 1, 3 do w:add_summary(sess:run(merged, {[x] = step * 0.25}), step * 5) end
    w:close()
    local out, status = H.shell("'" .. TENSORBOARD_PYTHON .. "' tools/tensorboard_check.py '" .. dir .. "' 2>/dev/null")
    assert.equal(0, status, out)
    local seen = require("moonflow.json").decode(out)
    assert.same({{5, 0.25}, {10, 0.5}, {15, 0.75}}, seen.scalars.loss)
    assert.is_true(seen.graph)
    local names = {}
    for _, op in ipairs(tf.get_default_graph():get_operations()) do names[#names + 1] = op.name end
    table.sort(names)
    assert.same(names, seen.graph_nodes)
    local mine = events_of(dir)[3].summary.value[2].histo
    local h = seen.histograms["layer/w"]
    assert.equal(3, #h)
    assert.same({10, -1, 2, 4, 1.5, 5.25}, {h[2].step, h[2].min, h[2].max, h[2].num, h[2].sum, h[2].sum_squares})
    assert.same(mine.bucket, h[2].bucket)
    assert.same(mine.bucket_limit, h[2].bucket_limit)
    assert.same({{5, 7, 4}, {10, 7, 4}, {15, 7, 4}}, seen.images["picture/image"])
    assert.same({step = 15, shape = {2}, strings = {"step", "é"}}, seen.text.note[3])
  end)

  it("writes a training graph TensorBoard's reader loads, gradient and optimizer ops included", function()
    local _, found = H.shell("'" .. TENSORBOARD_PYTHON .. "' -c 'import tensorboard' 2>/dev/null")
    if found ~= 0 then
      pending("tensorboard is not installed in " .. TENSORBOARD_PYTHON .. " (make tensorboard-venv installs it)")
      return
    end
    local x = tf.placeholder(tf.float32, {-1, 4, 4, 1}, "x")
    local h = tf.layers.max_pooling2d(tf.layers.conv2d(x, 2, 3, {activation = tf.nn.relu}), 2, 1)
    local loss = tf.reduce_mean(tf.square(tf.layers.dense(tf.reshape(h, {-1, 2}), 1) - 1))
    tf.train.AdamOptimizer(0.1):minimize(loss, {name = "train"})
    local w = tf.summary.FileWriter(dir, tf.get_default_graph())
    w:close()
    local out, status = H.shell("'" .. TENSORBOARD_PYTHON .. "' tools/tensorboard_check.py '" .. dir .. "' 2>/dev/null")
    assert.equal(0, status, out)
    local seen = require("moonflow.json").decode(out)
    -- Every op is a node (and constant inputs, Mean/reduction_indices say, are nodes of their own).
    for _, op in ipairs(tf.get_default_graph():get_operations()) do
      assert.equal(op.type == "SumToShape" and "MoonflowSumToShape" or op.type == "Add" and "AddV2" or op.type,
                   seen.graph_ops[op.name], op.name)
    end
    assert.equal("Const", seen.graph_ops["Mean/reduction_indices"])
    local types = {}
    for _, op in pairs(seen.graph_ops) do types[op] = true end
    for _, op in ipairs({"ApplyAdam", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MaxPoolGrad", "ReluGrad",
                         "BiasAddGrad", "RandomUniform", "MoonflowSumToShape"}) do
      assert.is_true(types[op], op)
    end
    assert.equal("ApplyAdam", seen.graph_ops["train/update_dense/kernel/ApplyAdam"])
  end)
end)

