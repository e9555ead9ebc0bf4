-- tf.train.Saver: safetensors checkpoints, restore into fresh graphs, errors
-- that leave the variables untouched, max_to_keep and the checkpoint index.
local tf = require("moonflow")
local ffi = require("ffi")
local H = require("spec.helpers")
local tmpdir, read, write = H.tmpdir, H.read, H.write
pcall(ffi.cdef, "int memcmp(const void *a, const void *b, size_t n);")

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local files_in = H.files_in

-- Builds w (float32 3x4), b (float64 {4}), n (int32 scalar), k (int64 {2}),
-- mask (bool {3}) and u (uint8 {2}) in the default graph with these initial values.
local W = {}
for i = 1, 3 do W[i] = {} for j = 1, 4 do W[i][j] = H.values(12, 3)[(i - 1) * 4 + j] end end
local B = {0.1, -2.25, 1e-300, 3.14159265358979}
local function build(init)
  local vals = init or {w = W, b = B, n = 42, k = {2 ^ 40 + 3, -7}, mask = {true, false, true}, u = {0, 255}}
  return {
    w = tf.Variable(tf.constant(vals.w), {name = "w"}),
    b = tf.Variable(tf.constant(vals.b, tf.float64), {name = "b"}),
    n = tf.Variable(tf.constant(vals.n, tf.int32), {name = "n"}),
    k = tf.Variable(tf.constant(vals.k, tf.int64), {name = "k"}),
    mask = tf.Variable(tf.constant(vals.mask, tf.bool), {name = "mask"}),
    u = tf.Variable(tf.constant(vals.u, tf.uint8), {name = "u"}),
  }
end
local ZERO = {w = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, b = {0, 0, 0, 0}, n = 0, k = {0, 0},
              mask = {false, false, false}, u = {0, 0}}

