-- Complex dtypes (complex64, complex128) through the core and the elementwise,
-- reduction and matmul ops: values against NumPy (spec/fixtures/complex_values.py),
-- gradients by central differences over the real and imaginary parts, and the
-- errors for ops and dtypes that take no complex values.
local tf = require("moonflow")
local H = require("spec.helpers")
local V = require("spec.fixtures.complex_values")
local c = tf.complex_number

local TOL64, TOL32 = 1e-12, 2e-6

describe("complex dtypes", function()
  local sess
  before_each(function() tf.reset_default_graph(); sess = tf.Session() end)
  after_each(function() sess:close() end)

  it("are dtypes with parts", function()
    assert.equal("complex64", tf.complex64.name)
    assert.equal(8, tf.complex64.size)
    assert.equal(16, tf.complex128.size)
    assert.equal(tf.float32, tf.complex64.real_dtype)
    assert.equal(tf.complex128, tf.float64.complex_dtype)
  end)

  it("come from Lua as complex numbers, and numbers as their real part", function()
    local a = tf.array({c(1, 2), 3, c(-0.5)}, tf.complex64)
    H.assert_values({{1, 2}, {3, 0}, {-0.5, 0}}, H.pairs(a))
    assert.equal(tf.complex128, tf.array({c(1, 2)}).dtype)
    assert.equal(tf.complex128, tf.constant(c(0, 1)).dtype)
    local z = sess:run(tf.constant(c(1.5, -2), tf.complex64))
    assert.equal(1.5, z.re)
    assert.equal(-2, z.im)
    local ok, err = pcall(tf.array, {c(1, 2)}, tf.float32)
    assert.is_false(ok)
    assert.matches("tf.array: cannot convert complex number 1+2i to dtype float32 (tf.math.real and " ..
                   "tf.math.imag take its parts)", err, 1, true)
    assert.has_error(function() tf.array({"a"}, tf.complex64) end)
    assert.has_error(function() tf.complex_number("1", 2) end)
  end)

  it("print as NumPy does", function()
    assert.equal("[1.+2.j, 3.-4.j]", tostring(tf.array({c(1, 2), c(3, -4)}, tf.complex64)))
    assert.equal("[-2. +6.j, -4.-28.j]", tostring(tf.array({c(-2, 6), c(-4, -28)})))
    assert.equal("[1.5+0.j  , 2. -0.25j]", tostring(tf.array({c(1.5, 0), c(2, -0.25)})))
    -- NumPy's nan, inf and scientific forms (its output for the same values)
    assert.equal("[1.e+00   +nanj,    inf-1.e+00j, 1.e-05+1.e+05j]",
                 tostring(tf.array({c(1, 0 / 0), c(math.huge, -1), c(1e-5, 1e5)})))
    assert.equal("[ 1. +infj, -2.5-infj,  0. +0.5j]",
                 tostring(tf.array({c(1, math.huge), c(-2.5, -math.huge), c(0, 0.5)}, tf.complex64)))
    assert.equal("tf.Array([0.+1.j], shape=(1,), dtype=complex128)",
                 require("moonflow.printing").repr(tf.array({c(0, 1)})))
    local repr = require("moonflow.printing").repr
    assert.equal("(1+2j)", repr(c(1, 2)))
    assert.equal("(1.5-0.25j)", repr(c(1.5, -0.25)))
    assert.equal("2j", repr(c(0, 2)))
  end)

  it("feed, fetch and keep their shapes", function()
    local x = tf.placeholder(tf.complex64, {-1, 3})
    local y = x * 2
    assert.same({-1, 3}, y:get_shape():as_list())
    local out = sess:run(y, {[x] = H.complex(V.X)})
    local doubled = {}
    for i, v in ipairs(H.flat(V.X)) do doubled[i] = 2 * v end
    H.assert_near_all(doubled, H.flat(H.pairs(out)), TOL32)
    H.assert_values({{{2, 4}, {6, 0}, {0, 0}}}, H.pairs(sess:run(y, {[x] = {{c(1, 2), 3, 0}}})))
    local a = tf.array({{c(1, -1), c(0, 0), c(0, 0.5)}}, tf.complex64)
    H.assert_values({{{2, -2}, {0, 0}, {0, 1}}}, H.pairs(sess:run(y, {[x] = a})))
  end)

  it("cast to and from the real dtypes as TensorFlow does", function()
    local x = tf.constant(H.complex(V.X), tf.complex128)
    H.assert_near_all({1, -0.5, 3, 0.1, 2, -1.5}, sess:run(tf.cast(x, tf.float64)), 0)
    H.assert_values({{1, 0, 3}, {0, 2, -1}}, sess:run(tf.cast(x, tf.int32)):totable())
    H.assert_values({{true, true, true}, {true, true, true}}, sess:run(tf.cast(x, tf.bool)):totable())
    H.assert_values({{1.5, 0}, {-2, 0}}, H.pairs(sess:run(tf.cast(tf.constant({1.5, -2}), tf.complex64))))
    local z = sess:run(tf.cast(x, tf.complex64))
    H.assert_near_all(H.flat(V.X), H.flat(H.pairs(z)), TOL32)
  end)

  it("go through .npy files as NumPy writes them", function()
    local path = os.tmpname()
    local a = tf.array(H.complex(V.X), tf.complex64)
    tf.io.write_npy(path, a)
    local f = io.open(path, "rb")
    local bytes = f:read("*a")
    f:close()
    assert.matches("'descr': '<c8'", bytes, 1, true)
    local back = tf.io.read_npy(path)
    assert.equal(tf.complex64, back.dtype)
    H.assert_values(H.pairs(a), H.pairs(back))
    tf.io.write_npy(path, tf.array({tf.complex_number(1, -1)}))
    assert.equal(tf.complex128, tf.io.read_npy(path).dtype)
    os.remove(path)
  end)

  it("save and restore in checkpoints and graph files", function()
    local dir = os.tmpname()
    os.remove(dir)
    local v = tf.Variable(tf.constant(H.complex(V.X), tf.complex64), {name = "z"})
    local saver = tf.train.Saver()
    sess:run(tf.global_variables_initializer())
    local path = saver:save(sess, dir .. "_ckpt")
    sess:run(v:assign(tf.zeros_like(v)))
    saver:restore(sess, path)
    H.assert_near_all(H.flat(V.X), H.flat(H.pairs(sess:run(v))), TOL32)
    os.remove(path)
    local file = dir .. "_graph.json"
    tf.train.write_graph(tf.get_default_graph(), file)
    local g = tf.train.import_graph(file)
    local z = g:get_tensor_by_name("Const:0")
    assert.equal(tf.complex64, z.dtype)
    local s2 = tf.Session(g)
    H.assert_near_all(H.flat(V.X), H.flat(H.pairs(s2:run(z))), TOL32)
    s2:close()
    os.remove(file)
  end)
end)

