-- A LÖVE (11.x) game running a small policy net, 8-64-64-4, every frame and
-- drawing its four outputs as bars. From the checkout, after `make`:
--   love examples/love
-- A game of your own ships lua/moonflow/ inside it (a directory or a .love
-- archive) and the library beside the game, the .love file or the fused
-- executable, or in its save directory (lua/moonflow/core.lua says where it
-- looks). MOONFLOW_LOVE_FRAMES=n prints the outputs of frame n and quits.
local fs = love.filesystem
-- Run from the checkout: the modules are in its lua/ directory.
if not fs.getInfo("moonflow") then
  local root = fs.getSource() .. "/../../lua/"
  package.path = root .. "?.lua;" .. root .. "?/init.lua;" .. package.path
end
local tf = require("moonflow")

-- The net's weights follow a formula, so anyone can check its outputs.
local function matrix(rows, cols, f)
  local m = {}
  for i = 1, rows do
    m[i] = {}
    for j = 1, cols do m[i][j] = f(i, j) end
  end
  return m
end
local function dense(x, w, b, activation)
  return activation(tf.matmul(x, tf.constant(w)) + tf.constant(b))
end
local x = tf.placeholder(tf.float32, {1, 8}, "observation")
local h1 = dense(x, matrix(8, 64, function(i, j) return math.sin(7 * i + 3 * j) * 0.5 end),
                 matrix(1, 64, function(_, j) return 0.01 * j end)[1], tf.nn.relu)
local h2 = dense(h1, matrix(64, 64, function(i, j) return math.cos(5 * i + 2 * j) * 0.2 end),
                 matrix(1, 64, function() return 0 end)[1], tf.nn.relu)
local policy = dense(h2, matrix(64, 4, function(i, j) return math.sin(i + 11 * j) * 0.3 end),
                     {0, 0, 0, 0}, tf.tanh)

local sess = tf.Session()
local run = sess:make_callable(policy, {x})
-- Caller-owned input and output: a frame allocates nothing.
local observation = tf.array({{0, 0, 0, 0, 0, 0, 0, 0}}, tf.float32)
local action = tf.array({{0, 0, 0, 0}}, tf.float32)
local frame = 0
local stop_at = tonumber(os.getenv("MOONFLOW_LOVE_FRAMES") or "")

function love.update()
  frame = frame + 1
  local obs = observation:data()
  for i = 0, 7 do obs[i] = math.sin(0.05 * frame + i + 1) end
  run(observation, {out = action})
  if frame == stop_at then
    local a = action:data()
    print(string.format("frame %d: %.5f %.5f %.5f %.5f", frame, a[0], a[1], a[2], a[3]))
    print("library: " .. require("moonflow.core").library_path)
    love.event.quit()
  end
end

function love.draw()
  local a = action:data()
  love.graphics.print(string.format("frame %d   policy %.3f %.3f %.3f %.3f", frame, a[0], a[1], a[2], a[3]), 10, 10)
  for i = 0, 3 do
    local v = a[i]
    love.graphics.setColor(v >= 0 and 0.3 or 0.9, v >= 0 and 0.8 or 0.3, 0.4)
    love.graphics.rectangle("fill", 240, 60 + 40 * i, 200 * v, 28)
  end
  love.graphics.setColor(1, 1, 1)
end
