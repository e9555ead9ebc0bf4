-- moonflow — symbolic tensor graphs for LuaJIT, in the manner of TensorFlow 1.x.
--   local tf = require("moonflow")
local core = require("moonflow.core")
setfenv(1, core.own_env)  -- see core.lua: moonflow's functions are told apart by their environment
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local S = require("moonflow.session")
local args = require("moonflow.args")

local tf = {}

for name, d in pairs(core.dtypes) do tf[name] = d end
tf.double = tf.float64
tf.DType = core.DType
tf.as_dtype = core.as_dtype

tf.Array = Array
function tf.array(value, dtype) return Array.from(value, dtype) end
tf.complex_number = Array.complex_number

tf.Graph = G.Graph.new
tf.Tensor = G.Tensor
tf.Operation = G.Operation
tf.TensorShape = G.TensorShape.new
tf.get_default_graph = G.get_default_graph
tf.reset_default_graph = G.reset_default_graph
tf.constant = G.constant
-- A Tensor passes through only when it already has the dtype asked for, as
-- in TensorFlow (internal callers use G.convert, which lets it through).
tf.convert_to_tensor = function(x, dtype)
  dtype = dtype and core.as_dtype(dtype, "tf.convert_to_tensor")
  if dtype and G.is_tensor(x) and x.dtype ~= dtype then
    core.fail("tf.convert_to_tensor: Tensor conversion requested dtype " .. dtype.name .. " for Tensor with dtype " ..
              x.dtype.name .. ": " .. tostring(x))
  end
  local t = G.convert(x, dtype)
  return t  -- not a tail call: errors name this function (args.argument_of)
end
tf.is_tensor = G.is_tensor

tf.Session = S.new
-- The loaded library's version (moonflow.h's MF_VERSION), as TensorFlow's tf.VERSION.
tf.VERSION = require("ffi").string(core.C.mf_version())
tf.InteractiveSession = S.interactive
tf.get_default_session = S.get_default_session
tf.hygiene = require("moonflow.hygiene")

-- tf.placeholder(dtype, shape, name) or tf.placeholder(dtype, {shape=, name=}).
local PLACEHOLDER_OPTIONS = {"shape", "name"}
function tf.placeholder(dtype, ...)
  dtype = core.as_dtype(dtype, "tf.placeholder")
  local o = args.options("tf.placeholder", PLACEHOLDER_OPTIONS, ...)
  local shape = o.shape
  if getmetatable(shape) == G.TensorShape then shape = shape.dims end
  return G.placeholder(dtype, shape, o.name)
end

-- tf.name_scope(name, fn): ops built in fn get the prefix "name/".
function tf.name_scope(name, fn, ...)
  if name ~= nil and type(name) ~= "string" then
    core.fail("tf.name_scope(name, fn): name must be a string, got " .. args.describe(name))
  end
  if type(fn) ~= "function" then core.fail("tf.name_scope(name, fn): fn must be a function, got " .. type(fn)) end
  return G.in_name_scope(G.get_default_graph(), name or "", fn, ...)
end

-- Every op wrapper is also a Tensor method (x:reduce_sum(0)).
local ops = G.ops
setmetatable(tf, {__index = ops})
tf.ops = ops

-- Installed in this order (a module may use what an earlier one set up);
-- ops.* are the op wrappers (lua/moonflow/ops/).
for _, module in ipairs({"ops.math", "ops.array", "ops.reduce", "ops.random", "gradients", "ops.nn", "variables",
                         "train", "ops.conv", "ops.index", "ops.linalg", "ops.image", "ops.image_codec", "ops.sparse", "ops.strings",
                         "ops.control_flow", "ops.signal", "layers", "rnn", "cookbook", "saver", "graph_io", "data", "io", "tfrecord",
                         "summary", "example", "ops.debugging", "devices", "hparams", "flags", "metrics", "estimator",
                         "experiment"}) do
  require("moonflow." .. module)(tf, ops)
end

require("moonflow.registry")(tf)
require("moonflow.eager")
-- Errors about an argument name the tf function it was given to (args.argument_of).
args.register_api(tf)

-- tf.identity and tf.no_op live with the core; `name` is a string or {name=}.
function ops.identity(x, name)
  return G.op{"Identity", inputs = {G.convert(x)}, name = args.name_of(name, "tf.identity")}
end
function ops.no_op(name) return G.build{"NoOp", name = args.name_of(name, "tf.no_op")} end

return tf
