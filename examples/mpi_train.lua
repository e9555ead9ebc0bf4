-- mpi_train.lua — data-parallel training of the digits MLP on MPI
-- (moonflow.mpi, docs/api/mpi.md): every rank runs this script, feeds its
-- share of each global batch, and the gradients are averaged across the
-- ranks (overlapped with the backward pass) before every update, so all
-- ranks keep the same weights. Rank 0 prints the progress and writes the
-- checkpoint.
--   mpirun -np 2 luajit examples/mpi_train.lua [--epochs N] [--batch B] [--data PATH] [--out DIR]
-- and on several machines (README.md, "Training on several machines"):
--   mpirun -np 8 --hostfile hosts -x LUA_PATH luajit examples/mpi_train.lua
-- B is the global batch (default 64), split evenly over the ranks; the data
-- ships with Debian's python3-sklearn; DIR (default .) gets mpi_train.ckpt.
local tf = require("moonflow")
local mpi = require("moonflow.mpi")
package.path = (arg and arg[0] and arg[0]:match("^(.*)[/\\]") or ".") .. "/?.lua;" .. package.path
local digits = require("digits_data")

local o = {epochs = 5, batch = 64, data = digits.DEFAULT_DATA, out = "."}
for i = 1, #arg, 2 do
  local key = arg[i]:match("^%-%-(%a+)$")
  if not key or o[key] == nil or arg[i + 1] == nil then
    error("mpi_train.lua: unknown argument " .. arg[i] .. " (use --epochs N, --batch B, --data PATH, --out DIR)", 0)
  end
  o[key] = type(o[key]) == "number" and tonumber(arg[i + 1]) or arg[i + 1]
end

mpi.init()
local rank, size = mpi.rank(), mpi.size()
if o.batch % size ~= 0 then error(string.format("mpi_train.lua: --batch %d does not split over %d ranks", o.batch, size), 0) end
local local_batch = o.batch / size

math.randomseed(1) -- the same split on every rank
local images, labels = digits.load(o.data)
local train_x, train_y, test_x, test_y = digits.split(images, labels, 0.2)
local n_train = train_x:shape()[1]

tf.set_random_seed(1)
local x = tf.placeholder(tf.float32, {-1, digits.FEATURES})
local y = tf.placeholder(tf.int32, {-1})
local logits = tf.layers.dense(tf.layers.dense(x, 64, {activation = tf.nn.relu}), digits.CLASSES)
local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = y, logits = logits}))
local train = mpi.DistributedOptimizer(tf.train.GradientDescentOptimizer(0.5)):minimize(loss)
local accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y), tf.float32))

local sess = tf.Session()
sess:run(tf.global_variables_initializer())
sess:run(mpi.broadcast_global_variables(0))
local bx, by = tf.Array.new(tf.float32, {local_batch, digits.FEATURES}), tf.Array.new(tf.int32, {local_batch})
local order = {}
for i = 1, n_train do order[i] = i - 1 end
for epoch = 1, o.epochs do
  -- Global batch b is rows b*B .. b*B+B-1; this rank takes its slice of them.
  for first = 1, n_train - o.batch + 1, o.batch do
    local mine = first + rank * local_batch
    digits.gather_rows(train_x, train_y, order, mine, mine + local_batch - 1, bx, by)
    sess:run(train, {[x] = bx, [y] = by})
  end
  local acc = sess:run(accuracy, {[x] = test_x, [y] = test_y})
  if rank == 0 then print(string.format("epoch %d: test accuracy %.3f on %d ranks", epoch, acc, size)) end
end
local path = tf.train.Saver():save(sess, o.out .. "/mpi_train.ckpt")
if rank == 0 then print("wrote " .. path) end
