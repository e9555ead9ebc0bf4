-- Runs 100k sess:run and 20k callable runs and prints the places in
-- session.lua and array.lua where the JIT aborted on a blacklisted trace
-- start ("blacklisted: none" when there are none); spec/core_spec.lua runs it
-- in a process of its own.
local tf = require("moonflow")
local traceerr, funcinfo = require("jit.vmdef").traceerr, require("jit.util").funcinfo
local blacklisted = {}
local function on_trace(what, _, func, pc, err)
  if what == "abort" and traceerr[err] == "blacklisted" then  -- a trace ran into a blacklisted start
    local info = funcinfo(func, pc)
    if info.source:find("moonflow/session.lua", 1, true) or info.source:find("moonflow/array.lua", 1, true) then
      blacklisted[#blacklisted + 1] = info.loc
    end
  end
end
jit.attach(on_trace, "trace")
local x = tf.placeholder(tf.float32, {16})
local y = tf.tanh(x * 2 + 1)
local s = tf.placeholder(tf.float32, {})
local sess = tf.Session()
local feeds = {[x] = tf.Array.new(tf.float32, {16})}
for _ = 1, 100000 do sess:run(y, feeds) end
local z = s + 1
local f = sess:make_callable(z, {s})
local scalar_feeds = {[s] = 2}
for _ = 1, 20000 do
  assert(f(2) == 3)
  assert(sess:run(z, scalar_feeds) == 3)
end
jit.attach(on_trace)
print("blacklisted: " .. (#blacklisted == 0 and "none" or table.concat(blacklisted, ", ")))
