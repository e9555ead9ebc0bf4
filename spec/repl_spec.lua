-- The moonflow command (bin/moonflow, lua/moonflow/repl.lua): the REPL fed
-- through a pipe (values, statements, continued input, errors with the
-- user's line, help, no growth warning), scripts and options, and the REPL
-- on a terminal driven through tmux (prompts, line editing, history), whose
-- screen is checked.
local H = require("spec.helpers")
local repl = require("moonflow.repl")

local root = os.getenv("PWD") or "."
local command = root .. "/bin/moonflow"

-- Runs the command with `input` on stdin; returns stdout, stderr, exit status.
local function moonflow(args, input)
  local dir = H.tmpdir()
  H.write(dir .. "/in", input or "")
  local status = os.execute(string.format("cd '%s' && MOONFLOW_HISTORY= '%s' %s < in > out 2> err", dir, command,
                                          args or ""))
  local out, err = H.read(dir .. "/out"), H.read(dir .. "/err")
  os.execute("rm -rf '" .. dir .. "'")
  return out, err, status
end

describe("the moonflow REPL", function()
  it("prints the values of expressions the NumPy/TensorFlow way and runs statements", function()
    local out, err = moonflow("", table.concat({
      "a = tf.array({{1, 2}, {3, 4}})",
      "a + 1",
      "tf.constant({{1, 2}, {3, 4}})",
      "x = tf.placeholder(tf.float32, {-1, 128})",
      "x:get_shape()",
      "x:get_shape():as_list(), 'two', nil",
      "print('printed')",
      "=2 * 21",
      "-- a comment",
      "",
    }, "\n"))
    assert.equal("", err)
    assert.equal(table.concat({
      "tf.Array([[2., 3.],",
      "          [4., 5.]], shape=(2, 2), dtype=float32)",
      "<tf.Tensor 'Const:0' shape=(2, 2) dtype=float32>",
      "TensorShape([Dimension(None), Dimension(128)])",
      '{-1, 128}\t"two"\tnil',
      "printed",
      "42",
      "",
    }, "\n"), out)
  end)

  it("continues unfinished input on the next lines; locals last one input", function()
    local out, err = moonflow("", table.concat({
      "function double(x)",
      "  return x * 2",
      "end",
      "double(tf.array({1, 2}))",
      "local hidden = 5",
      "hidden",
      "t = {1,",
      "  2}",
      "t",
      "s = [[a",
      "b]]",
      "s",
      "",
    }, "\n"))
    assert.equal("", err)
    assert.equal('tf.Array([2., 4.], shape=(2,), dtype=float32)\n{1, 2}\n"a\\nb"\n', out)
  end)

  it("shows an error's message and the user's lines, then goes on", function()
    local out, err = moonflow("", table.concat({
      "a = tf.constant({{1, 2}})",
      "tf.matmul(a, tf.constant({1, 2}))",
      "v = tf.Variable(1, {name = 'v'})",
      "sess = tf.Session()",
      "sess:run(v + 1)",
      "y = nil + 1",
      "function f()",
      "  error('inside f')",
      "end",
      "f()",
      "x = = 1",
      "for i = 1,",
      "",
    }, "\n"))
    assert.equal("", out)
    assert.equal(table.concat({
      "MatMul: MatMul needs inputs of rank >= 2, but b has shape [2] (rank 1); tf.reshape or tf.expand_dims " ..
      "it into a matrix (at [2]:1)",
      "  [2]:1: tf.matmul(a, tf.constant({1, 2}))",
      "Attempting to use uninitialized value v [[node v (defined at [3]:1)]]",
      "  [5]:1: sess:run(v + 1)",
      "  [3]:1: v = tf.Variable(1, {name = 'v'})",
      "[6]:1: attempt to perform arithmetic on a nil value",
      "  [6]:1: y = nil + 1",
      "[7]:2: inside f",
      "  [7]:2: error('inside f')",
      "[9]:1: unexpected symbol near '='",
      "  [9]:1: x = = 1",
      "[10]:1: unexpected symbol near '<eof>'",
      "  [10]:1: for i = 1,",
      "",
    }, "\n"), err)
  end)

  it("shows documentation from docs/api with help", function()
    local out = moonflow("", "help(tf.gather)\nhelp('tf.nn.relu')\nhelp(tf.nn)\nhelp(tf.constant(1))\nhelp(print)\n")
    assert.matches("tf.gather\n\n`tf.gather(params, indices, {axis=, batch_dims=})` — the slices of params at " ..
                   "indices along axis (0)\n  (docs/api/ops.md:", out, 1, true)
    assert.matches("tf.nn.relu\n\n`tf.nn.relu` — `max(x, 0)` (also int32/int64)\n  (docs/api/training.md:",
                   out, 1, true)
    assert.matches("a table of %d+ functions: [^\n]*relu, relu6,", out)
    assert.matches("<tf.Tensor 'Const:0' shape=() dtype=float32>\n(help(tf.matmul) shows a function's " ..
                   "documentation)", out, 1, true)
    assert.matches("a function that is not part of moonflow's API (no documentation)", out, 1, true)
    -- every op wrapper of the API has an entry (the reference documents all of them)
    local help = require("moonflow.help")
    local tf = require("moonflow")
    for _, name in ipairs({"matmul", "reduce_sum", "reshape", "one_hot", "Session", "Variable", "gradients",
                           "while_loop", "cond", "placeholder"}) do
      assert.is_true(#help.lookup("tf." .. name) > 0, "tf." .. name)
    end
    assert.is_true(#help.lookup("tf.layers.dense") > 0)
    assert.matches("^tf.matmul\n\n", help.text(tf.matmul))
  end)

  it("prints the tour's transcript (docs/tour.md, The REPL)", function()
    local block = H.read(root .. "/docs/tour.md"):match("## The REPL.-```\n%$ bin/moonflow\n[^\n]*\n(.-)```")
    local input, expected = {}, {}
    for l in block:gmatch("([^\n]*)\n") do
      local typed = l:match("^>>? (.*)$")
      if typed then input[#input + 1] = typed else expected[#expected + 1] = l end
    end
    local dir = H.tmpdir()
    H.write(dir .. "/in", table.concat(input, "\n") .. "\n")
    os.execute(string.format("cd '%s' && MOONFLOW_HISTORY= '%s' < in > out 2>&1", dir, command))
    local out = H.read(dir .. "/out")
    os.execute("rm -rf '" .. dir .. "'")
    assert.equal(table.concat(expected, "\n") .. "\n", out)
  end)

  it("does not warn about graph growth between inputs; a script's loop is warned", function()
    local lines = {"v = tf.Variable(0)", "sess = tf.Session()", "sess:run(v.initializer)"}
    for _ = 1, 12 do lines[#lines + 1] = "sess:run(tf.assign_add(v, 1))" end
    lines[#lines + 1] = "for i = 1, 12 do sess:run(tf.assign_add(v, 1)) end"
    lines[#lines + 1] = "sess:run(v)"
    local out, err = moonflow("", table.concat(lines, "\n") .. "\n")
    assert.matches("24\n$", out)
    local warnings = select(2, err:gsub("moonflow warning", ""))
    assert.equal(1, warnings, err)  -- the loop on one input only
    assert.matches("moonflow warning: %[16%]:1: new ops", err)
  end)
end)

describe("the moonflow command", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("runs a script with its arguments and tf loaded", function()
    H.write(dir .. "/s.lua", "print(arg[0], arg[1], arg[2], #arg)\nprint(tf.constant(1))\n")
    local out, err, status = moonflow("'" .. dir .. "/s.lua' one two")
    assert.equal(dir .. "/s.lua\tone\ttwo\t2\nTensor(\"Const:0\", shape=(), dtype=float32)\n", out)
    assert.equal("", err)
    assert.equal(0, status)
  end)

  it("reports a failing script with a traceback of its frames and exit status 1", function()
    H.write(dir .. "/bad.lua", "local function f() error('boom') end\nf()\n")
    local out, err, status = moonflow("'" .. dir .. "/bad.lua'")
    assert.equal("", out)
    assert.equal("moonflow: " .. dir .. "/bad.lua:1: boom\nstack traceback:\n\t[C]: in function 'error'\n\t" ..
                 dir .. "/bad.lua:1: in function 'f'\n\t" .. dir .. "/bad.lua:2: in main chunk\n", err)
    assert.is_true(status ~= 0)
    local _, missing, code = moonflow("'" .. dir .. "/none.lua'")
    assert.matches("^moonflow: cannot open .*none.lua", missing)
    assert.is_true(code ~= 0)
  end)

  it("warns about a script's loop that grows the graph", function()
    H.write(dir .. "/loop.lua", "local v = tf.Variable(0)\nlocal sess = tf.Session()\nsess:run(v.initializer)\n" ..
                                "for i = 1, 12 do sess:run(tf.assign_add(v, 1)) end\n")
    local _, err = moonflow("'" .. dir .. "/loop.lua'")
    assert.matches("moonflow warning: " .. dir:gsub("%p", "%%%0") .. "/loop.lua:4: new ops", err)
  end)

  it("takes -e, -i and -h", function()
    local out, _, status = moonflow("-e 'print(tf.constant(2))'")
    assert.equal('Tensor("Const:0", shape=(), dtype=float32)\n', out)
    assert.equal(0, status)
    out = moonflow("-i -e 'x = tf.array({1, 2})'", "x * 3\n")
    assert.equal("tf.Array([3., 6.], shape=(2,), dtype=float32)\n", out)
    out = moonflow("-h")
    assert.matches("^usage: moonflow %[options%] %[script %[args%]%]", out)
    local _, err, bad = moonflow("-x")
    assert.matches("moonflow: unknown option %-x", err)
    assert.is_true(bad ~= 0)
  end)

  it("compiles expressions before statements and knows unfinished input", function()
    assert.equal(2, repl.compile("1 + 1", 1)())
    assert.equal(3, repl.compile("local x = 3 return x", 1)())
    assert.equal(0, select("#", repl.compile("local x = 1", 1)()))
    local chunk, err = repl.compile("if true then", 1)
    assert.is_nil(chunk)
    assert.is_true(repl.incomplete(err))
    assert.is_false(repl.incomplete(select(2, repl.compile("x = = 1", 1))))
  end)
end)

-- The REPL on a terminal (H.terminal: tmux).
describe("the moonflow REPL on a terminal (tmux)", function()
  if not H.has_tmux then
    pending("tmux is not installed (Debian package tmux; .ci/run installs it)")
    return
  end

  local term = H.terminal("repl")
  local function tmux(args) return term:tmux(args) end
  local function screen() return term:screen() end
  local function wait_for(text) return term:wait_for(text) end
  local function keys(...) term:keys(...) end
  local function line(s) term:line(s) end

  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    term:kill()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  local function start()
    term:start(string.format("MOONFLOW_HISTORY='%s/history' '%s'", dir, command))
    return wait_for("> ")
  end

  it("greets, prints values and grids, continues input with >> and shows errors", function()
    local first = start()
    assert.matches("moonflow: TensorFlow 1.x graphs for LuaJIT. tf is loaded; help(tf.matmul) shows documentation.",
                   first, 1, true)
    line("a = tf.array({{1, 2}, {3, 4}})")
    line("a:matmul(a)")
    wait_for("          [15., 22.]], shape=(2, 2), dtype=float32)")
    line("function f(x)")
    wait_for(">> ")
    line("return x + 1 end")
    line("f(a)[0]")
    wait_for("tf.Array([2., 3.], shape=(2,), dtype=float32)")
    line("tf.matmul(a, 1)")
    local shown = wait_for("  [5]:1: tf.matmul(a, 1)")
    assert.matches("MatMul needs inputs of rank >= 2", shown, 1, true)
    line("help(tf.matmul)")
    wait_for("`tf.matmul(a, b, {transpose_a=, transpose_b=})` the matrix product")
    -- the screen in order: input lines with their prompts, then what they gave
    shown = screen()
    local at = 1
    for _, want in ipairs({"> a = tf.array({{1, 2}, {3, 4}})", "> a:matmul(a)",
                           "tf.Array([[ 7., 10.],", "> function f(x)", ">> return x + 1 end",
                           "> f(a)[0]", "> tf.matmul(a, 1)", "> help(tf.matmul)"}) do
      local found = shown:find(want, at, true)
      assert.is_truthy(found, want .. " in:\n" .. shown)
      at = found + #want
    end
  end)

  it("stops a run at Ctrl-C and goes on; Ctrl-C at the prompt is ignored", function()
    start()
    line("jit.off()")  -- LuaJIT's compiled loops never see the interrupt (its hooks run in the interpreter)
    for n = 2, 3 do  -- the handler is armed again for every input
      line("for i = 1, 1e12 do end")
      os.execute("sleep 0.5")
      keys("C-c")
      wait_for("[" .. n .. "]:1: interrupted!\n  [" .. n .. "]:1: for i = 1, 1e12 do end")
    end
    keys("-l", "abc")
    keys("C-c")
    keys("C-u")
    line("1 + 2")
    wait_for("> 1 + 2\n3")
  end)

  it("edits lines and keeps a history across sessions when a line-editing library is there", function()
    local library = repl.reader(true).library
    if not library then
      pending("neither libreadline.so.8 nor libedit.so.2 is installed: plain lines, no history")
      return
    end
    start()
    line("b = 40 + 2")
    line("b")
    wait_for("\n42")
    -- Up twice brings back "b = 40 + 2"; edited: to the start, past "b = 40", the 40 replaced
    keys("Up", "Up")
    wait_for("> b = 40 + 2")
    keys("C-a", "Right", "Right", "Right", "Right", "Right", "Right", "BSpace", "BSpace")
    keys("-l", "50")
    keys("Enter")
    line("b")
    wait_for("\n52")
    keys("C-d")
    for _ = 1, 100 do
      local f = io.open(dir .. "/history", "rb")
      if f then f:close(); break end
      os.execute("sleep 0.1")
    end
    local history = H.read(dir .. "/history")
    assert.matches("b = 40 + 2", history, 1, true)
    assert.matches("b = 50 + 2", history, 1, true)
    -- a new session finds the old lines
    tmux("kill-server")
    start()
    keys("Up")
    wait_for("> b")
    keys("Up")
    wait_for("> b = 50 + 2")
  end)
end)
