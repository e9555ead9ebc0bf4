-- gradients.lua — tf.gradients, tf.stop_gradient, tf.add_n, tf.broadcast_to and
-- tf.test.compute_gradient(_error). The differentiation itself is the C driver
-- (src/autodiff.c); this is argument handling.
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local C = core.C

local fail, options, name_of = core.fail, args.options, args.name_of

-- A tensor or a list of tensors (argument `what` of tf.gradients) as a list.
local function as_list(x, what)
  if G.is_tensor(x) then return {x} end
  if type(x) ~= "table" or getmetatable(x) ~= nil then
    fail("tf.gradients: " .. what .. " must be a Tensor or a list of Tensors, got " .. tostring(x))
  end
  for i, t in ipairs(x) do
    if not G.is_tensor(t) then
      fail("tf.gradients: " .. what .. "[" .. i .. "] is not a Tensor: " .. tostring(t))
    end
  end
  return x
end

local function ports(list)
  local buf = core.ports(math.max(#list, 1))
  for i, t in ipairs(list) do buf[i - 1].op, buf[i - 1].index = t.op.ptr, t.value_index end
  return buf
end

-- Seeded numbers in [-1, 1) for gradient checks: reproducible, no global state.
local function uniform_values(n, seed)
  local out, s = {}, seed
  for i = 1, n do
    s = (s * 1103515245 + 12345) % 2147483648
    out[i] = s / 1073741824 - 1
  end
  return out
end

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

return function(tf, ops)
  -- tf.gradients(ys, xs, grad_ys, {unconnected_gradients = "none" | "zero"}):
  -- a list with one gradient per x; an x that no y depends on gets nil (a hole:
  -- unpack the list with unpack(g, 1, #xs)), or zeros with
  -- unconnected_gradients = "zero". TensorFlow's name, gate_gradients,
  -- aggregation_method and colocate_gradients_with_ops are accepted and change
  -- nothing.
  local GRADIENTS_OPTIONS = {"grad_ys", "unconnected_gradients", "name", "gate_gradients", "aggregation_method",
                             "colocate_gradients_with_ops", positional = 1}
  function tf.gradients(ys, xs, ...)
    local opts = options("tf.gradients", GRADIENTS_OPTIONS, ...)
    local grad_ys = opts.grad_ys
    local unconnected = opts.unconnected_gradients or "none"
    if unconnected ~= "none" and unconnected ~= "zero" then
      fail('tf.gradients: unconnected_gradients must be "none" or "zero", got ' .. tostring(unconnected))
    end
    ys, xs = as_list(ys, "ys"), as_list(xs, "xs")
    local all = {unpack(ys)}
    for _, x in ipairs(xs) do all[#all + 1] = x end
    local g = G.graph_of(all)
    local gys
    if grad_ys ~= nil then
      grad_ys = as_list(grad_ys, "grad_ys")
      if #grad_ys ~= #ys then fail("tf.gradients: grad_ys needs one tensor per y") end
      for i, gy in ipairs(grad_ys) do
        if gy.dtype ~= ys[i].dtype or not gy:get_shape():is_compatible_with(ys[i]:get_shape()) then
          fail(string.format("tf.gradients: grad_ys[%d] is %s of shape %s, but ys[%d] is %s of shape %s", i,
                             gy.dtype.name, tostring(gy:get_shape()), i, ys[i].dtype.name, tostring(ys[i]:get_shape())))
        end
      end
      gys = ports(grad_ys)
    end
    local dxs = core.ports(math.max(#xs, 1))
    local origin = core.user_location()
    if C.mf_gradients(g.ptr, ports(ys), #ys, ports(xs), #xs, gys, dxs, origin, core.status) ~= 0 then
      core.check_here()
    end
    local out = {}
    for i = 1, #xs do
      if dxs[i - 1].op ~= nil then out[i] = g:_op(dxs[i - 1].op):output(dxs[i - 1].index)
      elseif unconnected == "zero" then out[i] = ops.zeros_like(xs[i]) end
    end
    return out
  end

  -- tf.stop_gradient(x, name): x, through which no gradient flows.
  function ops.stop_gradient(x, name)
    return G.op{"StopGradient", inputs = {G.convert(x)}, name = name_of(name, "tf.stop_gradient")}
  end

  -- tf.add_n(list, name): the elementwise sum of tensors of one shape and dtype.
  function ops.add_n(list, name)
    if type(list) ~= "table" or #list == 0 then fail("tf.add_n: expected a non-empty list of tensors") end
    local ref
    for _, t in ipairs(list) do if G.is_tensor(t) then ref = t break end end
    local inputs = {}
    for i, t in ipairs(list) do inputs[i] = G.convert(t, ref and ref.dtype, ref and ref.graph) end
    return G.op{"AddN", inputs = inputs, name = name_of(name, "tf.add_n")}
  end
  tf.math = tf.math or {}
  tf.math.add_n = ops.add_n

  -- tf.broadcast_to(x, shape, name).
  function ops.broadcast_to(x, shape, name)
    x = G.convert(x)
    if not G.is_tensor(shape) then shape = G.constant(shape, {dtype = tf.int32, graph = x.graph}) end
    return G.op{"BroadcastTo", inputs = {x, shape}, name = name_of(name, "tf.broadcast_to")}
  end

  tf.test = tf.test or {}

  -- tf.test.compute_gradient(x, x_shape, y, y_shape, {x_init_value=, delta=, session=}):
  -- the theoretical (symbolic) and numerical (central differences) Jacobians,
  -- each a Lua table of x_size rows by y_size columns, computed in float64.
  -- x may be any tensor (a placeholder, a variable, an intermediate): it is fed.
  local CHECK_OPTIONS = {"x_init_value", "delta", "session", positional = 0, empty = true}
  function tf.test.compute_gradient(x, x_shape, y, y_shape, ...)
    local opts = options("tf.test.compute_gradient", CHECK_OPTIONS, ...)
    local delta = opts.delta or 1e-3
    local nx, ny = numel(x_shape), numel(y_shape)
    local x0 = opts.x_init_value and Array.from(opts.x_init_value, tf.float64, false, "tf.test.compute_gradient") or
               tf.array(uniform_values(nx, 12345), tf.float64)
    if x0:size() ~= nx then
      fail("tf.test.compute_gradient: x_init_value has " .. x0:size() .. " values, x_shape " .. nx)
    end
    local sess = opts.session or tf.Session(x.graph)
    local dy = x.graph:as_default(function() return tf.placeholder(y.dtype, y_shape) end)
    local dx = tf.gradients(y, x, dy)[1]
    local function feed_value(values)  -- x's dtype and shape from float64 values
      local a = Array.new(x.dtype, x_shape)
      for i = 0, nx - 1 do a._data[i] = values._data[i] end
      return a
    end
    local x_value = feed_value(x0)
    local theoretical, numerical = {}, {}
    for i = 1, nx do theoretical[i], numerical[i] = {}, {} end
    -- Symbolic: row j of the Jacobian's transpose is d(y[j])/dx.
    local seed = Array.new(y.dtype, y_shape)
    for j = 0, ny - 1 do
      for k = 0, ny - 1 do seed._data[k] = k == j and 1 or 0 end
      local g = dx and sess:run(dx, {[x] = x_value, [dy] = seed})
      for i = 0, nx - 1 do
        local v = 0
        if g then v = type(g) == "number" and g or tonumber(g._data[i]) end
        theoretical[i + 1][j + 1] = v
      end
    end
    -- Numerical: central differences of y along each coordinate of x.
    local function y_at(values)
      local r = sess:run(y, {[x] = feed_value(values)})
      if type(r) == "number" then return {r} end
      local out = {}
      for k = 0, ny - 1 do out[k + 1] = tonumber(r._data[k]) end
      return out
    end
    local probe = Array.from(x0, tf.float64)
    for i = 0, nx - 1 do
      local v = x0._data[i]
      probe._data[i] = v + delta
      local plus = y_at(probe)
      probe._data[i] = v - delta
      local minus = y_at(probe)
      probe._data[i] = v
      for j = 1, ny do numerical[i + 1][j] = (plus[j] - minus[j]) / (2 * delta) end
    end
    if not opts.session then sess:close() end
    return theoretical, numerical
  end

  -- The largest absolute difference between the two Jacobians.
  function tf.test.compute_gradient_error(x, x_shape, y, y_shape, opts)
    local theoretical, numerical = tf.test.compute_gradient(x, x_shape, y, y_shape, opts)
    local worst = 0
    for i, row in ipairs(theoretical) do
      for j, v in ipairs(row) do
        local d = math.abs(v - numerical[i][j])
        if d ~= d then return math.huge end
        if d > worst then worst = d end
      end
    end
    return worst
  end
end