describe("complex ops", function()
  local sess
  before_each(function() tf.reset_default_graph(); sess = tf.Session() end)
  after_each(function() sess:close() end)

  for _, dt in ipairs({{tf.complex64, TOL32}, {tf.complex128, TOL64}}) do
    local dtype, tol = dt[1], dt[2]
    local function check(expected, t) H.assert_near_all(H.flat(expected), H.flat(H.pairs(sess:run(t))), tol) end
    local function real_check(expected, t) H.assert_near_all(H.flat(expected), sess:run(t), tol) end

    it("compute elementwise as NumPy, " .. dtype.name, function()
      local x, y = tf.constant(H.complex(V.X), dtype), tf.constant(H.complex(V.Y), dtype)
      check(V.exp, tf.exp(x))
      check(V.log, tf.math.log(x))
      check(V.sqrt, tf.sqrt(x))
      check(V.square, tf.square(x))
      check(V.conj, tf.math.conj(x))
      check(V.add, x + y)
      check(V.sub, x - y)
      check(V.mul, x * y)
      check(V.div, x / y)
      check(V.X, -(-x))
      real_check(V.abs, tf.abs(x))
      real_check(V.angle, tf.math.angle(x))
      assert.equal(dtype.real_dtype, tf.abs(x).dtype)
      local parts = {}
      for i, row in ipairs(V.X) do
        parts[i] = {}
        for j, p in ipairs(row) do parts[i][j] = p[1] end
      end
      real_check(parts, tf.math.real(x))
      check(V.X, tf.complex(tf.math.real(x), tf.math.imag(x)))
    end)

    it("reduce and multiply matrices as NumPy, " .. dtype.name, function()
      local x, m = tf.constant(H.complex(V.X), dtype), tf.constant(H.complex(V.M), dtype)
      check(V.sum0, tf.reduce_sum(x, 0))
      check(V.sum1, tf.reduce_sum(x, 1))
      check(V.mean, tf.reduce_mean(x))
      check(V.matmul, tf.matmul(x, m))
      check(V.matmul, tf.matmul(m, x, {transpose_a = true, transpose_b = true}):transpose())
    end)
  end

  it("go through the layout ops, variables and Lua complex numbers as operands", function()
    local z = tf.constant({{c(1, 2), c(3, 4)}, {c(5, 6), c(7, 8)}}, tf.complex64)
    H.assert_values({{{1, 2}, {5, 6}}, {{3, 4}, {7, 8}}}, H.pairs(sess:run(tf.transpose(z))))
    H.assert_values({{3, 4}, {7, 8}}, H.pairs(sess:run(tf.reshape(tf.slice(z, {0, 1}, {2, 1}), {2}))))
    H.assert_values({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, H.pairs(sess:run(tf.stack({z[0], z[1]}))))
    assert.same({4, 2}, sess:run(tf.concat({z, z}, 0)):shape())
    assert.same({2, 4}, sess:run(tf.tile(z, {1, 2})):shape())
    H.assert_values({{1, 1}, {1, 1}}, H.pairs(sess:run(tf.fill({2}, c(1, 1)))))
    H.assert_values({{{1, 3}, {3, 5}}, {{5, 7}, {7, 9}}}, H.pairs(sess:run(z + c(0, 1))))
    H.assert_values({{true, true}, {true, true}}, sess:run(tf.equal(z, z)):totable())
    local v = tf.Variable(z)
    sess:run(tf.global_variables_initializer())
    sess:run(v:assign_add(z))
    H.assert_values({{{2, 4}, {6, 8}}, {{10, 12}, {14, 16}}}, H.pairs(sess:run(v)))
    local ok, err = pcall(tf.gather, z, {1})
    assert.is_false(ok)
    assert.matches("Gather takes no complex values, but its input 0 is complex64", err, 1, true)
  end)

  it("broadcast tf.complex and lift Lua numbers", function()
    H.assert_values({{1, 2}, {3, 2}}, H.pairs(sess:run(tf.complex(tf.constant({1, 3}), 2))))
    local z = tf.constant({c(1, 1)}, tf.complex64)
    H.assert_values({{2, 1}}, H.pairs(sess:run(z + 1)))
  end)

  it("give real, imag, conj and angle of real numbers as TensorFlow does", function()
    local x = tf.constant({-2, 0, 3})
    H.assert_values({-2, 0, 3}, sess:run(tf.math.real(x)):totable())
    H.assert_values({0, 0, 0}, sess:run(tf.math.imag(x)):totable())
    H.assert_values({-2, 0, 3}, sess:run(tf.math.conj(x)):totable())
    H.assert_near_all({math.pi, 0, 0}, sess:run(tf.math.angle(x)), 1e-7)
  end)

  it("handle empty tensors and scalars", function()
    local e = tf.constant({}, tf.complex64)
    assert.same({0}, sess:run(tf.exp(e)):shape())
    assert.same({0}, sess:run(tf.abs(e)):shape())
    local s = sess:run(tf.reduce_sum(e))
    assert.equal(0, s.re)
    local z = sess:run(tf.sqrt(tf.constant(c(-4, 0), tf.complex128)))
    assert.equal(0, z.re)
    assert.equal(2, z.im)
  end)

  it("refuse mixed and unsupported dtypes with TensorFlow's errors", function()
    local z = tf.constant({c(1, 2)}, tf.complex64)
    assert.has_error(function() return z + tf.constant({1}) end)
    local ok, err = pcall(function() return z + tf.constant({1}) end)
    assert.is_false(ok)
    assert.matches("x has dtype complex64 but y has dtype float32", err)
    ok, err = pcall(function() return z + tf.constant({c(1, 2)}, tf.complex128) end)
    assert.matches("complex64 but y has dtype complex128", err)
    ok, err = pcall(tf.tanh, z)
    assert.matches("Tanh: x has dtype complex64, but Tanh takes only float32, float64", err)
    ok, err = pcall(tf.reduce_max, z)
    assert.matches("Max takes no complex values, but its input 0 is complex64", err)
    ok, err = pcall(tf.complex, tf.constant({1}), tf.constant({1}, tf.float64))
    assert.matches("tf.complex: real and imag must both be float32 or both float64", err)
    ok, err = pcall(tf.complex, z, z)
    assert.matches("tf.complex: real and imag must both be float32 or both float64", err)
    ok, err = pcall(tf.less, z, z)
    assert.matches("Less", err)
    -- the graph stays usable
    H.assert_values({{2, 4}}, H.pairs(sess:run(z + z)))
  end)
end)

describe("complex gradients", function()
  -- Central differences over the float64 parts of a complex input z =
  -- complex(re, im): a rule that conjugates where TensorFlow's does gives the
  -- loss's derivatives along re and im as the real and imaginary parts of dz.
  local DELTA, TOL = 1e-6, 1e-6
  local RE, IM = {0.3, -1.2, 0.8}, {0.7, 0.4, -0.5}
  local W = {c(0.5, 1), c(-2, 0.25), c(1, -1)}

  local function check(build)
    tf.reset_default_graph()
    local re, im = tf.placeholder(tf.float64, {3}), tf.placeholder(tf.float64, {3})
    local z = tf.complex(re, im)
    local loss = build(z)
    for _, part in ipairs({{re, RE, im, IM}, {im, IM, re, RE}}) do
      local x, x0, other, other0 = part[1], part[2], part[3], part[4]
      local sess = tf.Session()
      local dx = tf.gradients(loss, {x})[1]
      local g = sess:run(dx, {[x] = x0, [other] = other0})
      for i = 1, 3 do
        local plus, minus = {unpack(x0)}, {unpack(x0)}
        plus[i], minus[i] = x0[i] + DELTA, x0[i] - DELTA
        local numerical = (sess:run(loss, {[x] = plus, [other] = other0}) -
                           sess:run(loss, {[x] = minus, [other] = other0})) / (2 * DELTA)
        assert(math.abs(numerical - g:get(i - 1)) <= TOL * math.max(1, math.abs(numerical)),
               ("element %d: numerical %.10g, symbolic %.10g"):format(i, numerical, g:get(i - 1)))
      end
      sess:close()
    end
  end
  local function w() return tf.constant(W, tf.complex128) end
  local function real_sum(t) return tf.reduce_sum(tf.math.real(t)) + tf.reduce_sum(tf.math.imag(t) * 0.5) end

  it("of mul, div, add, sub, neg and square", function()
    check(function(z) return real_sum(z * w() + w() / z - z - (-z) * z) end)
    check(function(z) return real_sum(tf.square(z) * w()) end)
    check(function(z) return real_sum(z / w() + w() * z / (z + 2)) end)
  end)
  it("of exp, log, sqrt, sin and cos", function()
    check(function(z) return real_sum(tf.sin(z) * w()) end)
    check(function(z) return real_sum(tf.cos(z * w())) end)
    check(function(z) return real_sum(tf.exp(z) * w()) end)
    check(function(z) return real_sum(tf.math.log(z) * w()) end)
    check(function(z) return real_sum(tf.sqrt(z) * w()) end)
  end)
  it("of abs, angle, real, imag, conj", function()
    check(function(z) return tf.reduce_sum(tf.abs(z * w())) end)
    check(function(z) return tf.reduce_sum(tf.math.angle(z * w()) * tf.constant({1, -2, 0.5}, tf.float64)) end)
    check(function(z) return real_sum(tf.math.conj(z) * w()) end)
    check(function(z) return tf.reduce_sum(tf.math.real(z) * tf.math.imag(z * w())) end)
  end)
  it("of reduce_sum, reduce_mean and matmul", function()
    check(function(z) return tf.reduce_sum(tf.abs(tf.reduce_sum(tf.reshape(z, {3, 1}) * w(), 0))) end)
    check(function(z) return tf.abs(tf.reduce_mean(z * w())) end)
    check(function(z)
      local a = tf.reshape(z, {1, 3})
      local m = tf.reshape(tf.concat({w(), w() * 2}, 0), {3, 2})
      return real_sum(tf.matmul(a, m)) + tf.reduce_sum(tf.abs(tf.matmul(m, a, {transpose_a = true,
                                                                                  transpose_b = true})))
    end)
  end)
  it("of casts between complex and real", function()
    check(function(z) return tf.reduce_sum(tf.cast(z * w(), tf.float64) * tf.constant({1, 2, 3}, tf.float64)) end)
    check(function(z) return real_sum(tf.cast(tf.math.imag(z), tf.complex128) * w()) end)
  end)
end)
