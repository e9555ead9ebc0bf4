-- model_wrapper.lua — wrapping a model in a Lua object, the right way
-- (how-tensorflow-manages-graphs.txt): the constructor builds the whole graph
-- once, in a graph of its own, with one session; forecast() only runs it.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/model_wrapper.lua
local tf = require("moonflow")

local Forecaster = {}
Forecaster.__index = Forecaster

function Forecaster.new(weights, bias)
  local self = setmetatable({graph = tf.Graph()}, Forecaster)
  self.graph:as_default(function()
    self.x = tf.placeholder(tf.float32, {-1, #weights}, "x")
    local w, b = tf.variable_scope("weight_def", function()
      return tf.get_variable("weights", {#weights, 1}, {initializer = tf.constant_initializer(weights)}),
             tf.get_variable("bias", {}, {initializer = tf.constant_initializer(bias)})
    end)
    self.prediction = tf.matmul(self.x, w) + b
    self.sess = tf.Session(self.graph)
    self.sess:run(tf.global_variables_initializer())  -- or restore a checkpoint here
  end)
  -- From now on an op built by mistake is an error naming its line, instead
  -- of a graph that quietly grows with every call.
  self.graph:finalize()
  return self
end

function Forecaster:forecast(rows)
  return self.sess:run(self.prediction, {[self.x] = rows})
end

local model_user = Forecaster.new({0.5, 0.25, 2}, 1)
print("forecast 1:", model_user:forecast({{1, 2, 3}}))
print("forecast 2:", model_user:forecast({{4, 4, 4}, {0, 0, 0}}))
print("ops in its graph:", model_user.graph:num_ops(), "in the default graph:", tf.get_default_graph():num_ops())

-- The question's version builds the model inside forecast(): every call adds
-- the model again to the one default graph, and the second call collides
-- with the variables of the first.
local function forecast_building_every_time(rows)
  local x = tf.placeholder(tf.float32, {-1, 3})
  local w = tf.variable_scope("weight_def", function()
    return tf.get_variable("weights", {3, 1}, {initializer = tf.constant_initializer({0.5, 0.25, 2})})
  end)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  return sess:run(tf.matmul(x, w) + 1, {[x] = rows})
end
print("building in forecast, call 1:", forecast_building_every_time({{1, 2, 3}}))
local ok, err = pcall(forecast_building_every_time, {{1, 2, 3}})
print("building in forecast, call 2:", ok, err)
