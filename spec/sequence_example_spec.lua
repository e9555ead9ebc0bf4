-- tf.train.SequenceExample through protobuf-c: building, serializing and
-- parsing messages against bytes TensorFlow wrote, and
-- tf.io.parse_single_sequence_example / parse_sequence_example against what
-- TensorFlow's parsers gave for the same records
-- (spec/fixtures/sequence_example/make.py).
local tf = require("moonflow")
local json = require("moonflow.json")
local H = require("spec.helpers")

local FIXTURES = "spec/fixtures/sequence_example/"

local function floats(v) return tf.train.Feature{float_list = tf.train.FloatList{value = v}} end
local function int64s(v) return tf.train.Feature{int64_list = tf.train.Int64List{value = v}} end
local function bytes(v) return tf.train.Feature{bytes_list = tf.train.BytesList{value = v}} end

-- The specs of make.py's CONTEXT and SEQUENCE.
local function CONTEXT()
  return {id = tf.io.FixedLenFeature({}, tf.int64), label = tf.io.FixedLenFeature({}, tf.string),
          weight = tf.io.FixedLenFeature({2}, tf.float32, {0.25, 4}), tags = tf.io.VarLenFeature(tf.string)}
end
local function SEQUENCE()
  return {tokens = tf.io.FixedLenSequenceFeature({}, tf.int64), frames = tf.io.FixedLenSequenceFeature({2}, tf.float32),
          marks = tf.io.FixedLenSequenceFeature({}, tf.string, true), words = tf.io.VarLenFeature(tf.string)}
end

local function expected() return json.decode(H.read(FIXTURES .. "expected.json")) end
local function records()
  local r = {}
  for record in tf.io.tf_record_iterator(FIXTURES .. "sequences.tfrecord") do r[#r + 1] = record end
  return r
end

-- Fetched values (a table of name -> array, string or tf.SparseTensorValue)
-- against TensorFlow's (make.py's plain: strings flat, sparse as three lists).
local function assert_like(want, got)
  for name, w in pairs(want) do
    local g = got[name]
    assert.is_not_nil(g, name)
    if type(w) == "table" and w.indices then
      assert.same(w.indices, g.indices:totable(), name)
      assert.same(w.values, g.values:totable(), name)
      assert.same(w.dense_shape, g.dense_shape:totable(), name)
    elseif type(w) == "table" then
      assert.same(H.flat(w), H.flat(g), name)
    else
      assert.equal(w, g, name)
    end
  end
end

