-- graph_picture.lua — draws a graph with Graphviz: the linear model of
-- tensorflow-the-confusing-parts.txt with its training step, a tf.cond and a
-- tf.while_loop (their functions appear as clusters). Writes graph.dot and,
-- when `dot` is installed (Debian: apt-get install graphviz), graph.svg.
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/graph_picture.lua [outdir]
local tf = require("moonflow")

local outdir = arg[1] or "."

local x = tf.placeholder(tf.float32, {-1, 1}, "x")
local y = tf.placeholder(tf.float32, {-1, 1}, "y")
local m = tf.get_variable("m", {1, 1}, {initializer = tf.constant_initializer(0)})
local b = tf.get_variable("b", {1}, {initializer = tf.constant_initializer(0)})
local y_guess = tf.add(tf.matmul(x, m), b, "y_guess")
local loss = tf.reduce_mean(tf.square(y - y_guess), {name = "loss"})
local train = tf.train.GradientDescentOptimizer(0.1):minimize(loss)
-- A clipped report of the loss, and a small loop, to show control flow.
local big = tf.greater(loss, 1, "loss_is_big")
local shown = tf.cond(big, function() return tf.sqrt(loss) end, function() return loss end)
local steps = tf.while_loop(function(i) return tf.less(i, 10) end, function(i) return i * 2 end,
                            {tf.constant(1, tf.int32)})
local init = tf.global_variables_initializer()

local sess = tf.Session()
sess:run(init)
for _ = 1, 100 do sess:run(train, {[x] = {{0}, {1}, {2}}, [y] = {{1}, {3}, {5}}}) end
print(string.format("m = %.3f, b = %.3f, shown loss = %.5f, loop result = %d",
                    sess:run(m):get(0, 0), sess:run(b):get(0),
                    sess:run(shown, {[x] = {{0}}, [y] = {{1}}}), sess:run(steps)))

local dot_path = outdir .. "/graph.dot"
local f = assert(io.open(dot_path, "wb"))
f:write(tf.get_default_graph():to_dot())
f:close()
print("wrote " .. dot_path .. " (" .. tf.get_default_graph():num_ops() .. " ops)")

if os.execute("command -v dot >/dev/null 2>&1") == 0 then
  local svg_path = outdir .. "/graph.svg"
  if os.execute(string.format("dot -Tsvg '%s' -o '%s'", dot_path, svg_path)) == 0 then
    print("wrote " .. svg_path)
  else
    print("dot failed on " .. dot_path)
    os.exit(1)
  end
else
  print("graphviz's dot is not installed: render with `dot -Tsvg " .. dot_path .. " -o graph.svg`")
end
