-- demo.lua — graphs, sessions, feeds and fetches in a few lines.
--   make demo      (or: LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/demo.lua)
local tf = require("moonflow")

-- Prints a label and values, indenting the continuation lines of multi-line arrays.
local function show(label, ...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  local text = table.concat(parts, "  ")
  print(string.format("%-14s%s", label, (text:gsub("\n", "\n" .. string.rep(" ", 14)))))
end

-- 1. Building a graph computes nothing: ops are nodes, tensors point at them.
local two = tf.constant(2)
local three = tf.constant(3)
local sum = two + three
show("a tensor:", sum)
show("its op:", sum.op, "inputs: " .. sum.op.inputs[1].name .. ", " .. sum.op.inputs[2].name)

-- 2. A session runs the part of the graph that a fetch needs.
local sess = tf.Session()
show("sum:", sess:run(sum))
local r = sess:run({sum, {doubled = sum * 2}})
show("nested fetch:", r[1], r[2].doubled)

-- 3. Placeholders take their values from feeds; -1 is an unknown dimension.
local x = tf.placeholder(tf.float32, {-1, 3}, "x")
local w = tf.constant({{1}, {0.5}, {0.25}}, {name = "w"})
local y = tf.name_scope("model", function() return tf.matmul(x, w) + 1 end)
show("static shape:", y)
show("y:", sess:run(y, {[x] = {{4, 8, 16}, {0, 0, 0}}}))
show("by name:", y.name, sess:run(y.name, {["x:0"] = {{1, 1, 1}}}))

-- 4. A missing feed is reported with the line that made the placeholder.
local ok, err = pcall(sess.run, sess, y)
show("no feed:", ok, err)

-- 5. Reductions, with Lua numbers lifted to tensors of the other operand's dtype.
local sq = tf.reduce_sum(x * x, 1)
show("sum of x*x:", sess:run(sq, {[x] = {{1, 2, 2}, {3, 4, 0}}}))

-- 6. The cheapest way to run one step many times: a callable.
local step = sess:make_callable(sq, {x})
local acc = 0
for i = 1, 1000 do acc = acc + step({{i, 0, 0}}):get(0) end
show("1000 calls:", acc)
sess:close()
