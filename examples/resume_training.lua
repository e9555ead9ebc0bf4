-- resume_training.lua — trains from a tf.data pipeline, checkpoints every N
-- steps, and when started again resumes from the latest checkpoint, so that a
-- run killed halfway ends with the same weights as one never interrupted.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/resume_training.lua DIR [options]
-- Options: --steps N (total, default 300), --every N (checkpoint period,
-- default 50), --die-at N (exit abruptly, as if killed, right after step N).
--
-- What makes the resumed run identical: the checkpoint holds every global
-- variable (weights, Adam's slots and beta powers, the global step), and the
-- input stream is a pure function of the step: the shuffled, repeated,
-- batched dataset is rebuilt and its first `global_step` batches skipped.
local tf = require("moonflow")

local function parse_args(argv)
  local o = {steps = 300, every = 50}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--steps" or a == "--every" or a == "--die-at" then
      o[a:sub(3):gsub("-", "_")] = tonumber(argv[i + 1])
      i = i + 1
    elseif not o.dir and a:sub(1, 2) ~= "--" then
      o.dir = a
    else
      error("resume_training.lua: unknown argument " .. a ..
            " (use DIR [--steps N] [--every N] [--die-at N])", 0)
    end
    i = i + 1
  end
  if not o.dir then error("resume_training.lua: name a checkpoint directory", 0) end
  return o
end

-- A regression problem: y = x . [1, -2, 3] + 0.5 plus a little noise, 256 rows.
local function make_data()
  local n = 256
  local xs, ys = tf.Array.new(tf.float32, {n, 3}), tf.Array.new(tf.float32, {n, 1})
  local seed = 12345
  local function rand()
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed / 2147483648 * 2 - 1
  end
  for r = 0, n - 1 do
    local a, b, c = rand(), rand(), rand()
    xs:set(r, 0, a); xs:set(r, 1, b); xs:set(r, 2, c)
    ys:set(r, 0, a - 2 * b + 3 * c + 0.5 + 0.01 * rand())
  end
  return xs, ys
end

local function main(argv)
  local o = parse_args(argv)
  os.execute("mkdir -p '" .. o.dir:gsub("'", "'\\''") .. "'")
  tf.set_random_seed(7)

  local global_step = tf.train.get_or_create_global_step()
  local latest = tf.train.latest_checkpoint(o.dir)
  local start = latest and tonumber(latest:match("%-(%d+)$")) or 0

  local xs, ys = make_data()
  local batches = tf.data.Dataset.from_tensor_slices({xs, ys})
    :shuffle(64, {seed = 3})
    :repeat_()
    :batch(16)
    :skip(start)                          -- the batches the checkpointed steps used
  local x, y = unpack(batches:make_one_shot_iterator():get_next())

  local pred = tf.layers.dense(tf.layers.dense(x, 8, {activation = tf.nn.tanh}), 1)
  local loss = tf.reduce_mean(tf.square(pred - y))
  local train_op = tf.train.AdamOptimizer(0.05):minimize(loss, {global_step = global_step})
  local saver = tf.train.Saver(nil, {max_to_keep = 3})

  local sess = tf.Session()
  if latest then
    saver:restore(sess, latest)
    print(string.format("resumed from %s at step %d", latest, sess:run(global_step)))
  else
    sess:run(tf.global_variables_initializer())
    print("started afresh")
  end

  local step = sess:run(global_step)
  while step < o.steps do
    local l = sess:run({loss, train_op})[1]
    step = sess:run(global_step)
    if step % o.every == 0 then
      print(string.format("step %d  loss %.6f  saved %s", step, l, saver:save(sess, o.dir .. "/model.ckpt",
                                                                          {global_step = step})))
    end
    if o.die_at and step == o.die_at then
      io.stdout:flush()
      os.exit(3, false)                   -- no cleanup, no save: as if killed
    end
  end

  -- The final weights, to the last bit (%a prints a float exactly).
  local parts = {}
  for _, v in ipairs(tf.trainable_variables()) do
    local a = sess:run(v)
    local data, n = a:data(), a:size()
    local vals = {}
    for i = 0, n - 1 do vals[#vals + 1] = string.format("%a", data[i]) end
    parts[#parts + 1] = v.op.name .. "=" .. table.concat(vals, ",")
  end
  print("final loss " .. string.format("%.6f", sess:run(loss)))
  print("weights " .. table.concat(parts, ";"))
end

local ok, err = pcall(main, arg or {})
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end
