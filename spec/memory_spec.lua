-- A session's memory: results the caller drops come back for later runs, and
-- the statistics say what is in use, kept and taken from the system.
local tf = require("moonflow")

describe("session memory", function()
  it("gives the buffers of dropped results to later runs", function()
    local n = 4000000
    local x = tf.placeholder(tf.float32, {n})
    local y = x * 2 + 1
    local sess = tf.Session()
    local f = sess:make_callable(y, {x})
    local feed = tf.Array.from_pointer(require("ffi").new("float[?]", n), {n}, tf.float32)
    -- A run collects dropped results once those handed out since the last
    -- collection outgrow twice the Lua heap: warm up for three such cycles.
    collectgarbage()
    local warm_runs = 3 * (math.ceil(2 * collectgarbage("count") * 1024 / (4 * n)) + 2)
    local out
    for _ = 1, warm_runs do out = f(feed) end
    local warm = sess:num_allocations()
    for _ = 1, 2 * warm_runs do out = f(feed) end
    assert.equal(warm, sess:num_allocations())
    assert.is_true(warm < warm_runs, "allocations: " .. warm .. " in " .. warm_runs .. " runs")
    assert.equal(1, out:get(0))
    local m = sess:memory_stats()
    assert.is_true(m.bytes_in_use >= 4 * n, "in use: " .. m.bytes_in_use)
    assert.is_true(m.peak_bytes_in_use >= m.bytes_in_use)
    assert.is_true(m.bytes_kept <= m.peak_bytes_in_use)
    assert.equal(warm, m.num_allocations)
    sess:close()
    assert.equal(0, sess:memory_stats().bytes_kept)
  end)
end)
