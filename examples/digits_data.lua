-- digits_data.lua — the UCI handwritten digits (1797 8x8 images, 10
-- classes) for examples/digits.lua and examples/digits_estimator.lua: the
-- CSV that Debian's python3-sklearn ships, read into arrays, and a seeded
-- train/test split (math.random: seed it first).
local ffi = require("ffi")
local tf = require("moonflow")

local M = {}
M.DEFAULT_DATA = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
local FEATURES, CLASSES = 64, 10
M.FEATURES, M.CLASSES = FEATURES, CLASSES

-- The CSV rows as one float32 image array ([n, 64], pixels scaled to [0, 1])
-- and one int32 label array ([n]).
function M.load(path)
  local probe = io.open(path, "rb")
  if not probe then
    error(string.format("digits: %s not found.\nThe UCI digits ship with Debian's python3-sklearn: " ..
                        "apt-get install python3-sklearn (or pass --data PATH to digits.csv.gz)", path), 0)
  end
  probe:close()
  local pipe = assert(io.popen("gzip -dc '" .. path:gsub("'", "'\\''") .. "'"))
  local rows = {}
  for line in pipe:lines() do
    if line:find("%d") then rows[#rows + 1] = line end
  end
  pipe:close()
  local n = #rows
  if n == 0 then error("digits: no rows in " .. path, 0) end
  local images = tf.Array.new(tf.float32, {n, FEATURES})
  local labels = tf.Array.new(tf.int32, {n})
  local pixels, classes = images:data(), labels:data()
  for r, line in ipairs(rows) do
    local c = 0
    for field in line:gmatch("[^,]+") do
      if c < FEATURES then pixels[(r - 1) * FEATURES + c] = tonumber(field) / 16
      else classes[r - 1] = tonumber(field) end
      c = c + 1
    end
    if c ~= FEATURES + 1 then error(string.format("digits: row %d has %d fields, expected %d", r, c, FEATURES + 1), 0) end
  end
  return images, labels
end

-- A seeded permutation of 0..n-1 (Fisher-Yates on Lua's generator).
function M.permutation(n)
  local p = {}
  for i = 1, n do p[i] = i - 1 end
  for i = n, 2, -1 do
    local j = math.random(i)
    p[i], p[j] = p[j], p[i]
  end
  return p
end

-- Copies the rows `order[first..last]` of images/labels into the batch arrays.
function M.gather_rows(images, labels, order, first, last, batch_images, batch_labels)
  local src_px, src_lb = images:data(), labels:data()
  local dst_px, dst_lb = batch_images:data(), batch_labels:data()
  for k = first, last do
    local row = order[k]
    ffi.copy(dst_px + (k - first) * FEATURES, src_px + row * FEATURES, FEATURES * 4)
    dst_lb[k - first] = src_lb[row]
  end
end

-- Splits the data: a seeded shuffle, then the last `test_fraction` for testing.
function M.split(images, labels, test_fraction)
  local n = images:shape()[1]
  local order = M.permutation(n)
  local n_test = math.floor(n * test_fraction + 0.5)
  local n_train = n - n_test
  local function part(first, last)
    local im = tf.Array.new(tf.float32, {last - first + 1, FEATURES})
    local lb = tf.Array.new(tf.int32, {last - first + 1})
    M.gather_rows(images, labels, order, first, last, im, lb)
    return im, lb
  end
  local train_x, train_y = part(1, n_train)
  local test_x, test_y = part(n_train + 1, n)
  return train_x, train_y, test_x, test_y
end

return M
