-- tf.train.Example through protobuf-c: building, serializing and parsing
-- messages, against bytes TensorFlow wrote (spec/fixtures/example/make.py),
-- and tf.io.parse_single_example / parse_example in a TFRecord pipeline.
local tf = require("moonflow")
local H = require("spec.helpers")

local FIXTURES = "spec/fixtures/example/"

local function floats(v) return tf.train.Feature{float_list = tf.train.FloatList{value = v}} end
local function int64s(v) return tf.train.Feature{int64_list = tf.train.Int64List{value = v}} end
local function bytes(v) return tf.train.Feature{bytes_list = tf.train.BytesList{value = v}} end

describe("tf.train.Example", function()
  before_each(function() tf.reset_default_graph() end)

  it("serializes one feature to TensorFlow's bytes", function()
    local ex = tf.train.Example{features = tf.train.Features{feature = {v = floats({1.5, 2.5})}}}
    assert.equal(H.read(FIXTURES .. "one.pb"), ex:SerializeToString())
  end)

  it("parses what TensorFlow wrote, and round-trips every kind", function()
    local back = tf.train.Example.FromString(H.read(FIXTURES .. "one.pb"))
    assert.same({1.5, 2.5}, back.features.feature.v.float_list.value)
    local ex = tf.train.Example{features = tf.train.Features{feature = {
      age = int64s({29, -2 ^ 40}), xs = floats({0.25, -2}), name = bytes({"bob", "x\0y", ""}), none = floats({}),
    }}}
    local f = tf.train.Example.FromString(ex:SerializeToString()).features.feature
    assert.same({29, -2 ^ 40}, f.age.int64_list.value)
    assert.same({0.25, -2}, f.xs.float_list.value)
    assert.same({"bob", "x\0y", ""}, f.name.bytes_list.value)
    assert.same({}, f.none.float_list.value)
  end)

  it("names bad messages", function()
    assert.truthy(H.error_of(tf.train.Feature, {float_list = {value = {1}}, int64_list = {value = {1}}})
                    :find("a feature holds one list", 1, true))
    assert.truthy(H.error_of(tf.train.Int64List, {value = {1.5}}):find("value[1] must be an integer, got 1.5", 1, true))
    assert.truthy(H.error_of(tf.train.BytesList, {value = {1}}):find("value[1] must be a string, got 1", 1, true))
    assert.truthy(H.error_of(tf.train.Example.FromString, "\255\255\255")
                    :find("Could not parse example input, value: '???'", 1, true))
  end)
end)

describe("parsing Examples in the graph", function()
  before_each(function() tf.reset_default_graph() end)

  local FEATURES = function()
    return {id = tf.io.FixedLenFeature({}, tf.int64), xy = tf.io.FixedLenFeature({2}, tf.float32),
            name = tf.io.FixedLenFeature({}, tf.string), tags = tf.io.VarLenFeature(tf.string),
            weight = tf.io.FixedLenFeature({1}, tf.float32, {0.5})}
  end

  it("parse_single_example reads TensorFlow's records through a TFRecordDataset pipeline", function()
    local ds = tf.data.TFRecordDataset(FIXTURES .. "examples.tfrecord"):map(function(record)
      local f = tf.io.parse_single_example(record, FEATURES())
      return {f.id, f.xy, f.name, tf.size(f.tags.values), f.weight}
    end)
    local nxt = ds:make_one_shot_iterator():get_next()
    local sess = tf.Session()
    for i = 0, 2 do
      local got = sess:run(nxt)
      assert.equal(i, got[1])
      assert.same({i * 0.5, -i}, got[2]:totable())
      assert.equal("ex" .. i, got[3])
      assert.equal(i, got[4])
      assert.same({0.5}, got[5]:totable())
    end
  end)

  it("parse_example parses a batch: dense values gain a batch dim, sparse ones batch indices", function()
    local records = {}
    for r in tf.io.tf_record_iterator(FIXTURES .. "examples.tfrecord") do records[#records + 1] = r end
    local f = tf.io.parse_example(records, FEATURES())
    assert.same({3, 2}, f.xy:get_shape():as_list())
    local got = tf.Session():run(f)
    assert.same({0, 1, 2}, got.id:totable())
    assert.same({{0, 0}, {0.5, -1}, {1, -2}}, got.xy:totable())
    assert.same({"ex0", "ex1", "ex2"}, got.name:totable())
    assert.same({{1, 0}, {2, 0}, {2, 1}}, got.tags.indices:totable())
    assert.same({"t0", "t0", "t1"}, got.tags.values:totable())
    assert.same({3, 2}, got.tags.dense_shape:totable())
  end)

  it("tf.sparse.to_dense fills what a VarLenFeature lacks", function()
    local records = {}
    for i = 0, 2 do
      local v = {}
      for k = 1, i do v[k] = k * 1.5 end
      records[i + 1] = tf.train.Example{features = tf.train.Features{feature = {v = floats(v)}}}:SerializeToString()
    end
    local p = tf.io.parse_example(records, {v = tf.io.VarLenFeature(tf.float32)})
    local sess = tf.Session()
    assert.same({{0, 0}, {1.5, 0}, {1.5, 3}}, sess:run(tf.sparse.to_dense(p.v)):totable())
    assert.same({{-1, -1}, {1.5, -1}, {1.5, 3}}, sess:run(tf.sparse.to_dense(p.v, -1)):totable())
    assert.truthy(H.error_of(tf.sparse.to_dense, {1}):find("sp_input must be a tf.SparseTensor", 1, true))
  end)

  it("names the feature and example that do not fit", function()
    local one = H.read(FIXTURES .. "one.pb")
    local sess = tf.Session()
    local function err(spec) return H.error_of(sess.run, sess, tf.io.parse_single_example(one, spec)) end
    assert.truthy(err({zz = tf.io.FixedLenFeature({}, tf.float32)})
                    :find("Feature: zz (data type: float) is required but could not be found.", 1, true))
    assert.truthy(err({v = tf.io.FixedLenFeature({2}, tf.int64)})
                    :find("Key: v, Index: 0.  Data types don't match. Data type: float but expected type: int64", 1,
                          true))
    assert.truthy(err({v = tf.io.FixedLenFeature({3}, tf.float32)})
                    :find("Number of float values != expected.  Values size: 2 but output shape: [3]", 1, true))
    assert.truthy(H.error_of(tf.io.parse_single_example, one, {v = tf.io.FixedLenFeature({2}, tf.int32)})
                    :find("Example features are float32, int64 or string", 1, true))
    -- The session stays usable.
    assert.same({1.5, 2.5}, sess:run(tf.io.parse_single_example(one, {v = tf.io.FixedLenFeature({2}, tf.float32)})).v
                              :totable())
  end)
end)
