-- tfrecord_pipeline.lua — TensorFlow's "feeding data" pipeline end to end:
-- write training examples as tf.train.Example records to two gzip-compressed
-- TFRecord files, read them back with tf.data.TFRecordDataset, parse each
-- record with tf.io.parse_single_example in map, shuffle, batch and repeat,
-- and fit y = 3 x1 - 2 x2 + 1 from the batches.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/tfrecord_pipeline.lua [dir]
local tf = require("moonflow")

local dir = arg[1] or os.getenv("TMPDIR") or "/tmp"
local files = {dir .. "/train-0.tfrecord.gz", dir .. "/train-1.tfrecord.gz"}

-- 1. Write 200 examples, half to each file.
math.randomseed(7)
local writers = {tf.io.TFRecordWriter(files[1], "GZIP"), tf.io.TFRecordWriter(files[2], "GZIP")}
for i = 1, 200 do
  local x1, x2 = math.random() * 2 - 1, math.random() * 2 - 1
  local example = tf.train.Example{features = tf.train.Features{feature = {
    x = tf.train.Feature{float_list = tf.train.FloatList{value = {x1, x2}}},
    y = tf.train.Feature{float_list = tf.train.FloatList{value = {3 * x1 - 2 * x2 + 1}}},
    id = tf.train.Feature{int64_list = tf.train.Int64List{value = {i}}},
  }}}
  writers[i % 2 + 1]:write(example:SerializeToString())
end
for _, w in ipairs(writers) do w:close() end

-- 2. The input pipeline: records -> parsed features -> shuffled batches.
local function parse(record)
  local f = tf.io.parse_single_example(record, {
    x = tf.io.FixedLenFeature({2}, tf.float32),
    y = tf.io.FixedLenFeature({1}, tf.float32),
  })
  return {f.x, f.y}
end
local dataset = tf.data.TFRecordDataset(files, {compression_type = "GZIP"})
  :map(parse):shuffle(200, {seed = 1}):batch(20):repeat_()
local x, y = unpack(dataset:make_one_shot_iterator():get_next())

-- 3. A linear model trained from the pipeline.
local w = tf.Variable(tf.zeros({2, 1}))
local b = tf.Variable(0)
local loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
local train = tf.train.GradientDescentOptimizer(0.5):minimize(loss)
local sess = tf.Session()
sess:run(tf.global_variables_initializer())
for step = 1, 300 do
  local _, l = unpack(sess:run({train, loss}))
  if step % 100 == 0 then print(string.format("step %d: loss %.6f", step, l)) end
end
local learned = sess:run(w):totable()
print(string.format("learned: y = %.3f x1 + %.3f x2 + %.3f", learned[1][1], learned[2][1], sess:run(b)))
