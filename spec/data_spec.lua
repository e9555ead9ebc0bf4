-- tf.data: datasets, transformations, iterators and the CSV reader.
local tf = require("moonflow")
local H = require("spec.helpers")

local Dataset = tf.data.Dataset

-- Every element of a (single-component or structured) get_next until the end
-- of the sequence, fetched one run at a time.
local function drain(sess, next_element, limit)
  local out = {}
  for _ = 1, limit or 1000 do
    local ok, v = pcall(sess.run, sess, next_element)
    if not ok then
      assert.matches("End of sequence", v)
      return out
    end
    if type(v) == "table" and tf.Array.is(v) then v = v:totable() end
    out[#out + 1] = v
  end
  return out
end

local function elements(ds, limit)
  local sess = tf.Session()
  return drain(sess, ds:make_one_shot_iterator():get_next(), limit)
end

local function sorted(t)
  local c = {unpack(t)}
  table.sort(c)
  return c
end

describe("tf.data.Dataset sources", function()
  before_each(function() tf.reset_default_graph() end)

  it("from_tensor_slices slices an array along its first axis", function()
    local ds = Dataset.from_tensor_slices(tf.array({{1, 2}, {3, 4}, {5, 6}}))
    local x = ds:make_one_shot_iterator():get_next()
    assert.is_true(tf.is_tensor(x))
    assert.same({2}, x:get_shape():as_list())
    assert.equal("float32", x.dtype.name)
    local sess = tf.Session()
    assert.same({{1, 2}, {3, 4}, {5, 6}}, drain(sess, x))
  end)

  it("from_tensor_slices keeps a list a list and a map a map", function()
    local xs = tf.array({{1, 2}, {3, 4}, {5, 6}})
    local ys = tf.array({7, 8, 9}, tf.int32)
    local pair = Dataset.from_tensor_slices({xs, ys}):make_one_shot_iterator():get_next()
    assert.equal(2, #pair)
    assert.equal("int32", pair[2].dtype.name)
    local sess = tf.Session()
    local first = sess:run(pair)
    assert.same({1, 2}, first[1]:totable())
    assert.equal(7, first[2])
    local named = Dataset.from_tensor_slices({image = xs, label = ys}):make_one_shot_iterator():get_next()
    assert.is_nil(named[1])
    local v = sess:run(named)
    assert.same({1, 2}, v.image:totable())
    assert.equal(7, v.label)
    v = sess:run({named.label * 10, named.image})
    assert.equal(80, v[1])
    assert.same({3, 4}, v[2]:totable())
  end)

  it("from_tensor_slices takes nested Lua tables as one array", function()
    assert.same({{1, 2}, {3, 4}}, elements(Dataset.from_tensor_slices({{1, 2}, {3, 4}})))
    assert.same({1.5, 2.5, 3.5}, elements(Dataset.from_tensor_slices({1.5, 2.5, 3.5})))
    assert.same({true, false}, elements(Dataset.from_tensor_slices({true, false})))
  end)

  it("from_tensor_slices of a placeholder reads the feeds of the initializer run", function()
    local x = tf.placeholder(tf.float32, {-1, 2})
    local it = Dataset.from_tensor_slices(x):make_initializable_iterator()
    local nxt = it:get_next()
    assert.same({2}, nxt:get_shape():as_list())
    local sess = tf.Session()
    sess:run(it.initializer, {[x] = {{1, 2}, {3, 4}}})
    assert.same({{1, 2}, {3, 4}}, drain(sess, nxt))
    sess:run(it.initializer, {[x] = tf.array({{9, 8}})})
    assert.same({{9, 8}}, drain(sess, nxt))
  end)

  it("range counts like Python's range, in int64", function()
    local r = Dataset.range(4)
    assert.equal("int64", r.output_types.name)
    assert.same({0, 1, 2, 3}, elements(r))
    assert.same({2, 5, 8}, elements(Dataset.range(2, 10, 3)))
    assert.same({5, 3, 1}, elements(Dataset.range(5, 0, -2)))
    assert.same({}, elements(Dataset.range(0)))
  end)

  it("from_generator calls fn once per epoch and checks dtypes and shapes", function()
    local calls = 0
    local gen = function()
      calls = calls + 1
      return coroutine.wrap(function()
        for i = 1, 3 do coroutine.yield({tf.array({i, -i}), i * 10}) end
      end)
    end
    local ds = Dataset.from_generator(gen, {tf.float32, tf.int32}, {{2}, {}})
    local it = ds:make_initializable_iterator()
    local nxt = it:get_next()
    assert.same({2}, nxt[1]:get_shape():as_list())
    local sess = tf.Session()
    for epoch = 1, 2 do
      sess:run(it.initializer)
      local got = drain(sess, {nxt[1], nxt[2]})
      assert.equal(3, #got)
      assert.same({3, -3}, got[3][1]:totable())
      assert.equal(30, got[3][2])
      assert.equal(epoch, calls)
    end
    -- A list is an iterator too; a map structure.
    local named = Dataset.from_generator(function() return {{a = 1, b = true}, {a = 2, b = false}} end,
                                         {a = tf.float64, b = tf.bool})
    local e = named:make_one_shot_iterator():get_next()
    assert.equal("bool", e.b.dtype.name)
    assert.is_nil(e.a:get_shape().dims)  -- no shapes given: unknown
    assert.same({{a = 1, b = true}, {a = 2, b = false}}, drain(tf.Session(), e))
  end)

  it("from_generator names shape and dtype mismatches", function()
    local ds = Dataset.from_generator(function() return {{1, 2, 3}} end, tf.float32, {2})
    local err = H.error_of(elements, ds)
    assert.matches("Dataset.from_generator: the generator gave component 1 of shape %[3%] where shapes says %[2%]", err)
    assert.matches("fn must be a function", H.error_of(Dataset.from_generator, 5, tf.float32))
    assert.matches("dtypes is required", H.error_of(Dataset.from_generator, function() end))
    local bad = Dataset.from_generator(function() return 7 end, tf.float32)
    assert.matches("fn%(%) returned a number; return an iterator function or a list", H.error_of(elements, bad))
  end)

  it("from_tensor_slices rejects scalars and unequal first dimensions", function()
    assert.matches("component 1 is a scalar; slicing needs rank >= 1",
                   H.error_of(Dataset.from_tensor_slices, tf.array(3)))
    assert.matches("different first dimensions %(3 and 2%)",
                   H.error_of(Dataset.from_tensor_slices, {tf.array({1, 2, 3}), tf.array({1, 2})}))
  end)
end)

describe("tf.data transformations", function()
  before_each(function() tf.reset_default_graph() end)

  it("map traces fn once on tensors and runs its ops per element", function()
    local calls, saw_tensors = 0, true
    local ds = Dataset.range(5):map(function(x)
      calls = calls + 1
      saw_tensors = saw_tensors and tf.is_tensor(x)
      return tf.cast(x, tf.float32) * 0.5 + 1
    end)
    assert.equal(1, calls)
    assert.is_true(saw_tensors)
    assert.equal("float32", ds.output_types.name)
    assert.same({1, 1.5, 2, 2.5, 3}, elements(ds))
    assert.equal(1, calls)
  end)

  it("map spreads a list into arguments and returns several values as a list", function()
    local ds = Dataset.from_tensor_slices({tf.array({1, 2, 3}), tf.array({10, 20, 30})})
      :map(function(a, b) return a + b, a * b end)
    assert.same({{11, 10}, {22, 40}, {33, 90}}, elements(ds))
    local m = Dataset.from_tensor_slices({x = tf.array({1, 2}), y = tf.array({3, 4})})
      :map(function(e) return {sum = e.x + e.y, x = e.x} end)
    local e = m:make_one_shot_iterator():get_next()
    assert.same({{sum = 4, x = 1}, {sum = 6, x = 2}}, drain(tf.Session(), e))
  end)

  it("map infers static shapes and changes element shapes", function()
    local ds = Dataset.from_tensor_slices(tf.array({{1, 2, 3, 4}, {5, 6, 7, 8}}))
      :map(function(v) return tf.reshape(v, {2, 2}) end)
    local e = ds:make_one_shot_iterator():get_next()
    assert.same({2, 2}, e:get_shape():as_list())
    assert.same({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, drain(tf.Session(), e))
  end)

  it("map reports a function using a tensor of the outer graph", function()
    local outer = tf.constant(2)
    local err = H.error_of(function()
      Dataset.range(3):map(function(x) return tf.cast(x, tf.float32) * outer end)
    end)
    assert.matches("^Dataset:map: Mul: Tensor%(\"Const:0\"%) must be from the same graph", err)
    assert.matches("a dataset function runs in its own graph", err)
    assert.matches("returned tensor Const:0 of another graph",
                   H.error_of(function() return Dataset.range(3):map(function() return outer end) end))
  end)

  it("filter keeps the elements whose predicate is true", function()
    local ds = Dataset.range(10):filter(function(x) return tf.equal(x % 3, 0) end)
    assert.same({0, 3, 6, 9}, elements(ds))
    assert.matches("the predicate must return a scalar bool tensor, got int64",
                   H.error_of(function() return Dataset.range(3):filter(function(x) return x end) end))
  end)

  it("batch stacks elements; drop_remainder drops the short last batch", function()
    local ds = Dataset.from_tensor_slices(tf.array({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}}))
    local b = ds:batch(2)
    assert.same({-1, 2}, b.output_shapes.dims)
    assert.same({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}}}, elements(b))
    local d = ds:batch(2, {drop_remainder = true})
    assert.same({2, 2}, d.output_shapes.dims)
    assert.same({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, elements(d))
    assert.same({{0, 1, 2}, {3, 4, 5}, {6}}, elements(Dataset.range(7):batch(3)))
    local pairs_ = Dataset.from_tensor_slices({tf.array({1, 2, 3}, tf.int32), tf.array({true, false, true})}):batch(2)
    local e = pairs_:make_one_shot_iterator():get_next()
    local v = tf.Session():run(e)
    assert.same({1, 2}, v[1]:totable())
    assert.same({true, false}, v[2]:totable())
  end)

  it("batch names elements of unequal shapes", function()
    local ds = Dataset.from_generator(function() return {{1, 2}, {1, 2, 3}} end, tf.float32, {-1}):batch(2)
    assert.matches("Dataset:batch: element 2 has shape %[3%] but element 1 has shape %[2%]", H.error_of(elements, ds))
    assert.matches("batch_size must be a positive integer, got 0", H.error_of(function() return Dataset.range(3):batch(0) end))
  end)

  it("shuffle is a seeded permutation, reproducible, reshuffled each pass", function()
    local a = elements(Dataset.range(10):shuffle(4, {seed = 42}))
    local b = elements(Dataset.range(10):shuffle(4, {seed = 42}))
    assert.same({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, sorted(a))
    assert.same(a, b)
    assert.are_not.same({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, a)
    -- A buffer of 1 cannot reorder anything.
    assert.same({0, 1, 2, 3, 4}, elements(Dataset.range(5):shuffle(1, {seed = 3})))
    -- A buffer of 4: the first element comes from the first 4.
    for seed = 1, 20 do
      assert.is_true(elements(Dataset.range(10):shuffle(4, {seed = seed}))[1] < 4)
    end
    -- Two passes (repeat): each a permutation; new order unless told otherwise.
    local two = elements(Dataset.range(8):shuffle(8, {seed = 7}):repeat_(2))
    local p1, p2 = {unpack(two, 1, 8)}, {unpack(two, 9, 16)}
    assert.same({0, 1, 2, 3, 4, 5, 6, 7}, sorted(p1))
    assert.same({0, 1, 2, 3, 4, 5, 6, 7}, sorted(p2))
    assert.are_not.same(p1, p2)
    local same = elements(Dataset.range(8):shuffle(8, {seed = 7, reshuffle_each_iteration = false}):repeat_(2))
    assert.same({unpack(same, 1, 8)}, {unpack(same, 9, 16)})
    assert.same(p1, {unpack(same, 1, 8)})
  end)

  it("shuffle without a seed follows tf.set_random_seed", function()
    tf.set_random_seed(5)
    local a = elements(Dataset.range(10):shuffle(10))
    tf.reset_default_graph()
    tf.set_random_seed(5)
    local b = elements(Dataset.range(10):shuffle(10))
    assert.same(a, b)
  end)

  it("repeat_, take and skip", function()
    assert.same({0, 1, 2, 0, 1, 2}, elements(Dataset.range(3):repeat_(2)))
    assert.same({0, 1, 0, 1, 0}, elements(Dataset.range(2):repeat_():take(5)))
    assert.same({0, 1, 0, 1}, elements(Dataset.range(2)["repeat"](Dataset.range(2), 2)))
    assert.same({}, elements(Dataset.range(0):repeat_()))
    assert.same({3, 4}, elements(Dataset.range(5):skip(3)))
    assert.same({}, elements(Dataset.range(5):skip(-1)))
    assert.same({0, 1, 2, 3, 4}, elements(Dataset.range(5):take(-1)))
    assert.same({2, 3}, elements(Dataset.range(10):skip(2):take(2)))
    assert.matches("Dataset:take: expected an integer count, got 1.5", H.error_of(function() return Dataset.range(3):take(1.5) end))
  end)

  it("cache replays the first complete pass without running the pipeline again", function()
    local calls = 0
    local ds = Dataset.from_generator(function()
      calls = calls + 1
      return {1, 2, 3}
    end, tf.float32, {}):cache()
    local it = ds:make_initializable_iterator()
    local nxt = it:get_next()
    local sess = tf.Session()
    for _ = 1, 3 do
      sess:run(it.initializer)
      assert.same({1, 2, 3}, drain(sess, nxt))
    end
    assert.equal(1, calls)
    -- Cached inside a repeat: the source runs once for all passes.
    calls = 0
    assert.same({1, 2, 3, 1, 2, 3, 1, 2, 3}, elements(ds:repeat_(3)))
    assert.equal(1, calls)
    -- A pass cut short is not kept.
    calls = 0
    local short = ds:take(2):repeat_(2)
    assert.same({1, 2, 1, 2}, elements(short))
    assert.equal(2, calls)
  end)

  it("prefetch passes elements through and checks its argument", function()
    assert.same({0, 1, 2}, elements(Dataset.range(3):prefetch(2)))
    assert.same({0, 1, 2}, elements(Dataset.range(3):prefetch(tf.data.experimental.AUTOTUNE)))
    assert.matches("buffer_size must be a positive integer or tf.data.experimental.AUTOTUNE",
                   H.error_of(function() return Dataset.range(3):prefetch(0) end))
  end)

  it("methods called with a dot say how to call them", function()
    assert.matches("call it as a method %(ds:map", H.error_of(Dataset.map, 3, function() end))
  end)
end)

-- Every outcome of ds's get_next until the end (H.outcomes).
local function outcomes(ds, limit)
  return H.outcomes(tf.Session(), ds:make_one_shot_iterator():get_next(), limit)
end

-- The batches of source():map(f):batch(n, opts), and of the same pipeline
-- with f's result reshaped to its own shape (a Reshape is not elementwise, so
-- that map runs per element); returns both and how many blocks ran fused.
local function fused_and_plain(source, f, n, opts)
  local before = tf.data._fused_blocks
  local fused = outcomes(source():map(f):batch(n, opts))
  local blocks = tf.data._fused_blocks - before
  local plain = outcomes(source():map(function(...)
    local r = f(...)
    return tf.reshape(r, tf.shape(r))
  end):batch(n, opts))
  assert.equal(before + blocks, tf.data._fused_blocks, "the reshaped map runs per element")
  return fused, plain, blocks
end

local rows = H.rows

describe("tf.data map-and-batch fusion", function()
  before_each(function() tf.reset_default_graph() end)

  it("runs an elementwise map once per batch, with the elements of the per-element path", function()
    local src = function() return Dataset.from_tensor_slices(rows(10, 3)) end
    local fused, plain, blocks = fused_and_plain(src, function(v) return v * 2 + 1 end, 4)
    assert.equal(3, blocks)
    assert.same(plain, fused)
    -- rows(10, 3)[1] = {5, -3, 0} -> {11, -5, 1}; 4, 4 and a final partial batch of 2
    assert.same({11, -5, 1}, fused[1][1])
    assert.same({4, 4, 2}, {#fused[1], #fused[2], #fused[3]})
    local dropped, plain_dropped = fused_and_plain(src, function(v) return v * 2 + 1 end, 4, {drop_remainder = true})
    assert.same(plain_dropped, dropped)
    assert.same({fused[1], fused[2]}, dropped)
    -- Transcendental kernels too: the same float32 bits, batched or not.
    local fused_t, plain_t, blocks_t = fused_and_plain(
      function() return Dataset.from_tensor_slices(rows(9, 5, 0.37)) end,
      function(v) return tf.tanh(v * 0.5 + 1) / 3 + tf.exp(-v * v) end, 4)
    assert.same(plain_t, fused_t)
    assert.equal(3, #fused_t)
    assert.equal(3, blocks_t)
  end)

  it("fuses scalar elements, int64 ranges, several components and returned arguments", function()
    local before = tf.data._fused_blocks
    assert.same({{1, 3, 5}, {7, 9, 11}, {13}},
                outcomes(Dataset.range(7):map(function(x) return x * 2 + 1 end):batch(3)))
    local a = tf.array({{1, 2}, {3, 4}, {5, 6}})
    local b = tf.array({7, 8, 9}, tf.int32)
    assert.same({{{{2, 4}, {6, 8}}, {8, 9}}, {{{10, 12}}, {10}}},
                outcomes(Dataset.from_tensor_slices({a, b}):map(function(x, y) return x * 2, y + 1 end):batch(2)))
    assert.same({{s = {{2, 3}, {4, 5}, {6, 7}}, y = {7, 8, 9}}},
                outcomes(Dataset.from_tensor_slices({x = a, y = b})
                  :map(function(e) return {s = e.x + 1, y = e.y} end):batch(3)))
    assert.equal(before + 6, tf.data._fused_blocks)
  end)

  it("runs functions that are not elementwise along the batch per element, with the same results", function()
    local v3 = function() return Dataset.from_tensor_slices(tf.array({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}})) end
    local cases = {
      -- a reduction over the element's own axis
      {v3, function(v) return tf.reduce_sum(v) end, {{6, 15}, {24}}},
      -- a constant of higher rank than the element: broadcasting adds axes in front
      {v3, function(v) return v + tf.constant({{0, 0, 0}, {10, 10, 10}}) end,
       {{{{1, 2, 3}, {11, 12, 13}}, {{4, 5, 6}, {14, 15, 16}}}, {{{7, 8, 9}, {17, 18, 19}}}}},
      -- a scalar element and a vector constant
      {function() return Dataset.range(3) end,
       function(x) return tf.cast(x, tf.float32) + tf.constant({10, 20}) end, {{{10, 20}, {11, 21}}, {{12, 22}}}},
      -- TensorFlow 1.x's Select with a vector condition picks rows once batched
      {v3, function(v) return tf.where(tf.constant({true, false, true}), v, -v) end,
       {{{1, -2, 3}, {4, -5, 6}}, {{7, -8, 9}}}},
      -- a matmul
      {v3, function(v) return tf.matmul(tf.reshape(v, {1, 3}), tf.constant({{1}, {1}, {1}})) end,
       {{{{6}}, {{15}}}, {{{24}}}}},
    }
    for i, c in ipairs(cases) do
      local before = tf.data._fused_blocks
      assert.same(c[3], outcomes(c[1]():map(c[2]):batch(2)), "case " .. i)
      assert.equal(before, tf.data._fused_blocks, "case " .. i .. " runs per element")
    end
    -- A random op draws per element: not fused either.
    local before = tf.data._fused_blocks
    local drawn = outcomes(v3():map(function(v) return v + tf.random_uniform({3}, {seed = 1}) end):batch(3))
    assert.equal(before, tf.data._fused_blocks)
    assert.equal(3, #drawn[1])
    assert.are_not.same(drawn[1][1][1] - 1, drawn[1][2][1] - 4)
  end)

  it("raises an error inside the function at its element, naming the user's line, and goes on after it", function()
    local values = tf.array({{4, 2}, {3, 0}, {1, 1}, {5, 5}, {2, 1}}, tf.int32)
    local src = function() return Dataset.from_tensor_slices(values) end
    local f = function(x)
      local y = tf.floordiv(10, x)  -- (not a tail call: the line stays on the stack)
      return y
    end
    local line = debug.getinfo(1, "l").currentline - 3
    local fused, plain, blocks = fused_and_plain(src, f, 2)
    -- The batch holding the failing element is lost; the rows after it make the next batches.
    assert.same({{error = fused[1].error}, {{10, 10}, {2, 2}}, {{5, 10}}}, fused)
    assert.matches("^Dataset:map: FloorDiv: Integer division by zero %[%[node FloorDiv %(defined at " ..
                   "[^)]*data_spec.lua:" .. line .. "%)%]%]", fused[1].error)
    assert.same(plain, fused)
    assert.is_true(blocks >= 2)
  end)

  it("joins the passes of a repeat between map and batch into full batches", function()
    local before = tf.data._fused_blocks
    local got = outcomes(Dataset.from_tensor_slices(tf.array({1, 2, 3, 4, 5})):map(function(x) return x * 10 end)
      :repeat_(2):batch(4))
    assert.same({{10, 20, 30, 40}, {50, 10, 20, 30}, {40, 50}}, got)
    assert.is_true(tf.data._fused_blocks > before)
  end)

  it("batches a shuffled from_tensor_slices by gathering rows, in the order of its elements", function()
    local labels = tf.array({10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, tf.int32)
    local function shuffled()
      return Dataset.from_tensor_slices({rows(11, 3), labels}):shuffle(4, {seed = 3}):repeat_(2)
    end
    local one = outcomes(shuffled())
    assert.equal(22, #one)
    local want = {}
    for i, e in ipairs(one) do
      local b = math.floor((i - 1) / 5) + 1
      want[b] = want[b] or {{}, {}}
      table.insert(want[b][1], e[1])
      table.insert(want[b][2], e[2])
    end
    assert.same(want, outcomes(shuffled():batch(5)))
    -- and a fused map after the shuffle
    local mapped = outcomes(shuffled():map(function(x, y) return x * 2, y end):batch(5))
    for b, batch in ipairs(want) do
      for r, row in ipairs(batch[1]) do
        for c, v in ipairs(row) do assert.equal(v * 2, mapped[b][1][r][c]) end
      end
      assert.same(batch[2], mapped[b][2])
    end
  end)

  it("restarts with the iterator's initializer", function()
    local it = Dataset.from_tensor_slices(rows(7, 2)):map(function(v) return v - 1 end):batch(3)
      :make_initializable_iterator()
    local x = it:get_next()
    local sess = tf.Session()
    sess:run(it.initializer)
    local first = sess:run(x):totable()
    sess:run(x)
    sess:run(it.initializer)
    local again = drain(sess, x)
    assert.same(first, again[1])
    assert.same({3, 3, 1}, {#again[1], #again[2], #again[3]})
  end)

  it("map takes num_parallel_calls", function()
    local src = tf.array({1, 2, 3, 4, 5})
    for _, p in ipairs({2, tf.data.experimental.AUTOTUNE}) do
      assert.same({{2, 4}, {6, 8}, {10}},
                  outcomes(Dataset.from_tensor_slices(src):map(function(x) return x * 2 end, p):batch(2)))
      assert.same({2, 4, 6, 8, 10},
                  outcomes(Dataset.from_tensor_slices(src):map(function(x) return x * 2 end, {num_parallel_calls = p})))
    end
    assert.matches("Dataset:map: num_parallel_calls must be a positive integer or tf.data.experimental.AUTOTUNE, got 0",
                   H.error_of(function() return Dataset.range(3):map(function(x) return x end, 0) end))
  end)
end)

describe("tf.data iterators", function()
  before_each(function() tf.reset_default_graph() end)

  it("end of sequence is a catchable error and the session stays usable", function()
    local x = Dataset.range(2):make_one_shot_iterator():get_next()
    local c = tf.constant(5)
    local sess = tf.Session()
    assert.equal(0, sess:run(x))
    assert.equal(1, sess:run(x))
    local ok, err = pcall(sess.run, sess, x)
    assert.is_false(ok)
    assert.matches("End of sequence", err)
    assert.matches("one%-shot iterator does not restart", err)
    assert.matches("End of sequence", H.error_of(sess.run, sess, x + 1))
    assert.equal(5, sess:run(c))
  end)

  it("an initializable iterator must be initialized and restarts on each initializer run", function()
    local it = Dataset.range(3):make_initializable_iterator()
    local x = it:get_next()
    local sess = tf.Session()
    assert.matches("GetNext%(%) failed because the iterator has not been initialized", H.error_of(sess.run, sess, x))
    sess:run(it.initializer)
    assert.equal(0, sess:run(x))
    sess:run(it.initializer)
    assert.same({0, 1, 2}, drain(sess, x))
    assert.matches("run it.initializer to start another", H.error_of(sess.run, sess, x))
    sess:run(it.initializer)
    assert.equal(0, sess:run(x))
  end)

  it("advances once per run that needs get_next, not on other runs", function()
    local x = Dataset.range(100):make_one_shot_iterator():get_next()
    local y = tf.cast(x, tf.float32) * 2
    local other = tf.constant(1) + 1
    local sess = tf.Session()
    assert.same({0, 0}, sess:run({x, y}))       -- two fetches of one element: one step
    assert.equal(2, sess:run(other))
    assert.equal(1, sess:run(x))                -- the run of `other` did not advance
    -- Through a control dependency and a target op.
    local v = tf.Variable(0, {dtype = tf.int64})
    sess:run(v.initializer)
    local step = v:assign_add(x)
    sess:run(step)                              -- adds 2
    sess:run(tf.group(step))                    -- adds 3
    assert.equal(5, sess:run(v))
    local after = tf.control_dependencies({step}, function() return tf.identity(other) end)
    assert.equal(2, sess:run(after))            -- adds 4
    assert.equal(9, sess:run(v))
    assert.equal(5, sess:run(x))
  end)

  it("each get_next call advances on its own; fed get_next tensors do not advance", function()
    local it = Dataset.range(10):make_one_shot_iterator()
    local a, b = it:get_next(), it:get_next()
    local sess = tf.Session()
    assert.same({0, 1}, sess:run({a, b}))
    assert.equal(100, sess:run(a, {[a] = 100}))
    assert.equal(2, sess:run(a))
  end)

  it("two sessions iterate independently", function()
    local x = Dataset.range(3):make_one_shot_iterator():get_next()
    local s1, s2 = tf.Session(), tf.Session()
    assert.equal(0, s1:run(x))
    assert.equal(1, s1:run(x))
    assert.equal(0, s2:run(x))
    assert.equal(2, s1:run(x))
  end)

  it("make_callable feeds the iterator too", function()
    local it = Dataset.range(3):map(function(v) return v * 10 end):make_initializable_iterator()
    local x = it:get_next()
    local k = tf.placeholder(tf.int64, {})
    local sess = tf.Session()
    local init = sess:make_callable(it.initializer)
    local step = sess:make_callable(x + k, {k})
    init()
    assert.equal(1, step(1))
    assert.equal(12, step(2))
    assert.equal(23, step(3))
    assert.matches("End of sequence", H.error_of(step, 4))
    init()
    assert.equal(0, step(0))
  end)

  it("creates no constants for the data it feeds", function()
    local n = 50000
    local big = tf.Array.new(tf.float32, {n, 4})
    local d = big:data()
    for i = 0, n * 4 - 1 do d[i] = i % 7 end
    local it = Dataset.from_tensor_slices({big, tf.array(H.uniform(n), tf.float32)})
      :shuffle(100, {seed = 1}):batch(32):repeat_(2):make_one_shot_iterator()
    local x, y = unpack(it:get_next())
    local loss = tf.reduce_sum(x) + tf.reduce_sum(y)
    local sess = tf.Session()
    for _ = 1, 3 do sess:run(loss) end
    for _, op in ipairs(tf.get_default_graph():get_operations()) do
      if op.type == "Const" then
        local s = op:output(0):get_shape()
        assert.is_true((s:num_elements() or 0) <= 1, "large constant " .. op.name)
      end
    end
    assert.same({-1, 4}, x:get_shape():as_list())
  end)

  it("reuses batch buffers only when nothing holds them", function()
    local x = Dataset.range(48):map(function(v) return tf.cast(v, tf.float32) end):batch(4)
      :make_one_shot_iterator():get_next()
    local y = x * 1
    local sess = tf.Session()
    local kept = sess:run(x)                    -- a fetched batch stays the caller's
    local sums = {}
    for i = 1, 8 do sums[i] = sess:run(tf.reduce_sum(y)) end
    assert.same({0, 1, 2, 3}, kept:totable())
    assert.same({22, 38, 54, 70, 86, 102, 118, 134}, sums)
    local v = tf.Variable(tf.zeros({4}))
    sess:run(v.initializer)
    sess:run(tf.assign(v, x))                   -- a variable holding a fed batch
    sess:run(x)
    assert.same({36, 37, 38, 39}, sess:run(v):totable())
  end)

  it("trains a linear model from a shuffled, batched, repeated dataset", function()
    -- y = 3x - 2 on 64 points; 40 epochs of 8 batches of 8.
    local xs, ys = {}, {}
    for i = 1, 64 do xs[i] = (i - 32) / 32; ys[i] = 3 * xs[i] - 2 end
    local ds = Dataset.from_tensor_slices({tf.array(xs), tf.array(ys)})
      :shuffle(64, {seed = 3}):batch(8):repeat_(40)
    local x, y = unpack(ds:make_one_shot_iterator():get_next())
    local w = tf.Variable(0.0)
    local b = tf.Variable(0.0)
    local loss = tf.reduce_mean(tf.square(w * x + b - y))
    local train = tf.train.GradientDescentOptimizer(0.5):minimize(loss)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local steps = 0
    while pcall(sess.run, sess, train) do steps = steps + 1 end
    assert.equal(320, steps)
    assert.is_true(math.abs(sess:run(w) - 3) < 1e-3)
    assert.is_true(math.abs(sess:run(b) + 2) < 1e-3)
  end)

  it("get_next builds in the iterator's graph only", function()
    local g = tf.Graph()
    local it = g:as_default(function() return Dataset.range(3):make_one_shot_iterator() end)
    assert.matches("belongs to another graph", H.error_of(function() return it:get_next() end))
    local x = g:as_default(function() return it:get_next() end)
    assert.equal(0, tf.Session(g):run(x))
  end)
end)

describe("tf.data.experimental.CsvDataset", function()
  before_each(function() tf.reset_default_graph() end)

  local function csv(text)
    local p = os.tmpname()
    local f = assert(io.open(p, "wb"))
    f:write(text)
    f:close()
    return p
  end

  it("reads records as lists of scalars of the given dtypes", function()
    local p = csv("x,label,ok\r\n1.5,3,true\n-2,  7 ,0\n\n4e2,-1,1\n")
    local ds = tf.data.experimental.CsvDataset(p, {tf.float32, tf.int32, tf.bool}, {header = true})
    local e = ds:make_one_shot_iterator():get_next()
    assert.equal(3, #e)
    assert.equal("int32", e[2].dtype.name)
    assert.same({{1.5, 3, true}, {-2, 7, false}, {400, -1, true}}, drain(tf.Session(), e))
    -- Batched into columns.
    local cols = tf.Session():run(ds:batch(3):make_one_shot_iterator():get_next())
    assert.same({1.5, -2, 400}, cols[1]:totable())
    assert.same({3, 7, -1}, cols[2]:totable())
    os.remove(p)
  end)

  it("selects columns, reads several files and names bad fields by line", function()
    local a = csv("1;2;3\n4;5;6\n")
    local b = csv("7;8;9\n")
    local ds = tf.data.experimental.CsvDataset({a, b}, {tf.int64, tf.float64}, {field_delim = ";", select_cols = {0, 2}})
    assert.same({{1, 3}, {4, 6}, {7, 9}}, elements(ds))
    local bad = csv("1,2\n3,x\n")
    assert.matches("line 2, column 1: 'x' is not a number",
                   H.error_of(elements, tf.data.experimental.CsvDataset(bad, {tf.float32, tf.float32})))
    assert.matches("line 1 has 2 fields, expected 3",
                   H.error_of(elements, tf.data.experimental.CsvDataset(bad, {tf.float32, tf.float32, tf.float32})))
    assert.matches("'2.5' is not an integer",
                   H.error_of(elements, tf.data.experimental.CsvDataset(csv("2.5\n"), {tf.int32})))
    assert.matches("CsvDataset: cannot open '/nonexistent.csv'",
                   H.error_of(tf.data.experimental.CsvDataset, "/nonexistent.csv", {tf.float32}))
    os.remove(a); os.remove(b); os.remove(bad)
  end)

  it("range-checks every value against its dtype, naming file, line and column", function()
    local function err(text, dtypes)
      local p = csv(text)
      local x = tf.data.experimental.CsvDataset(p, dtypes):make_one_shot_iterator():get_next()
      local sess = tf.Session()
      local at = H.this_line() + 1
      local e = H.error_of(function() while true do sess:run(x) end end)
      os.remove(p)
      return e, p, at
    end
    local e, p, at = err("1\n3000000000\n", {tf.int32})
    assert.equal("CsvDataset: " .. p .. " line 2, column 0: Field 0 in record 2 is not a valid int32: 3000000000 " ..
                 "(out of range [-2147483648, 2147483647]) (at spec/data_spec.lua:" .. at .. ")", e)
    assert.matches("line 1, column 1: Field 1 in record 1 is not a valid uint8: %-1 %(out of range %[0, 255%]%)",
                   (err("0,-1\n", {tf.uint8, tf.uint8})))
    assert.matches("Field 0 in record 1 is not a valid uint8: 300", (err("300\n", {tf.uint8})))
    assert.matches("Field 0 in record 1 is not a valid int32: %-2147483649", (err("-2147483649\n", {tf.int32})))
    assert.matches("not a valid int64: 9223372036854775808", (err("9223372036854775808\n", {tf.int64})))
    assert.matches("not a valid int64: %-9223372036854775809", (err("-9223372036854775809\n", {tf.int64})))
    assert.matches("not a valid float32: 1e40", (err("1e40\n", {tf.float32})))
    assert.matches("not a valid float64: 1e999", (err("1e999\n", {tf.float64})))
    assert.matches("'0x10' is not a decimal number", (err("0x10\n", {tf.float32})))
    assert.matches("'4e2' is not an integer", (err("4e2\n", {tf.int32})))
    -- The edges of each range are accepted.
    local p = csv("2147483647,-2147483648,255,0,3.4028234663852886e38,-inf,nan\n")
    local v = elements(tf.data.experimental.CsvDataset(p, {tf.int32, tf.int32, tf.uint8, tf.uint8, tf.float32,
                                                           tf.float32, tf.float32}))[1]
    assert.same({2147483647, -2147483648, 255, 0, 3.4028234663852886e38, -math.huge}, {unpack(v, 1, 6)})
    assert.is_true(v[7] ~= v[7])
    os.remove(p)
  end)

  it("parses int64 exactly, beyond 2^53", function()
    local p = csv("9007199254740993\n-9223372036854775808\n9223372036854775807\n-42\n")
    local b = tf.Session():run(tf.data.experimental.CsvDataset(p, {tf.int64}):batch(4):make_one_shot_iterator():get_next())
    local d = b[1]._data
    assert.is_true(d[0] == 9007199254740993LL, tostring(d[0]))
    assert.is_true(d[1] == -9223372036854775807LL - 1, tostring(d[1]))
    assert.is_true(d[2] == 9223372036854775807LL, tostring(d[2]))
    assert.is_true(d[3] == -42LL, tostring(d[3]))
    os.remove(p)
  end)

  it("reads quoted fields, skips a byte order mark and takes any delimiter literally", function()
    local p = csv('\239\187\191"1,5",2\n"say ""hi""",3\n" two\nlines ", 4\n')
    local ds = tf.data.experimental.CsvDataset(p, {tf.int32}, {select_cols = {1}})
    assert.same({{2}, {3}, {4}}, elements(ds))
    os.remove(p)
    p = csv('\239\187\191"7",  "1.5e1" ,8\n')
    assert.same({{7, 15, 8}}, elements(tf.data.experimental.CsvDataset(p, {tf.int32, tf.float32, tf.int64})))
    os.remove(p)
    -- A letter as the delimiter is that letter, not a pattern class ("%a").
    p = csv("xay\n1a2a3\n4a5a6\n")
    assert.same({{1, 3}, {4, 6}},
                elements(tf.data.experimental.CsvDataset(p, {tf.int32, tf.int32}, {header = true, field_delim = "a",
                                                                                     select_cols = {0, 2}})))
    os.remove(p)
    p = csv("3.4\n")
    assert.same({{3, 4}}, elements(tf.data.experimental.CsvDataset(p, {tf.int32, tf.int32}, {field_delim = "."})))
    os.remove(p)
    local bad = csv('"1"x,2\n')
    assert.matches("line 1: a quoted field must be followed by the delimiter or the end of the record, found 'x'",
                   H.error_of(elements, tf.data.experimental.CsvDataset(bad, {tf.int32, tf.int32})))
    os.remove(bad)
    bad = csv('1,"2\n3\n')
    assert.matches("a quoted field is not closed before the end of the file",
                   H.error_of(elements, tf.data.experimental.CsvDataset(bad, {tf.int32, tf.int32})))
    os.remove(bad)
  end)

  it("closes its files at the end of each epoch and on re-initialization", function()
    local ffi = require("ffi")
    pcall(ffi.cdef, "int getpid(void);")
    local p = csv("1\n2\n3\n")
    -- Descriptors of this process open on the CSV file (others come and go
    -- with the rest of the suite, so only these are counted).
    local function open_fds()
      local h = io.popen("ls -l /proc/" .. ffi.C.getpid() .. "/fd | grep -cF -- '" .. p .. "'")
      local n = tonumber(h:read("*a"))
      h:close()
      return n
    end
    local it = tf.data.experimental.CsvDataset(p, {tf.int32}):make_initializable_iterator()
    local x = it:get_next()
    local sess = tf.Session()
    collectgarbage("collect")
    collectgarbage("stop")  -- only explicit closes count
    local before = open_fds()
    for _ = 1, 20 do
      sess:run(it.initializer)
      assert.equal(1, sess:run(x)[1])        -- abandoned mid-epoch: the next initializer closes it
    end
    for _ = 1, 20 do
      sess:run(it.initializer)
      assert.equal(3, #drain(sess, x))       -- read to the end: closed there
    end
    local after = open_fds()
    collectgarbage("restart")
    assert.equal(0, before)
    assert.equal(0, after)
    os.remove(p)
  end)
end)
