-- tf.signal: fft, ifft, fft2d, ifft2d, rfft, irfft against NumPy's np.fft
-- (spec/fixtures/complex_values.py), their gradients by central differences,
-- and their edge cases: odd lengths, fft_length cropping and padding, empty
-- tensors, bad ranks and dtypes.
local tf = require("moonflow")
local H = require("spec.helpers")
local V = require("spec.fixtures.complex_values")

local TOL64, TOL32 = 1e-12, 1e-5

describe("tf.signal", function()
  local sess
  before_each(function() tf.reset_default_graph(); sess = tf.Session() end)
  after_each(function() sess:close() end)

  for _, dt in ipairs({{tf.complex64, tf.float32, TOL32}, {tf.complex128, tf.float64, TOL64}}) do
    local ctype, rtype, tol = dt[1], dt[2], dt[3]
    local function check(expected, t, what)
      H.assert_near_all(H.flat(expected), H.flat(H.pairs(sess:run(t))), tol, what)
    end

    it("transforms complex values as np.fft, " .. ctype.name, function()
      local x = tf.constant(H.complex(V.X), ctype)
      check(V.fft, tf.signal.fft(x), "fft")
      check(V.ifft, tf.signal.ifft(x), "ifft")
      check(V.fft2d, tf.signal.fft2d(x), "fft2d")
      check(V.ifft2d, tf.signal.ifft2d(x), "ifft2d")
      check(V.X, tf.signal.ifft(tf.signal.fft(x)), "round trip")
      check(V.X, tf.signal.fft2d(tf.signal.ifft2d(x)), "2d round trip")
      assert.equal(ctype, tf.signal.fft(x).dtype)
      assert.same({2, 3}, tf.signal.fft2d(x):get_shape():as_list())
    end)

    it("transforms real values as np.fft.rfft and irfft, " .. rtype.name, function()
      local r = tf.constant(V.R, rtype)
      check(V.rfft, tf.signal.rfft(r), "rfft")
      check(V.rfft4, tf.signal.rfft(r, {4}), "rfft cropped")
      check(V.rfft8, tf.signal.rfft(r, 8), "rfft padded")
      assert.equal(ctype, tf.signal.rfft(r).dtype)
      assert.same({2, 5}, tf.signal.rfft(r, {fft_length = {8}}):get_shape():as_list())
      local s = tf.constant(H.complex(V.S), ctype)
      local function real_check(expected, t, what) H.assert_near_all(H.flat(expected), sess:run(t), tol, what) end
      real_check(V.irfft5, tf.signal.irfft(s, {5}), "irfft odd")
      real_check(V.irfft4, tf.signal.irfft(s, {4}), "irfft even")
      real_check(V.irfft8, tf.signal.irfft(s, {8}), "irfft padded")
      real_check(V.irfft_default, tf.signal.irfft(s), "irfft default length")
      real_check(V.R, tf.signal.irfft(tf.signal.rfft(r), {5}), "round trip")
      assert.equal(rtype, tf.signal.irfft(s).dtype)
      assert.same({2, 4}, tf.signal.irfft(s):get_shape():as_list())
    end)
  end

  it("reads fft_length and the default lengths at run time", function()
    local r = tf.placeholder(tf.float64, {2, -1})
    local n = tf.placeholder(tf.int32, {1})
    local y = tf.signal.rfft(r, n)
    assert.same({2, -1}, y:get_shape():as_list())
    local out = sess:run(y, {[r] = V.R, [n] = {4}})
    H.assert_near_all(H.flat(V.rfft4), H.flat(H.pairs(out)), TOL64)
    H.assert_near_all(H.flat(V.rfft), H.flat(H.pairs(sess:run(tf.signal.rfft(r), {[r] = V.R}))), TOL64)
    local s = tf.placeholder(tf.complex128, {2, -1})
    H.assert_near_all(H.flat(V.irfft_default), sess:run(tf.signal.irfft(s), {[s] = H.complex(V.S)}), TOL64)
  end)

  it("takes empty tensors, length-1 axes and batches", function()
    local e = tf.constant({}, tf.complex64)
    assert.same({0}, sess:run(tf.signal.fft(e)):shape())
    assert.same({0, 3}, sess:run(tf.signal.fft(tf.zeros({0, 3}, tf.complex64))):shape())
    assert.same({0, 3}, sess:run(tf.signal.rfft(tf.zeros({0, 4}))):shape())
    H.assert_values({{0, 0}}, H.pairs(sess:run(tf.signal.rfft(tf.zeros({3}), {0}))))
    assert.same({2, 0}, sess:run(tf.signal.irfft(tf.zeros({2, 1}, tf.complex64), {0})):shape())
    H.assert_values({{{2.5, -1}}}, H.pairs(sess:run(tf.signal.fft(tf.constant({{tf.complex_number(2.5, -1)}})))))
    local batch = tf.constant(H.complex({V.X, V.X}), tf.complex128)
    H.assert_near_all(H.flat({V.fft, V.fft}), H.flat(H.pairs(sess:run(tf.signal.fft(batch)))), TOL64)
    H.assert_near_all(H.flat({V.fft2d, V.fft2d}), H.flat(H.pairs(sess:run(tf.signal.fft2d(batch)))), TOL64)
  end)

  it("refuses bad dtypes, ranks and lengths with clear errors", function()
    local function fails(pattern, f, ...)
      local ok, err = pcall(f, ...)
      assert.is_false(ok)
      assert.matches(pattern, err, 1, true)
    end
    fails("FFT: input has dtype float32, but FFT takes only complex64, complex128", tf.signal.fft,
          tf.constant({1, 2}))
    fails("RFFT: input has dtype complex64, but RFFT takes only float32, float64", tf.signal.rfft,
          tf.constant({1, 2}, tf.complex64))
    fails("IRFFT: input has dtype float32, but IRFFT takes only complex64, complex128", tf.signal.irfft,
          tf.constant({1, 2}), {2})
    fails("FFT2D transforms the innermost 2 axes of its input, which needs rank >= 2, got shape [3]",
          tf.signal.fft2d, tf.constant({1, 2, 3}, tf.complex64))
    fails("tf.signal.rfft: input must have rank >= 1", tf.signal.rfft, tf.constant(1))
    fails("FFT transforms the innermost axis of its input, which needs rank >= 1, got shape []",
          tf.signal.fft, tf.constant(tf.complex_number(1, 0), tf.complex64))
    fails("tf.signal.rfft: fft_length must be a non-negative integer or a list of one", tf.signal.rfft,
          tf.constant({1, 2}), {-3})
    fails("fft_length must be an int32 vector of one length, got int32 of shape [2]", tf.signal.rfft,
          tf.constant({1, 2}), tf.constant({2, 2}, tf.int32))
    local n = tf.placeholder(tf.int32, {1})
    local y = tf.signal.rfft(tf.constant({1, 2}), n)
    fails("fft_length must be in [0, 1073741823], got -2", function() return sess:run(y, {[n] = {-2}}) end)
    H.assert_values({{3, 0}, {-1, 0}}, H.pairs(sess:run(y, {[n] = {2}})))  -- the session stays usable
  end)
end)