describe("tf.train.SequenceExample", function()
  before_each(function() tf.reset_default_graph() end)

  it("serializes to TensorFlow's bytes and parses them back", function()
    local se = tf.train.SequenceExample{
      context = tf.train.Features{feature = {n = int64s({3})}},
      feature_lists = tf.train.FeatureLists{feature_list = {x = tf.train.FeatureList{feature = {
        floats({0.5}), floats({1.5, 2.5})}}}}}
    local wire = H.read(FIXTURES .. "one.pb")
    assert.equal(wire, se:SerializeToString())
    local back = tf.train.SequenceExample.FromString(wire)
    assert.same({3}, back.context.feature.n.int64_list.value)
    local steps = back.feature_lists.feature_list.x.feature
    assert.equal(2, #steps)
    assert.same({0.5}, steps[1].float_list.value)
    assert.same({1.5, 2.5}, steps[2].float_list.value)
  end)

  it("round-trips every kind, empty lists and steps of no kind", function()
    local se = tf.train.SequenceExample{
      context = {feature = {s = bytes({"a\0b", ""}), none = floats({})}},
      feature_lists = {feature_list = {
        ints = {feature = {int64s({-2 ^ 40, 7}), int64s({})}},
        strs = {feature = {bytes({"x"}), tf.train.Feature{}, bytes({"y", "z"})}},
        empty = {feature = {}}}}}
    local back = tf.train.SequenceExample.FromString(se:SerializeToString())
    assert.same({"a\0b", ""}, back.context.feature.s.bytes_list.value)
    assert.same({}, back.context.feature.none.float_list.value)
    local lists = back.feature_lists.feature_list
    assert.same({-2 ^ 40, 7}, lists.ints.feature[1].int64_list.value)
    assert.same({}, lists.ints.feature[2].int64_list.value)
    assert.equal(3, #lists.strs.feature)
    assert.is_nil(next(lists.strs.feature[2]))  -- a step of no kind stays one
    assert.same({"y", "z"}, lists.strs.feature[3].bytes_list.value)
    assert.same({}, lists.empty.feature)
    -- An empty message is empty bytes, as in TensorFlow.
    assert.equal("", tf.train.SequenceExample{}:SerializeToString())
  end)

  it("names bad messages", function()
    assert.truthy(H.error_of(tf.train.FeatureList, {feature = {x = floats({1})}})
                    :find("feature must be a list of features", 1, true))
    assert.truthy(H.error_of(tf.train.SequenceExample, {contex = {}}):find("unknown field 'contex'", 1, true))
    assert.truthy(H.error_of(tf.train.FeatureLists, {feature_list = {[1] = {}}})
                    :find("feature list names must be strings", 1, true))
    assert.truthy(H.error_of(tf.train.SequenceExample.FromString, "\255\255\255")
                    :find("Could not parse sequence example input, value: '???'", 1, true))
  end)
end)

describe("parsing SequenceExamples in the graph", function()
  before_each(function() tf.reset_default_graph() end)

  it("parse_single_sequence_example gives what TensorFlow gives, in a TFRecordDataset pipeline", function()
    local want = expected().single
    local ds = tf.data.TFRecordDataset(FIXTURES .. "sequences.tfrecord"):map(function(record)
      local context, lists = tf.io.parse_single_sequence_example(record, CONTEXT(), SEQUENCE())
      return {context.id, context.label, context.weight, context.tags.indices, context.tags.values,
              context.tags.dense_shape, lists.tokens, lists.frames, lists.marks, lists.words.indices,
              lists.words.values, lists.words.dense_shape}
    end)
    local nxt = ds:make_one_shot_iterator():get_next()
    local sess = tf.Session()
    for i = 1, 3 do
      local g = sess:run(nxt)
      assert_like(want[i].context, {id = g[1], label = g[2], weight = g[3],
                                    tags = {indices = g[4], values = g[5], dense_shape = g[6]}})
      assert_like(want[i].sequence, {tokens = g[7], frames = g[8], marks = g[9],
                                     words = {indices = g[10], values = g[11], dense_shape = g[12]}})
    end
  end)

  it("shapes: steps lead dense feature lists, sparse ones index step and value", function()
    local context, lists = tf.io.parse_single_sequence_example(records()[3], CONTEXT(), SEQUENCE())
    assert.same({2}, context.weight:get_shape():as_list())
    assert.same({-1, 2}, lists.frames:get_shape():as_list())
    assert.same({-1, 2}, lists.words.indices:get_shape():as_list())
    assert.same({2}, lists.words.dense_shape:get_shape():as_list())
    assert.same({{0, -2}, {0.5, -3}, {1, -4}}, tf.Session():run(lists.frames):totable())
  end)

  it("parse_sequence_example pads a batch and gives the lengths, as TensorFlow does", function()
    local want = expected().batch
    local context, lists, lengths = tf.io.parse_sequence_example(records(), CONTEXT(), SEQUENCE())
    assert.same({3, -1, 2}, lists.frames:get_shape():as_list())
    assert.same({3}, lengths.frames:get_shape():as_list())
    assert.same({-1, 3}, lists.words.indices:get_shape():as_list())
    local got = tf.Session():run({context, lists, lengths})
    assert_like(want.context, got[1])
    assert_like(want.sequence, got[2])
    assert_like(want.lengths, got[3])
    assert.same({"m0", "", "", "", "", "", "m0", "m1", "m2"}, H.flat(got[2].marks:totable()))
  end)

  it("names the feature and example that do not fit, in TensorFlow's words", function()
    local r = records()
    local sess = tf.Session()
    local function err(context, sequence, batch)
      local parse = batch and tf.io.parse_sequence_example or tf.io.parse_single_sequence_example
      return H.error_of(sess.run, sess, {parse(batch and r or r[2], context or {}, sequence or {})})
    end
    assert.truthy(err(nil, {marks = tf.io.FixedLenSequenceFeature({}, tf.string)})
                    :find("Feature list 'marks' is required but could not be found.  Did you mean to include it in " ..
                          "feature_list_dense_missing_assumed_empty or feature_list_dense_defaults? (example 0)", 1,
                          true))
    assert.truthy(err(nil, {marks = tf.io.FixedLenSequenceFeature({}, tf.string)}, true):find("(example 1)", 1, true))
    assert.truthy(err(nil, {tokens = tf.io.FixedLenSequenceFeature({}, tf.float32)})
                    :find("Feature list: tokens, Index: 0.  Data types don't match. Expected type: float", 1, true))
    assert.truthy(err(nil, {words = tf.io.VarLenFeature(tf.int64)})
                    :find("Feature list: words, Index: 0.  Data types don't match. Expected type: int64", 1, true))
    assert.truthy(err(nil, {frames = tf.io.FixedLenSequenceFeature({3}, tf.float32)})
                    :find("Key: frames, Index: 0.  Number of values != expected.  values size: 2 but output " ..
                          "shape: [3]", 1, true))
    assert.truthy(err({zz = tf.io.FixedLenFeature({}, tf.int64)})
                    :find("Feature: zz (data type: int64) is required but could not be found.", 1, true))
    assert.truthy(err({id = tf.io.FixedLenFeature({}, tf.float32)})
                    :find("Key: id, Index: 0.  Data types don't match. Data type: int64 but expected type: float", 1,
                          true))
    assert.truthy(H.error_of(sess.run, sess, {tf.io.parse_sequence_example({r[1], "\255\255"}, CONTEXT(), {})})
                    :find("Could not parse sequence example input, value: '??' (ParseSequenceExample_7, example 1)", 1,
                          true))
    -- Specs TensorFlow refuses, refused as it words them.
    local parse = tf.io.parse_single_sequence_example
    assert.truthy(H.error_of(parse, r[1], {}, {tokens = tf.io.FixedLenFeature({}, tf.int64)})
                    :find("sequence feature 'tokens' must be a tf.io.FixedLenSequenceFeature or tf.io.VarLenFeature, " ..
                          "got tf.io.FixedLenFeature", 1, true))
    assert.truthy(H.error_of(parse, r[1], {id = tf.io.FixedLenSequenceFeature({}, tf.int64)}, {})
                    :find("context feature 'id' must be a tf.io.FixedLenFeature", 1, true))
    assert.truthy(H.error_of(parse, r[1], {}, {tokens = tf.io.FixedLenSequenceFeature({}, tf.int64, false, 0)})
                    :find("Value feature_list.dense_defaults[tokens] must be None", 1, true))
    assert.truthy(H.error_of(tf.io.FixedLenSequenceFeature, {}, tf.int64, "yes")
                    :find("allow_missing must be a boolean", 1, true))
    -- The session stays usable.
    local context = parse(r[2], {id = tf.io.FixedLenFeature({}, tf.int64)}, {})
    assert.equal(1, sess:run(context.id))
  end)
end)
