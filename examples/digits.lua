-- digits.lua — trains a classifier on the UCI handwritten digits (1797 8x8
-- images, 10 classes), holding out a test split, with a progress bar per
-- epoch, and writes the loss curve as an SVG picture.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/digits.lua [mlp|convnet] [options]
-- Options: --epochs N, --data PATH (digits.csv.gz), --out DIR (where the SVG
-- goes; default .), --quiet (no progress bars).
-- The data ships with Debian's python3-sklearn:
--   apt-get install python3-sklearn
local tf = require("moonflow")
-- The data set's loading and splitting, shared with digits_estimator.lua.
package.path = (arg and arg[0] and arg[0]:match("^(.*)[/\\]") or ".") .. "/?.lua;" .. package.path
local digits = require("digits_data")

local DEFAULT_DATA, FEATURES, CLASSES = digits.DEFAULT_DATA, digits.FEATURES, digits.CLASSES
local load_digits, split, permutation, gather_rows = digits.load, digits.split, digits.permutation, digits.gather_rows

local function parse_args(argv)
  local o = {model = "mlp", data = DEFAULT_DATA, out = ".", quiet = false}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "mlp" or a == "convnet" then o.model = a
    elseif a == "--quiet" then o.quiet = true
    elseif a == "--epochs" or a == "--data" or a == "--out" then
      i = i + 1
      o[a:sub(3)] = argv[i]
    else
      error("digits.lua: unknown argument " .. a .. " (use mlp|convnet, --epochs N, --data PATH, --out DIR, --quiet)", 0)
    end
    i = i + 1
  end
  o.epochs = tonumber(o.epochs) or 20
  return o
end

-- The two models: logits for a [batch, 64] float32 input.
local models = {}
function models.mlp(x)
  local h = tf.layers.dense(x, 128, {activation = tf.nn.relu})
  return tf.layers.dense(h, CLASSES)
end
function models.convnet(x)
  local img = tf.reshape(x, {-1, 8, 8, 1})
  local h = tf.layers.conv2d(img, 16, 3, {padding = "same", activation = tf.nn.relu})
  h = tf.layers.max_pooling2d(h, 2, 2)                               -- 4x4x16
  h = tf.layers.conv2d(h, 32, 3, {padding = "same", activation = tf.nn.relu})
  h = tf.layers.max_pooling2d(h, 2, 2)                               -- 2x2x32
  return tf.layers.dense(tf.layers.flatten(h), CLASSES)
end

local function progress(epoch, epochs, done, total, loss)
  local width = 30
  local filled = math.floor(width * done / total + 0.5)
  io.write(string.format("\repoch %2d/%d [%s%s] %4d/%d  loss %.4f", epoch, epochs, string.rep("#", filled),
                         string.rep(".", width - filled), done, total, loss))
  io.flush()
end

-- The mean loss per epoch as an SVG line chart.
local function write_svg(path, title, losses)
  local W, H, M = 480, 300, 56
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(losses) do lo, hi = math.min(lo, v), math.max(hi, v) end
  if hi - lo < 1e-12 then hi = lo + 1 end
  local function px(i) return M + (W - 2 * M) * (#losses > 1 and (i - 1) / (#losses - 1) or 0) end
  local function py(v) return H - M - (H - 2 * M) * (v - lo) / (hi - lo) end
  local pts = {}
  for i, v in ipairs(losses) do pts[i] = string.format("%.1f,%.1f", px(i), py(v)) end
  local f = assert(io.open(path, "w"))
  f:write(string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">\n', W, H))
  f:write(string.format('<rect width="%d" height="%d" fill="white"/>\n', W, H))
  f:write(string.format('<text x="%d" y="24" text-anchor="middle" font-size="14">%s</text>\n', W / 2, title))
  f:write(string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>\n', M, H - M, W - M, H - M))
  f:write(string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>\n', M, M, M, H - M))
  f:write(string.format('<text x="%d" y="%d" text-anchor="middle">epoch</text>\n', W / 2, H - 12))
  f:write(string.format('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>\n', M - 4, py(hi) + 4, hi))
  f:write(string.format('<text x="%d" y="%.1f" text-anchor="end">%.3g</text>\n', M - 4, py(lo) + 4, lo))
  f:write(string.format('<text x="%d" y="%d" text-anchor="middle">1</text>\n', M, H - M + 16))
  f:write(string.format('<text x="%d" y="%d" text-anchor="middle">%d</text>\n', W - M, H - M + 16, #losses))
  f:write(string.format('<polyline fill="none" stroke="steelblue" stroke-width="2" points="%s"/>\n', table.concat(pts, " ")))
  f:write("</svg>\n")
  f:close()
end

-- Peak resident memory of this process in MiB (Linux), or nil.
local function peak_rss_mib()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  local kb = s:match("VmHWM:%s*(%d+)")
  return kb and tonumber(kb) / 1024
end

local function main(argv)
  local o = parse_args(argv)
  if not models[o.model] then error("digits.lua: no model " .. o.model, 0) end
  math.randomseed(1)
  tf.set_random_seed(1)
  local t0 = os.clock()
  local images, labels = load_digits(o.data)
  local train_x, train_y, test_x, test_y = split(images, labels, 0.2)
  local n_train = train_x:shape()[1]
  print(string.format("digits: %d images, %d for training, %d held out for testing; model %s",
                      images:shape()[1], n_train, test_x:shape()[1], o.model))

  local x = tf.placeholder(tf.float32, {-1, FEATURES}, "images")
  local y = tf.placeholder(tf.int32, {-1}, "labels")
  local logits = models[o.model](x)
  local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = y, logits = logits}))
  local train_op = tf.train.AdamOptimizer(o.model == "mlp" and 0.01 or 0.005):minimize(loss)
  local correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, {axis = 1, output_type = tf.int32}), y), tf.int32))

  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  local step = sess:make_callable({loss, train_op}, {x, y})
  local count_correct = sess:make_callable(correct, {x, y})

  local BATCH = 32
  local batch_x, batch_y = tf.Array.new(tf.float32, {BATCH, FEATURES}), tf.Array.new(tf.int32, {BATCH})
  local losses = {}
  local steps_per_epoch = math.floor(n_train / BATCH)  -- the remainder waits for the next shuffle
  for epoch = 1, o.epochs do
    local order = permutation(n_train)
    local sum = 0
    for s = 1, steps_per_epoch do
      gather_rows(train_x, train_y, order, (s - 1) * BATCH + 1, s * BATCH, batch_x, batch_y)
      sum = sum + step(batch_x, batch_y)[1]
      if not o.quiet and (s % 5 == 0 or s == steps_per_epoch) then
        progress(epoch, o.epochs, s, steps_per_epoch, sum / s)
      end
    end
    losses[epoch] = sum / steps_per_epoch
    if not o.quiet then io.write("\n") end
  end
  local train_acc = count_correct(train_x, train_y) / n_train
  local test_acc = count_correct(test_x, test_y) / test_x:shape()[1]
  local seconds = os.clock() - t0
  local svg = o.out .. "/digits-" .. o.model .. "-loss.svg"
  write_svg(svg, "digits " .. o.model .. ": mean training loss per epoch", losses)
  print(string.format("train accuracy %.4f", train_acc))
  print(string.format("test accuracy %.4f", test_acc))
  print(string.format("%d epochs in %.2f s (CPU time); loss curve written to %s", o.epochs, seconds, svg))
  local rss = peak_rss_mib()
  if rss then print(string.format("peak resident memory %.1f MiB", rss)) end
end

local ok, err = pcall(main, arg or {})
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end