describe("tf.train.Saver", function()
  local dir
  before_each(function()
    tf.reset_default_graph()
    dir = tmpdir()
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("round-trips float32, float64, int32, int64, bool and uint8 values into a fresh graph", function()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local saved = sess:run({w = v.w, b = v.b, n = v.n, k = v.k, mask = v.mask, u = v.u})
    local path = tf.train.Saver():save(sess, dir .. "/model.ckpt")
    assert.equal(dir .. "/model.ckpt", path)

    tf.reset_default_graph()
    local v2 = build(ZERO)
    local s2 = tf.Session()
    local saver = tf.train.Saver()
    saver:restore(s2, path)  -- no initializer run: restoring initializes
    local got = s2:run({w = v2.w, b = v2.b, n = v2.n, k = v2.k, mask = v2.mask, u = v2.u})
    assert.same(saved.w:totable(), got.w:totable())
    assert.same(B, got.b:totable())               -- float64 exactly, 1e-300 included
    assert.equal(42, got.n)
    assert.equal(v2.k.dtype, tf.int64)
    assert.is_true(got.k:data()[0] == 2 ^ 40 + 3)
    assert.same({2 ^ 40 + 3, -7}, got.k:totable())
    assert.same({true, false, true}, got.mask:totable())
    assert.same({0, 255}, got.u:totable())
    -- float32 bits are kept exactly (not via decimal text)
    for i = 0, 11 do assert.is_true(saved.w:data()[i] == got.w:data()[i]) end
  end)

  it("writes safetensors: 8-byte header length, JSON header, raw little-endian data", function()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local path = tf.train.Saver({v.w, v.n}):save(sess, dir .. "/m")
    local s = read(path)
    local n = 0
    for i = 8, 1, -1 do n = n * 256 + s:byte(i) end
    assert.equal(0, n % 8)
    -- keys sorted, the data in the saver's order of names (n, w)
    assert.equal('{"__metadata__":{"format":"moonflow"},"n":{"data_offsets":[0,4],"dtype":"I32","shape":[]},' ..
                 '"w":{"data_offsets":[4,52],"dtype":"F32","shape":[3,4]}}', (s:sub(9, 8 + n):gsub(" +$", "")))
    assert.equal(8 + n + 52, #s)
    -- n = 42 as a little-endian int32 right after the header
    assert.equal(string.char(42, 0, 0, 0), s:sub(9 + n, 12 + n))
    -- w[0][0] as float32 bytes
    local f = ffi.new("float[1]", W[1][1])
    assert.equal(ffi.string(f, 4), s:sub(13 + n, 16 + n))
  end)

  it("saves a list or a map of variables under the given names", function()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local path = tf.train.Saver({weights = v.w, count = v.n}):save(sess, dir .. "/renamed")
    local names = {}
    for _, e in ipairs(tf.train.list_variables(path)) do names[#names + 1] = e[1] end
    assert.same({"count", "weights"}, names)
    assert.same(sess:run(v.w):totable(), tf.train.load_variable(path, "weights"):totable())

    tf.reset_default_graph()
    local other = tf.Variable(tf.zeros({3, 4}), {name = "other_name"})
    local s2 = tf.Session()
    tf.train.Saver({weights = other}):restore(s2, path)
    assert.same(sess:run(v.w):totable(), s2:run(other):totable())
  end)

  it("saves optimizer slot variables with the global variables (w/Adam)", function()
    local w = tf.Variable({1, 2}, {name = "w"})
    local loss = tf.reduce_sum(w * w)
    local train = tf.train.AdamOptimizer(0.1):minimize(loss)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    for _ = 1, 3 do sess:run(train) end
    local path = tf.train.Saver():save(sess, dir .. "/adam")
    local names = {}
    for _, e in ipairs(tf.train.list_variables(path)) do names[e[1]] = true end
    assert.is_true(names["w"] and names["w/Adam"] and names["w/Adam_1"])
    local m = sess:run(tf.get_default_graph():get_tensor_by_name("w/Adam:0"))
    assert.same(m:totable(), tf.train.load_variable(path, "w/Adam"):totable())
  end)

  it("appends the global step (a number or a variable) to the path", function()
    local v = build()
    local step = tf.Variable(tf.constant(100, tf.int64), {name = "global_step", trainable = false})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local saver = tf.train.Saver()
    assert.equal(dir .. "/model.ckpt-7", saver:save(sess, dir .. "/model.ckpt", {global_step = 7}))
    assert.equal(dir .. "/model.ckpt-100", saver:save(sess, dir .. "/model.ckpt", {global_step = step}))
    assert.is_true(exists(dir .. "/model.ckpt-7") and exists(dir .. "/model.ckpt-100"))
    assert.equal(42, tf.train.load_variable(dir .. "/model.ckpt-100", "n"):get())
    assert.is_truthy(v)
  end)

  it("rejects a global step that is not an integer, writing nothing", function()
    build()
    local half = tf.Variable(tf.constant(2.5), {name = "half", trainable = false})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local saver = tf.train.Saver()
    local function err(step)
      return H.without_line(H.error_of(saver.save, saver, sess, dir .. "/m", {global_step = step}))
    end
    assert.equal("Saver:save: global_step must be an integer (it names the file path-<step>), got 1.5", err(1.5))
    assert.matches("must be an integer .*, got %-?nan", err(0 / 0))
    assert.matches("must be an integer .*, got inf", err(math.huge))
    assert.matches("must be an integer .*, got 1e%+20", err(1e20))
    assert.matches("must be an integer .*, got 2.5", err(half))
    assert.same({}, files_in(dir))
    assert.equal(dir .. "/m--3", saver:save(sess, dir .. "/m", {global_step = -3}))
  end)

  it("keeps max_to_keep checkpoints and names the newest in the checkpoint index", function()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.is_nil(tf.train.latest_checkpoint(dir))
    local saver = tf.train.Saver(nil, {max_to_keep = 2})
    local bump = tf.assign_add(v.n, 1)
    for step = 1, 4 do
      sess:run(bump)
      saver:save(sess, dir .. "/model.ckpt", {global_step = step})
      assert.equal(dir .. "/model.ckpt-" .. step, tf.train.latest_checkpoint(dir))
    end
    assert.same({"checkpoint", "model.ckpt-3", "model.ckpt-4"}, files_in(dir))
    assert.same({dir .. "/model.ckpt-3", dir .. "/model.ckpt-4"}, saver.last_checkpoints)
    local state = tf.train.get_checkpoint_state(dir .. "/")
    assert.same({dir .. "/model.ckpt-3", dir .. "/model.ckpt-4"}, state.all_model_checkpoint_paths)
    assert.equal(46, tf.train.load_variable(tf.train.latest_checkpoint(dir), "n"):get())
    assert.equal(45, tf.train.load_variable(dir .. "/model.ckpt-3", "n"):get())
    -- a new saver (a restarted program) takes the old ones over: they count towards max_to_keep
    local again = tf.train.Saver(nil, {max_to_keep = 2})
    again:recover_last_checkpoints({dir .. "/model.ckpt-2", dir .. "/model.ckpt-3", dir .. "/model.ckpt-4"})
    assert.same({dir .. "/model.ckpt-3", dir .. "/model.ckpt-4"}, again.last_checkpoints)  -- -2 is gone
    again:save(sess, dir .. "/model.ckpt", {global_step = 5})
    assert.same({"checkpoint", "model.ckpt-4", "model.ckpt-5"}, files_in(dir))
    assert.same({dir .. "/model.ckpt-4", dir .. "/model.ckpt-5"},
                tf.train.get_checkpoint_state(dir).all_model_checkpoint_paths)
    assert.matches("Saver:recover_last_checkpoints: paths must be a list of checkpoint paths",
                   H.error_of(again.recover_last_checkpoints, again, "x"))
    -- max_to_keep = 0 keeps them all
    local all = tf.train.Saver({v.n}, {max_to_keep = 0})
    for step = 10, 16 do all:save(sess, dir .. "/all", {global_step = step}) end
    assert.equal(7, #all.last_checkpoints)
    assert.equal(dir .. "/all-16", tf.train.latest_checkpoint(dir))
  end)

  it("reports every variable missing from the file, NotFound first", function()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local path = tf.train.Saver({v.w}):save(sess, dir .. "/only_w")

    tf.reset_default_graph()
    build(ZERO)
    tf.Variable(1, {name = "extra"})
    local s2 = tf.Session()
    local err = H.error_of(function() tf.train.Saver():restore(s2, path) end)
    assert.equal("Saver:restore: NotFound", err:sub(1, 23))
    for _, name in ipairs({"b", "n", "k", "mask", "u", "extra"}) do
      assert.is_truthy(err:find(name, 1, true), name .. " not named in: " .. err)
    end
    assert.is_falsy(err:find(" w,", 1, true))
    assert.is_truthy(err:find("6 of the saver's 7", 1, true))
  end)

  describe("a bad file is an error that leaves the variables as they were", function()
    local path, v2, s2, saver
    before_each(function()
      local v = build()
      local sess = tf.Session()
      sess:run(tf.global_variables_initializer())
      path = tf.train.Saver():save(sess, dir .. "/good")
      tf.reset_default_graph()
      v2 = build(ZERO)
      s2 = tf.Session()
      s2:run(tf.global_variables_initializer())
      saver = tf.train.Saver()
      assert.is_truthy(v)
    end)
    local function unchanged()
      assert.same(ZERO.w, s2:run(v2.w):totable())
      assert.same(ZERO.b, s2:run(v2.b):totable())
      assert.equal(0, s2:run(v2.n))
      assert.same(ZERO.u, s2:run(v2.u):totable())
    end
    local function header_of(s)
      local n = 0
      for i = 8, 1, -1 do n = n * 256 + s:byte(i) end
      return n
    end

    it("truncated in the data", function()
      local s = read(path)
      write(dir .. "/bad", s:sub(1, #s - 5))
      local err = H.error_of(function() saver:restore(s2, dir .. "/bad") end)
      assert.is_truthy(err:find("DataLoss", 1, true))
      assert.is_truthy(err:find("past the", 1, true))
      unchanged()
    end)
    it("truncated in the header, or shorter than 8 bytes", function()
      local s = read(path)
      write(dir .. "/bad", s:sub(1, 40))
      assert.is_truthy(H.error_of(function() saver:restore(s2, dir .. "/bad") end):find("header length", 1, true))
      write(dir .. "/bad", s:sub(1, 5))
      assert.is_truthy(H.error_of(function() saver:restore(s2, dir .. "/bad") end):find("fewer than the 8", 1, true))
      unchanged()
    end)
    it("with a corrupt JSON header", function()
      local s = read(path)
      local n = header_of(s)
      write(dir .. "/bad", s:sub(1, 8) .. s:sub(9, 8 + n):gsub(":", ";", 1) .. s:sub(9 + n))
      local err = H.error_of(function() saver:restore(s2, dir .. "/bad") end)
      assert.is_truthy(err:find("not valid JSON", 1, true))
      unchanged()
    end)
    it("with offsets past the end", function()
      local s = read(path)
      local n = header_of(s)
      local header = s:sub(9, 8 + n):gsub('"data_offsets":%[(%d+),(%d+)%]', function(a, b)
        return string.format('"data_offsets":[%d,%d]', a + 1000000, b + 1000000)
      end, 1)
      header = header .. string.rep(" ", (8 - #header % 8) % 8)
      local len = ffi.new("uint64_t[1]", #header)
      write(dir .. "/bad", ffi.string(len, 8) .. header .. s:sub(9 + n))
      local err = H.error_of(function() saver:restore(s2, dir .. "/bad") end)
      assert.is_truthy(err:find("past the", 1, true), err)
      unchanged()
    end)
    it("with a dtype or shape that does not match the variable", function()
      tf.reset_default_graph()
      local wrong = tf.Variable(tf.zeros({3, 4}, tf.float64), {name = "w"})
      local s3 = tf.Session()
      s3:run(tf.global_variables_initializer())
      local err = H.error_of(function() tf.train.Saver({wrong}):restore(s3, path) end)
      assert.is_truthy(err:find("float32", 1, true) and err:find("float64", 1, true), err)
      tf.reset_default_graph()
      local misshaped = tf.Variable(tf.zeros({4, 3}), {name = "w"})
      local keep = tf.Variable(tf.constant(5, tf.int32), {name = "n"})
      local s4 = tf.Session()
      s4:run(tf.global_variables_initializer())
      err = H.error_of(function() tf.train.Saver():restore(s4, path) end)
      assert.is_truthy(err:find("(3, 4)", 1, true) and err:find("(4, 3)", 1, true), err)
      assert.equal(5, s4:run(keep))  -- validated before anything was assigned
      assert.same({0, 0, 0}, s4:run(misshaped):totable()[1])
    end)
    it("that does not exist", function()
      local err = H.error_of(function() saver:restore(s2, dir .. "/nothing") end)
      assert.equal("Saver:restore: NotFound", err:sub(1, 23))
      unchanged()
    end)
    -- A safetensors file written by hand: the JSON header, then the data.
    local function safetensors(file, header, data)
      header = header .. string.rep(" ", (8 - #header % 8) % 8)
      write(file, ffi.string(ffi.new("uint64_t[1]", #header), 8) .. header .. data)
    end
    local function f32(...)
      local v = {...}
      return ffi.string(ffi.new("float[?]", #v, v), 4 * #v)
    end
    local function entry(name, n, b, e)
      return string.format('"%s":{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}', name, n, b, e)
    end

    it("whose tensors overlap, leave gaps or leave bytes after the last (safetensors forbids them)", function()
      tf.reset_default_graph()
      local a = tf.Variable(tf.constant({-1, -1}), {name = "a"})
      local b = tf.Variable(tf.constant({-2, -2}), {name = "b"})
      local s3 = tf.Session()
      s3:run(tf.global_variables_initializer())
      local sv = tf.train.Saver()
      local bad = dir .. "/bad"
      local prefix = "Saver:restore: DataLoss: " .. bad .. " is not a valid checkpoint (truncated or corrupted?): "
      -- the same fault, named by each function that reads the file
      local function err()
        local e = H.error_of(sv.restore, sv, s3, bad)
        local function by(fname) return (e:gsub("^Saver:restore:", fname .. ":")) end
        assert.equal(by("tf.train.load_variable"), H.error_of(tf.train.load_variable, bad, "a"))
        assert.equal(by("tf.train.list_variables"), H.error_of(tf.train.list_variables, bad))
        assert.same({-1, -1}, s3:run(a):totable())  -- nothing assigned
        assert.same({-2, -2}, s3:run(b):totable())
        return H.without_line(e)
      end
      -- two names for the same bytes
      safetensors(bad, "{" .. entry("a", 2, 0, 8) .. "," .. entry("b", 2, 0, 8) .. "}", f32(1, 2))
      assert.equal(prefix .. "the data of 'b' (bytes 0 to 8) overlaps that of 'a' (bytes 0 to 8); " ..
                   "safetensors tensors may not share bytes", err())
      -- sharing part of their bytes
      safetensors(bad, "{" .. entry("a", 2, 0, 8) .. "," .. entry("b", 2, 4, 12) .. "}", f32(1, 2, 3))
      assert.equal(prefix .. "the data of 'b' (bytes 4 to 12) overlaps that of 'a' (bytes 0 to 8); " ..
                   "safetensors tensors may not share bytes", err())
      -- a gap between them, and one before the first
      safetensors(bad, "{" .. entry("a", 2, 0, 8) .. "," .. entry("b", 2, 16, 24) .. "}", f32(1, 2, 0, 0, 3, 4))
      assert.equal(prefix .. "bytes 8 to 16 of the data belong to no tensor (a gap before 'b'); " ..
                   "safetensors data has no gaps", err())
      safetensors(bad, "{" .. entry("a", 2, 4, 12) .. "," .. entry("b", 2, 12, 20) .. "}", f32(0, 1, 2, 3, 4))
      assert.equal(prefix .. "bytes 0 to 4 of the data belong to no tensor (a gap before 'a'); " ..
                   "safetensors data has no gaps", err())
      -- bytes after the last tensor
      safetensors(bad, "{" .. entry("a", 2, 0, 8) .. "," .. entry("b", 2, 8, 16) .. "}", f32(1, 2, 3, 4, 5))
      assert.equal(prefix .. "bytes 16 to 20 of the data, after the last tensor, belong to no tensor", err())
      -- Valid: the header in any order, and empty tensors (which hold no bytes) anywhere.
      safetensors(bad, '{"__metadata__":{"format":"pt"},' .. entry("a", 2, 8, 16) .. "," .. entry("empty", 0, 8, 8) ..
                       "," .. entry("b", 2, 0, 8) .. "," .. entry("end", 0, 16, 16) .. "}", f32(3, 4, 1, 2))
      sv:restore(s3, bad)
      assert.same({1, 2}, s3:run(a):totable())
      assert.same({3, 4}, s3:run(b):totable())
      assert.same({{"a", {2}}, {"b", {2}}, {"empty", {0}}, {"end", {0}}}, tf.train.list_variables(bad))
    end)

    it("that is a directory (the one holding the checkpoints, say)", function()
      local msg = "FailedPrecondition: " .. dir .. " is a directory, not a checkpoint file; " ..
                  "use tf.train.latest_checkpoint(dir) for the newest checkpoint in it"
      assert.equal("Saver:restore: " .. msg, H.without_line(H.error_of(saver.restore, saver, s2, dir)))
      assert.equal("tf.train.load_variable: " .. msg, H.without_line(H.error_of(tf.train.load_variable, dir, "n")))
      assert.equal("tf.train.list_variables: " .. msg, H.without_line(H.error_of(tf.train.list_variables, dir)))
      unchanged()
      saver:restore(s2, tf.train.latest_checkpoint(dir))
      assert.equal(42, s2:run(v2.n))
    end)
  end)

  it("writes atomically: a failed save leaves the previous checkpoint intact", function()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local saver = tf.train.Saver()
    local path = saver:save(sess, dir .. "/model.ckpt")
    local before = read(path)
    sess:run(tf.assign(v.n, 7))
    -- the variable u is uninitialized in this session: the save fails before writing
    local s2 = tf.Session()
    s2:run(tf.variables_initializer({v.w, v.b, v.n, v.k, v.mask}))
    assert.is_truthy(H.error_of(function() saver:save(s2, dir .. "/model.ckpt") end):find("uninitialized", 1, true))
    assert.equal(before, read(path))
    -- a path in a missing directory is an error naming it
    assert.is_truthy(H.error_of(function() saver:save(sess, dir .. "/no/such/dir/m") end):find("does not exist", 1, true))
    assert.same({"checkpoint", "model.ckpt"}, files_in(dir))  -- no temporary left behind
    assert.equal(path, saver:save(sess, path))
    assert.equal(7, tf.train.load_variable(path, "n"):get())
  end)

  describe("a write that fails partway through the file", function()
    local v, sess, saver, path, before
    before_each(function()
      v = build()
      v.big = tf.Variable(tf.random_uniform({256, 256}, {seed = 3}), {name = "big"})  -- 256 KB of data
      sess = tf.Session()
      sess:run(tf.global_variables_initializer())
      saver = tf.train.Saver()
      path = saver:save(sess, dir .. "/model.ckpt", {global_step = 1})
      before = read(path)
      sess:run({tf.assign(v.n, 7), tf.assign(v.big, tf.zeros({256, 256}))})
    end)
    local function intact()
      assert.equal(before, read(path))
      assert.same({"checkpoint", "model.ckpt-1"}, files_in(dir))  -- no temporary left, nothing half-written
      assert.equal(path, tf.train.latest_checkpoint(dir))
      assert.same({path}, saver.last_checkpoints)
      assert.equal(42, tf.train.load_variable(path, "n"):get())
    end

    it("(the file size limit reached mid-write, in a process of its own) leaves it as it was", function()
      -- The same graph in a child process whose files may not grow past
      -- `ulimit -f 128` (64 KB in sh's 512-byte blocks; the data is 256 KB), with
      -- SIGXFSZ ignored, so the write fails with EFBIG instead of killing it.
      write(dir .. "/child.lua", string.format([[
        local tf = require("moonflow")
        local n = tf.Variable(tf.constant(7, tf.int32), {name = "n"})
        local big = tf.Variable(tf.ones({256, 256}), {name = "big"})
        local sess = tf.Session()
        sess:run(tf.global_variables_initializer())
        local saver = tf.train.Saver({n = n, big = big})
        print(select(2, pcall(saver.save, saver, sess, %q, {global_step = 1})))
        print(select(2, pcall(saver.save, saver, sess, %q, {global_step = 2})))
      ]], dir .. "/model.ckpt", dir .. "/model.ckpt"))
      local p = io.popen("sh -c \"trap '' XFSZ; ulimit -f 128; luajit '" .. dir .. "/child.lua'\" 2>&1")
      local out = p:read("*a")
      p:close()
      local first, second = out:match("([^\n]*)\n([^\n]*)\n")
      assert.equal("Saver:save: ResourceExhausted: writing " .. path .. " failed (File too large); the previous file " ..
                   "is unchanged",
                   H.without_line(first), out)
      assert.matches("^Saver:save: ResourceExhausted: writing .*model%.ckpt%-2 failed %(File too large%)", second)
      os.remove(dir .. "/child.lua")
      intact()
    end)
  end)

  describe("a save killed at a random point", function()
    -- A child process saves 4 MB checkpoints to one path in a loop, each
    -- holding one value everywhere (1, 2, 3, ...: it prints each once saved),
    -- until it is killed with SIGKILL at a random time. The file must then hold
    -- the checkpoint before the kill or the one being written, whole; the
    -- temporary file a kill mid-write leaves must be gone after the next save.
    local N = 2 ^ 20
    local child = [[
      local tf = require("moonflow")
      io.stdout:setvbuf("no")
      local v = tf.Variable(tf.zeros({%d}), {name = "v"})
      local k = tf.placeholder(tf.float32, {})
      local set = tf.assign(v, tf.fill({%d}, k))
      local sess = tf.Session()
      local saver = tf.train.Saver()
      print("ready")
      for i = %d, math.huge do
        sess:run(set, {[k] = i})
        saver:save(sess, %q)
        print("saved " .. i)
      end
    ]]

    -- The one value every element of the checkpoint at path holds.
    local function value_in(path)
      local a = tf.train.load_variable(path, "v")
      local data = a:data()
      for i = 1, N - 1 do
        if data[i] ~= data[0] then error("a checkpoint of mixed values: " .. data[0] .. " and " .. data[i]) end
      end
      return data[0]
    end

    it("leaves the old or the new checkpoint, and the next save removes its temporary file", function()
      local path = dir .. "/model.ckpt"
      local v = tf.Variable(tf.zeros({N}), {name = "v"})
      local sess = tf.Session()
      sess:run(tf.global_variables_initializer())
      local saver = tf.train.Saver()
      saver:save(sess, path)
      local random = H.uniform(20, 17)
      for round = 1, 20 do
        local first = round * 1000  -- this child's values: first, first + 1, ...
        write(dir .. "/child.lua", string.format(child, N, N, first, path))
        -- kill -9 between 0 and 60 ms after the child is ready to save
        local delay = string.format("%.3f", (random[round] + 1) * 0.03)
        os.remove(dir .. "/out.log")  -- the last child's "ready" must not count
        os.execute(string.format("(luajit '%s/child.lua' > '%s/out.log' 2>&1 & pid=$!; " ..
                                 "while kill -0 $pid && ! grep -qs ready '%s/out.log'; do sleep 0.01; done; " ..
                                 "sleep %s; kill -9 $pid; wait $pid) 2>/dev/null", dir, dir, dir, delay))
        local out = read(dir .. "/out.log")
        assert.matches("^ready\n", out)
        local last = tonumber(out:match(".*saved (%d+)"))
        local got = value_in(path)
        local expected = last and {last, last + 1} or {0, first}  -- 0: the save before this child
        assert.is_true(got == expected[1] or got == expected[2],
                       string.format("round %d: the checkpoint holds %s, expected %s or %s",
                                     round, got, expected[1], expected[2]))
        -- the next save, in this process, removes what the kill left (and writes 0s again)
        saver:save(sess, path)
        assert.same({"checkpoint", "child.lua", "model.ckpt", "out.log"}, files_in(dir))
      end
    end)

    it("removes a temporary file of the path nobody holds locked, never one a live writer holds", function()
      local path = dir .. "/model.ckpt"
      tf.Variable(tf.zeros({2}), {name = "v"})
      local sess = tf.Session()
      sess:run(tf.global_variables_initializer())
      local saver = tf.train.Saver()
      write(path .. ".tmp-99999-0", "a part of a dead writer's file")
      write(path .. ".tmp-99999-1", "a live writer's file")
      write(dir .. "/other.ckpt.tmp-99999-0", "another path's")
      -- a writer still at work holds an exclusive lock on its file: flock(1)
      -- stands for it, holding the lock while the file `hold` exists
      write(dir .. "/hold", "")
      local holder = io.popen("flock -x '" .. path .. ".tmp-99999-1' -c 'echo locked; " ..
                              "while [ -e \"" .. dir .. "/hold\" ]; do sleep 0.01; done' 2>&1")
      assert.equal("locked", holder:read("*l"))
      saver:save(sess, path)
      os.remove(dir .. "/hold")
      holder:close()
      assert.same({"checkpoint", "model.ckpt", "model.ckpt.tmp-99999-1", "other.ckpt.tmp-99999-0"}, files_in(dir))
      assert.same({0, 0}, tf.train.load_variable(path, "v"):totable())
    end)
  end)

  it("restores repeatedly without growing the graph", function()
    local v = build()
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local saver = tf.train.Saver()
    local path = saver:save(sess, dir .. "/m")
    local clobber = v.n:assign(-1)
    local n_ops = tf.get_default_graph():num_ops()
    for _ = 1, 3 do
      sess:run(clobber)
      assert.equal(-1, sess:run(v.n))
      saver:restore(sess, path)
      assert.equal(42, sess:run(v.n))
    end
    assert.equal(n_ops, tf.get_default_graph():num_ops())
  end)

  it("restores a large variable through one memory copy", function()
    local big = tf.Variable(tf.random_uniform({512, 512}, {seed = 1}), {name = "big"})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local path = tf.train.Saver():save(sess, dir .. "/big")
    local want = sess:run(big)
    sess:run(big:assign(tf.zeros({512, 512})))
    tf.train.Saver():restore(sess, path)
    local got = sess:run(big)
    assert.equal(0, ffi.C.memcmp(want:data(), got:data(), 512 * 512 * 4))
  end)

  it("checks its arguments", function()
    assert.is_truthy(H.error_of(function() tf.train.Saver() end):find("No variables to save", 1, true))
    local v = build()
    assert.is_truthy(H.error_of(function() tf.train.Saver({v.w, tf.constant(1)}) end):find("not a variable", 1, true))
    assert.is_truthy(H.error_of(function() tf.train.Saver({v.w, v.w}) end):find("given twice", 1, true))
    assert.is_truthy(H.error_of(function() tf.train.Saver(nil, {keep = 1}) end):find("unknown option", 1, true))
    local saver = tf.train.Saver()
    assert.is_truthy(H.error_of(function() saver:restore(tf.Session(), nil) end):find("latest_checkpoint", 1, true))
    local other = tf.Session(tf.Graph())
    assert.is_truthy(H.error_of(function() saver:save(other, dir .. "/x") end):find("another graph", 1, true))
  end)
end)