describe("tf.signal gradients", function()
  -- Central differences over float64 inputs; complex inputs are complex(re, im)
  -- of two float64 placeholders, so the differences check both parts.
  local DELTA, TOL = 1e-6, 1e-6
  local RE = {{0.3, -1.2, 0.8, 0.1, -0.6}, {1.1, 0.4, -0.5, 0.9, -1.4}}
  local IM = {{0.7, 0.4, -0.5, 1.2, 0.2}, {-0.3, 0.6, 0.25, -0.8, 0.5}}
  local W = tf.constant  -- built inside each graph below

  local function fd_check(inputs, loss)
    local sess = tf.Session()
    local feed = {}
    for _, p in ipairs(inputs) do feed[p[1]] = p[2] end
    for _, p in ipairs(inputs) do
      local x, x0 = p[1], p[2]
      local g = sess:run(tf.gradients(loss, {x})[1], feed)
      for i = 1, #x0 do
        for j = 1, #x0[i] do
          local v = x0[i][j]
          x0[i][j] = v + DELTA
          local plus = sess:run(loss, feed)
          x0[i][j] = v - DELTA
          local minus = sess:run(loss, feed)
          x0[i][j] = v
          local numerical = (plus - minus) / (2 * DELTA)
          local symbolic = g:get(i - 1, j - 1)
          assert(math.abs(numerical - symbolic) <= TOL * math.max(1, math.abs(numerical)),
                 ("[%d][%d]: numerical %.10g, symbolic %.10g"):format(i, j, numerical, symbolic))
        end
      end
    end
    sess:close()
  end
  local function copy(t)
    local out = {}
    for i, row in ipairs(t) do out[i] = {unpack(row)} end
    return out
  end
  -- A real loss weighting every part of complex y differently.
  local function weigh(y)
    local shape = y:get_shape():as_list()
    local n = shape[#shape]
    local wr, wi = {}, {}
    for i = 1, n do wr[i], wi[i] = 0.5 + 0.3 * i, 1 - 0.45 * i end
    return tf.reduce_sum(tf.math.real(y) * W(wr, tf.float64)) + tf.reduce_sum(tf.math.imag(y) * W(wi, tf.float64))
  end

  for fname, transform in pairs({fft = tf.signal.fft, ifft = tf.signal.ifft, fft2d = tf.signal.fft2d,
                                 ifft2d = tf.signal.ifft2d}) do
    it("of " .. fname, function()
      tf.reset_default_graph()
      local re, im = tf.placeholder(tf.float64, {2, 5}), tf.placeholder(tf.float64, {2, 5})
      fd_check({{re, copy(RE)}, {im, copy(IM)}}, weigh(transform(tf.complex(re, im))))
    end)
  end

  for _, n in ipairs({5, 4, 3, 8}) do
    it("of rfft with fft_length " .. n .. " (odd, cropped, padded)", function()
      tf.reset_default_graph()
      local x = tf.placeholder(tf.float64, {2, 5})
      fd_check({{x, copy(RE)}}, weigh(tf.signal.rfft(x, {n})))
    end)
    it("of irfft with fft_length " .. n, function()
      tf.reset_default_graph()
      local re, im = tf.placeholder(tf.float64, {2, 5}), tf.placeholder(tf.float64, {2, 5})
      local y = tf.signal.irfft(tf.complex(re, im), {n})
      local w = {}
      for i = 1, n do w[i] = 0.5 + 0.3 * i end
      fd_check({{re, copy(RE)}, {im, copy(IM)}}, tf.reduce_sum(y * W(w, tf.float64)))
    end)
  end

  it("of second order through rfft and irfft", function()
    tf.reset_default_graph()
    local x = tf.placeholder(tf.float64, {2, 5})
    local inner = tf.reduce_sum(tf.square(tf.abs(tf.signal.rfft(x, {6}))))
    local g = tf.gradients(inner, {x})[1]
    fd_check({{x, copy(RE)}}, tf.reduce_sum(g * tf.sin(x)))
    tf.reset_default_graph()
    local re, im = tf.placeholder(tf.float64, {2, 5}), tf.placeholder(tf.float64, {2, 5})
    local z = tf.complex(re, im)
    local g2 = tf.gradients(tf.reduce_sum(tf.square(tf.signal.irfft(z, {7}))), {z})[1]
    fd_check({{re, copy(RE)}, {im, copy(IM)}}, tf.reduce_sum(tf.math.real(g2) * tf.math.imag(g2) + tf.math.real(g2)))
  end)
end)
