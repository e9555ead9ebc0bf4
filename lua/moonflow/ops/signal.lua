-- ops/signal.lua — tf.signal: the discrete Fourier transforms (src/ops/signal.c).
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local name_of = args.name_of
local fail = core.fail

return function(tf, ops)
  tf.signal = tf.signal or {}
  tf.spectral = tf.signal  -- TF1's older name of the same functions

  -- fft, ifft, fft2d, ifft2d(input, name): complex64 or complex128 in and out,
  -- over the innermost axis (2d: the innermost two).
  for fname, op_type in pairs({fft = "FFT", ifft = "IFFT", fft2d = "FFT2D", ifft2d = "IFFT2D"}) do
    local who = "tf.signal." .. fname
    ops[fname] = function(input, name)
      return G.op{op_type, inputs = {G.convert(input)}, name = name_of(name, who)}
    end
    tf.signal[fname] = ops[fname]
  end

  -- fft_length as the int32 vector the ops take: a number, a list of one
  -- number, or an int32 tensor; nil gives default(x), built from x's shape.
  local function length_arg(who, x, fft_length, default)
    if fft_length == nil then return default(x) end
    if G.is_tensor(fft_length) then return fft_length end
    if type(fft_length) == "number" then fft_length = {fft_length} end
    if type(fft_length) ~= "table" or #fft_length ~= 1 or type(fft_length[1]) ~= "number" or
       fft_length[1] < 0 or fft_length[1] % 1 ~= 0 then
      fail(who .. ": fft_length must be a non-negative integer or a list of one, got " ..
           args.describe(fft_length))
    end
    return G.constant(fft_length, {dtype = tf.int32, graph = x.graph})
  end
  -- x's innermost dimension as an int32 vector of one: a constant when the
  -- graph knows it, else read from tf.shape(x) at run time.
  local function inner_dim(x)
    local dims = x:get_shape():as_list()
    if dims ~= nil and #dims > 0 and dims[#dims] >= 0 then
      return G.constant({dims[#dims]}, {dtype = tf.int32, graph = x.graph})
    end
    return tf.strided_slice(tf.shape(x), {-1}, {0}, {end_mask = 1})
  end
  local function check_rank(who, x)
    local rank = x:get_shape().ndims
    if rank == 0 then fail(who .. ": input must have rank >= 1, got a scalar " .. x.name) end
  end

  -- rfft(input_tensor, fft_length, name): float32 -> complex64, float64 ->
  -- complex128, N/2 + 1 bins; fft_length defaults to the innermost dimension.
  local LENGTH_OPTIONS = {"fft_length", "name"}
  function ops.rfft(input, ...)
    local o = args.options("tf.signal.rfft", LENGTH_OPTIONS, ...)
    local x = G.convert(input)
    check_rank("tf.signal.rfft", x)
    local n = length_arg("tf.signal.rfft", x, o.fft_length, inner_dim)
    return G.op{"RFFT", inputs = {x, n}, name = name_of(o.name, "tf.signal.rfft")}
  end
  -- irfft(input_tensor, fft_length, name): complex -> real of fft_length, by
  -- default 2 * (innermost dimension - 1).
  function ops.irfft(input, ...)
    local o = args.options("tf.signal.irfft", LENGTH_OPTIONS, ...)
    local x = G.convert(input)
    check_rank("tf.signal.irfft", x)
    local n = length_arg("tf.signal.irfft", x, o.fft_length, function(t)
      local dims = t:get_shape():as_list()
      if dims ~= nil and #dims > 0 and dims[#dims] >= 0 then
        return G.constant({math.max(2 * (dims[#dims] - 1), 0)}, {dtype = tf.int32, graph = t.graph})
      end
      return tf.maximum((inner_dim(t) - 1) * 2, 0)
    end)
    return G.op{"IRFFT", inputs = {x, n}, name = name_of(o.name, "tf.signal.irfft")}
  end
  tf.signal.rfft, tf.signal.irfft = ops.rfft, ops.irfft
  tf.fft, tf.ifft, tf.fft2d, tf.ifft2d = ops.fft, ops.ifft, ops.fft2d, ops.ifft2d
end
