-- repl.lua — the `moonflow` command (bin/moonflow): a REPL with tf loaded,
-- and a script runner.
--   moonflow                     the REPL
--   moonflow script.lua a b      runs a script (arg[0] = "script.lua", arg[1] = "a", ...)
--   moonflow -i script.lua       runs it, then the REPL with its globals
--   moonflow -e 'code'           runs the code
-- In the REPL, an expression prints its values (NumPy/TensorFlow reprs,
-- printing.lua) and a statement runs (printing what a `return` gives); input that is not complete yet
-- (`function f(x)`) continues on the next line (prompt ">>") until it is.
-- Each input is a chunk named [N]: errors show the message and the line of
-- [N] they come from; locals last one input, globals stay (tf and help are
-- globals). Lines are edited and kept in a history (MOONFLOW_HISTORY, else
-- ~/.moonflow_history) with GNU readline through the FFI (libreadline.so.8,
-- Debian's libreadline8) when the library is there, else BSD editline
-- (libedit.so.2), else plain lines. Readline first: it is what bash and
-- python3 use, so its keys and ~/.inputrc are the ones users know; editline
-- offers the same calls. Input that is not a terminal is read as plain lines
-- with no prompt (`echo 'tf.constant(1)' | moonflow` prints the tensor).
local ffi = require("ffi")

local M = {}

-- One declaration at a time: a script or library may have declared some already.
for _, declaration in ipairs({
  "int isatty(int fd);",
  "char *readline(const char *prompt);",
  "void add_history(const char *line);",
  "int read_history(const char *filename);",
  "int write_history(const char *filename);",
  "void free(void *ptr);",
  "typedef void (*mf_repl_sighandler)(int); mf_repl_sighandler signal(int signum, mf_repl_sighandler handler);",
}) do pcall(ffi.cdef, declaration) end

-- Ctrl-C: the luajit command runs a script with its own SIGINT handler, which
-- makes the next Lua instruction raise "interrupted!" and then gives the
-- signal back to the default action (the next Ctrl-C would kill). The REPL
-- takes that handler over: it is armed again for every input it runs, so
-- Ctrl-C stops a computation and the REPL goes on; at the prompt the signal
-- is ignored (Ctrl-U clears the line, Ctrl-D ends).
local SIGINT = 2
local SIG_IGN = ffi.cast("mf_repl_sighandler", 1)
local luajit_handler  -- set by M.loop on a terminal
local function arm_interrupt(armed)
  if luajit_handler then ffi.C.signal(SIGINT, armed and luajit_handler or SIG_IGN) end
end

-- Line input --------------------------------------------------------------------
local function history_path()
  local path = os.getenv("MOONFLOW_HISTORY")
  if path then return path ~= "" and path or nil end
  local home = os.getenv("HOME")
  return home and home .. "/.moonflow_history" or nil
end

-- A line-editing library loaded through the FFI, or nil.
local function editing_library()
  for _, name in ipairs({"libreadline.so.8", "libedit.so.2"}) do
    local ok, lib = pcall(ffi.load, name)
    if ok then
      local has = pcall(function() return lib.readline and lib.add_history end)
      if has then return lib, name end
    end
  end
end

-- reader.read(prompt) -> a line or nil at the end; reader.add(entry) keeps
-- an entry in the history; reader.close() saves it; reader.library names
-- the line-editing library (nil for plain lines).
function M.reader(interactive)
  local lib, name
  if interactive and os.getenv("MOONFLOW_NO_READLINE") == nil then lib, name = editing_library() end
  if not lib then
    return {
      read = function(prompt)
        if interactive then io.stdout:write(prompt); io.stdout:flush() end
        return io.stdin:read("*l")
      end,
      add = function() end,
      close = function() end,
    }
  end
  local path = history_path()
  if path then lib.read_history(path) end
  local added = false
  return {
    library = name,
    read = function(prompt)
      local p = lib.readline(prompt)
      if p == nil then return nil end
      local line = ffi.string(p)
      ffi.C.free(p)
      return line
    end,
    add = function(entry)
      lib.add_history(entry)
      added = true
    end,
    -- Written whole to a temporary file, then renamed over the old one.
    close = function()
      if not (path and added) then return end
      local tmp = path .. ".tmp"
      if lib.write_history(tmp) == 0 then os.rename(tmp, path) else os.remove(tmp) end
    end,
  }
end

-- Compiling and running inputs ---------------------------------------------------------
-- Input n as a function returning what it gives: as an expression (its
-- values), else as statements (what a `return` among them returns); nil and
-- the message when it does not compile.
function M.compile(source, n)
  local chunkname = "=[" .. n .. "]"
  -- Its calls are select's arguments, not tail calls: frames of [n] stay on
  -- the stack for the lines that errors name (core.user_location).
  local expression = loadstring("return select(1, " .. source:gsub("^%s*=", "") .. "\n)", chunkname)
  if expression then return expression end
  return loadstring(source, chunkname)
end

-- Whether a compile error only says the input is not finished yet.
function M.incomplete(message) return message ~= nil and message:find("'<eof>'$") ~= nil end

-- The lines of the inputs, for error reports: inputs[n] is input n's text.
local inputs = {}

-- The user's lines an error comes from, each with its text: the innermost
-- [N]:L frame of its traceback (where it happened), then the [N]:L places its
-- message names (where the op was built).
local function user_lines(message, traceback)
  local places, seen = {}, {}
  local function add(n, l)
    local key = n .. ":" .. l
    if seen[key] then return end
    seen[key] = true
    local text, line = inputs[tonumber(n)], nil
    if text then
      local at = 0
      for s in (text .. "\n"):gmatch("([^\n]*)\n") do
        at = at + 1
        if at == tonumber(l) then line = s; break end
      end
    end
    if line then places[#places + 1] = "  [" .. n .. "]:" .. l .. ": " .. line:match("^%s*(.-)%s*$") end
  end
  if traceback then
    local n, l = traceback:match("%[(%d+)%]:(%d+)")
    if n then add(n, l) end
  end
  for n, l in message:gmatch("%[(%d+)%]:(%d+)") do add(n, l) end
  return places
end

-- The error report of an input: the message, then the user's lines.
function M.error_report(err, traceback)
  local message = tostring(err)
  local lines = {message}
  for _, place in ipairs(user_lines(message, traceback)) do lines[#lines + 1] = place end
  return table.concat(lines, "\n")
end

local function pack(...) return {n = select("#", ...), ...} end

local function traceback_handler(err)
  return {err = err, traceback = debug.traceback("", 2)}
end

-- Runs the compiled input; returns the text to print (its values or an
-- error) and whether it is an error.
function M.run(chunk)
  arm_interrupt(true)
  local results = pack(xpcall(chunk, traceback_handler))
  arm_interrupt(false)
  local count = results.n
  if not results[1] then return M.error_report(results[2].err, results[2].traceback), true end
  -- nothing for no values, or one nil (a target op's run, a function of no result)
  if count < 2 or (count == 2 and results[2] == nil) then return nil end
  local printing = require("moonflow.printing")
  local shown = {}
  for i = 2, count do shown[i - 1] = printing.repr(results[i]) end
  return table.concat(shown, "\t")
end

-- One input: compiles source (n its number), runs it, prints what it gives.
-- Returns false when the input is not complete yet.
function M.eval(source, n, output, errors)
  local chunk, err = M.compile(source, n)
  if not chunk and M.incomplete(err) then return false end
  inputs[n] = source
  if not chunk then
    errors:write(M.error_report(err), "\n")
    return true
  end
  local text, failed = M.run(chunk)
  if text then (failed and errors or output):write(text, "\n") end
  return true
end

-- The global environment of the REPL and of scripts: tf and help.
local function setup_globals()
  local tf = require("moonflow")
  rawset(_G, "tf", tf)
  rawset(_G, "help", require("moonflow.help").help)
  return tf
end

-- Reads one input (continued over lines until complete), runs it and
-- prints what it gives; n is its number. Returns false at the end of input.
local function step(reader, n, output, errors)
  local line = reader.read("> ")
  if line == nil then return false end
  if not line:match("%S") then return true, n end
  n = n + 1
  local source = line
  while not M.eval(source, n, output, errors) do
    local more = reader.read(">> ")
    if more == nil then  -- input ended inside an unfinished statement: say so
      inputs[n] = source
      errors:write(M.error_report(select(2, M.compile(source, n))), "\n")
      break
    end
    source = source .. "\n" .. more
  end
  reader.add(source)
  output:flush()
  return true, n
end

-- The REPL loop over reader's lines until the end of input. Ctrl-C during a
-- run is that input's error ("interrupted!"); one whose hook fires after the
-- run drops the next input.
function M.loop(reader, interactive)
  if interactive then luajit_handler = ffi.C.signal(SIGINT, SIG_IGN) end
  local n = 0
  local output, errors = io.stdout, io.stderr
  while true do
    local ok, more, count = pcall(step, reader, n, output, errors)
    if ok then
      if not more then break end
      n = count
    elseif tostring(more):find("interrupted!", 1, true) then
      output:write("\n")
    else
      error(more, 0)
    end
  end
  if interactive then output:write("\n") end
  reader.close()
end

local USAGE = [=[
usage: moonflow [options] [script [args]]
  (no arguments)  the REPL, with tf loaded
  script [args]   runs a Lua script with tf loaded (arg[0] is the script)
  -e code         runs the code
  -i              the REPL after the script or code
  -h, --help      this text]=]

-- Runs a chunk as a script: errors go to stderr with a traceback; returns
-- whether it ran.
local function run_script(chunk, err)
  if not chunk then io.stderr:write("moonflow: ", err, "\n"); return false end
  local ok, failure = xpcall(chunk, function(e)  -- the script's frames, not the runner's
    return (debug.traceback(tostring(e), 2):gsub("\n%s*%[C%]: in function 'xpcall'.*$", ""))
  end)
  if not ok then io.stderr:write("moonflow: ", failure, "\n") end
  return ok
end

-- The command: argv as Lua's `arg` (argv[0] the command). Returns the exit status.
function M.main(argv)
  local interactive_after, code, script, first_arg = false, nil, nil, nil
  local i = 1
  while argv[i] do
    local a = argv[i]
    if a == "-h" or a == "--help" then print(USAGE); return 0
    elseif a == "-i" then interactive_after = true
    elseif a == "-e" then
      code = argv[i + 1]
      if not code then io.stderr:write("moonflow: -e needs code\n", USAGE, "\n"); return 1 end
      i = i + 1
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      io.stderr:write("moonflow: unknown option ", a, "\n", USAGE, "\n")
      return 1
    else
      script, first_arg = a, i
      break
    end
    i = i + 1
  end
  setup_globals()
  local ok = true
  if code then ok = run_script(loadstring(code, "=(command line)")) end
  if ok and script then
    local script_args = {[0] = script}
    for k = first_arg + 1, #argv do script_args[k - first_arg] = argv[k] end
    rawset(_G, "arg", script_args)
    if script == "-" then ok = run_script(loadstring(io.stdin:read("*a"), "=stdin"))
    else ok = run_script(loadfile(script)) end
  end
  if (code or script) and not interactive_after then return ok and 0 or 1 end
  local interactive = ffi.C.isatty(0) == 1
  local reader = M.reader(interactive)
  if interactive then
    print("moonflow: TensorFlow 1.x graphs for LuaJIT. tf is loaded; help(tf.matmul) shows documentation.")
  end
  M.loop(reader, interactive)
  return ok and 0 or 1
end

return M
