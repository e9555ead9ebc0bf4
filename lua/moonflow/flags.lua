-- flags.lua — tf.flags (absl's flags, as TensorFlow 1.x re-exports them) and
-- tf.app.run.
--
-- tf.flags.DEFINE_string/integer/float/boolean(name, default, help) declare a
-- flag in tf.flags.FLAGS (or the tf.flags.FlagValues() given as
-- flag_values); FLAGS(argv) parses a command line (Lua's `arg`: the script
-- at [0], arguments from 1) and returns what is not a flag, the script
-- first at [0]; FLAGS.name is then the flag's value. The syntax is absl's:
-- `--name=value`, `--name value`, `-name` as `--name`, booleans as `--name`,
-- `--noname` or `--name=true|false|1|0`, `--` ends the flags, flags and
-- other arguments may be mixed. Reading a flag before parsing, an unknown
-- flag, a value of the wrong type and a flag defined twice are errors in
-- absl's words.
--
-- tf.app.run(main, argv) parses the flags of argv (default `arg`), then
-- calls main(the rest) and exits with its result (a number is the exit
-- status; nil is 0). A parse error prints "FATAL Flags parsing error: ..."
-- and exits 1; --help (-h, -?, --helpfull) prints every flag with its help
-- and default and exits 0.
local core = require("moonflow.core")
local args = require("moonflow.args")

local fail = core.fail

local FlagValues = {}

-- flag values -> {flags = {name = flag}, order = {names}, parsed = bool}
local state_of = setmetatable({}, {__mode = "k"})

local KINDS = {
  string = {what = "a string"},
  integer = {what = "an integer"},
  float = {what = "a float"},
  boolean = {what = "a boolean"},
}

-- A value of a kind from the command line's text, or nil and why not.
local function parse_text(kind, text)
  if kind == "string" then return text end
  if kind == "boolean" then
    local lower = text:lower()
    if lower == "true" or lower == "t" or lower == "1" then return true end
    if lower == "false" or lower == "f" or lower == "0" then return false end
    return nil, "Non-boolean argument to boolean flag"
  end
  local n = tonumber(text)
  if kind == "integer" then
    if not text:match("^%s*[+-]?%d+%s*$") or not n then
      return nil, "invalid literal for int() with base 10: '" .. text .. "'"
    end
    return n
  end
  if not n or text:match("^%s*[+-]?0[xX]") then return nil, "could not convert string to float: '" .. text .. "'" end
  return n
end

-- A Lua value checked against a flag's kind (defaults and assignments), or nil and why not.
local function check_value(kind, v)
  if kind == "string" then return type(v) == "string" and v or nil end
  if kind == "boolean" then
    if type(v) == "boolean" then return v end
    return nil
  end
  if type(v) ~= "number" or v ~= v then return nil end
  if kind == "integer" and v % 1 ~= 0 then return nil end
  return v
end

local function show(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  return tostring(v)
end

local function state(fv)
  local s = state_of[fv]
  if not s then fail("tf.flags: not a FlagValues object: " .. tostring(fv)) end
  return s
end

-- FlagValues's methods live in `methods` (called with `:`); every other
-- field read is a flag's value.
local methods = {}

FlagValues.__index = function(fv, name)
  local m = methods[name]
  if m then return m end
  local s = state(fv)
  local flag = s.flags[name]
  if not flag then fail("tf.flags.FLAGS: AttributeError: no flag --" .. tostring(name) .. " is defined") end
  if not s.parsed then
    fail("tf.flags.FLAGS: UnparsedFlagAccessError: Trying to access flag --" .. name ..
         " before flags were parsed (run tf.app.run(main) or FLAGS(arg) first)")
  end
  return flag.value
end

-- FLAGS.name = value: a value of the flag's type.
FlagValues.__newindex = function(fv, name, value)
  local flag = state(fv).flags[name]
  if not flag then fail("tf.flags.FLAGS: AttributeError: no flag --" .. tostring(name) .. " is defined") end
  local v = check_value(flag.kind, value)
  if v == nil then
    fail(string.format("tf.flags.FLAGS: IllegalFlagValueError: flag --%s=%s: expected %s", name, tostring(value),
                       KINDS[flag.kind].what))
  end
  flag.value, flag.present = v, true
end

-- FLAGS(argv): parses argv (a Lua list, the program at [0]); returns the
-- arguments that are no flags, the program at [0].
FlagValues.__call = function(fv, argv)
  local s = state(fv)
  if not args.is_plain(argv) then fail("tf.flags.FLAGS(argv): argv must be a Lua list of strings (such as arg)") end
  local rest = {[0] = argv[0]}
  local values = {}
  local i, n = 1, #argv
  local function illegal(name, text, why)
    fail(string.format("tf.flags: IllegalFlagValueError: flag --%s=%s: %s", name, text, why))
  end
  while i <= n do
    local a = argv[i]
    if type(a) ~= "string" then fail("tf.flags.FLAGS(argv): argv[" .. i .. "] is not a string: " .. args.describe(a)) end
    if a == "--" then
      for k = i + 1, n do rest[#rest + 1] = argv[k] end
      break
    end
    local body = a:match("^%-%-?([^-].*)$")
    if not body then
      rest[#rest + 1] = a
    else
      local name, text = body:match("^([^=]+)=(.*)$")
      name = name or body
      local flag = s.flags[name]
      if not flag and not text and name:sub(1, 2) == "no" and s.flags[name:sub(3)] and
         s.flags[name:sub(3)].kind == "boolean" then
        flag, name, text = s.flags[name:sub(3)], name:sub(3), "false"
      end
      if not flag then fail("tf.flags: UnrecognizedFlagError: Unknown command line flag '" .. name .. "'") end
      if text == nil then
        if flag.kind == "boolean" then
          text = "true"
        else
          i = i + 1
          text = argv[i]
          if type(text) ~= "string" then
            fail("tf.flags: Flag --" .. name .. " must have a value other than None (it is the last argument)")
          end
        end
      end
      local v, why = parse_text(flag.kind, text)
      if v == nil then illegal(name, text, why) end
      values[name] = v
    end
    i = i + 1
  end
  -- Nothing is set unless the whole line parses.
  for name, v in pairs(values) do
    s.flags[name].value, s.flags[name].present = v, true
  end
  s.parsed = true
  return rest
end

function FlagValues:__tostring() return "<tf.flags.FlagValues of " .. #state(self).order .. " flags>" end

-- FLAGS:is_parsed(), FLAGS:mark_as_parsed(), FLAGS:unparse_flags() (every
-- flag back to its default, reading them an error again).
function methods.is_parsed(fv) return state(fv).parsed end
function methods.mark_as_parsed(fv) state(fv).parsed = true end
function methods.unparse_flags(fv)
  local s = state(fv)
  for _, flag in pairs(s.flags) do flag.value, flag.present = flag.default, false end
  s.parsed = false
end

-- FLAGS:flag_values_dict(): {name = value}.
function methods.flag_values_dict(fv)
  local out = {}
  for name, flag in pairs(state(fv).flags) do out[name] = flag.value end
  return out
end

-- FLAGS:get_help(): every flag with its help, default and type, in the order defined.
function methods.get_help(fv)
  local lines = {}
  for _, name in ipairs(state(fv).order) do
    local flag = state(fv).flags[name]
    local prefix = flag.kind == "boolean" and "--[no]" or "--"
    lines[#lines + 1] = "  " .. prefix .. name .. ": " .. flag.help
    lines[#lines + 1] = "    (default: " .. show(flag.default) .. ")"
    if flag.kind ~= "string" and flag.kind ~= "boolean" then lines[#lines + 1] = "    (" .. KINDS[flag.kind].what .. ")" end
  end
  return table.concat(lines, "\n")
end

local function new_flag_values()
  local fv = setmetatable({}, FlagValues)
  state_of[fv] = {flags = {}, order = {}, parsed = false}
  return fv
end

return function(tf)
  tf.flags = tf.flags or {}
  tf.flags.FlagValues = new_flag_values
  tf.flags.FLAGS = new_flag_values()

  for kind in pairs(KINDS) do
    local fname = "tf.flags.DEFINE_" .. kind
    local names = {"flag_values", empty = true}
    local function define(name, default, help, ...)
      local fv = args.options(fname, names, ...).flag_values or tf.flags.FLAGS
      local s = state(fv)
      if type(name) ~= "string" or not name:match("^[%a_][%w_%-]*$") then
        fail(fname .. ": a flag name is a letter or _ followed by letters, digits, _ and -, got " .. args.describe(name))
      end
      if methods[name] then fail(fname .. ": the flag name '" .. name .. "' is reserved (a FlagValues method)") end
      if s.flags[name] then
        fail(string.format("%s: DuplicateFlagError: The flag '%s' is defined twice. First from %s, Second from %s",
                           fname, name, s.flags[name].where, core.user_location()))
      end
      local value = default
      if default ~= nil then
        value = check_value(kind, default)
        if value == nil then
          fail(string.format("%s: IllegalFlagValueError: the default of flag --%s must be %s, got %s", fname, name,
                             KINDS[kind].what, args.describe(default)))
        end
      end
      if type(help) ~= "string" then fail(fname .. ": help must be a string, got " .. args.describe(help)) end
      s.flags[name] = {kind = kind, default = value, value = value, help = help, where = core.user_location()}
      s.order[#s.order + 1] = name
    end
    tf.flags["DEFINE_" .. kind] = define
  end
  tf.flags.DEFINE_bool = tf.flags.DEFINE_boolean
  args.secondary_names[tf.flags.DEFINE_bool] = true

  tf.app = tf.app or {}
  -- tf.app.run(main, argv): see the top of this file.
  function tf.app.run(main, argv)
    main = main or rawget(_G, "main")
    if type(main) ~= "function" then fail("tf.app.run: main must be a function (or a global function main)") end
    argv = argv or rawget(_G, "arg") or {}
    local FLAGS = tf.flags.FLAGS
    for i = 1, #argv do
      local a = argv[i]
      if a == "--" then break end
      if a == "--help" or a == "-h" or a == "-?" or a == "--helpfull" or a == "--helpshort" then
        io.stdout:write("\n       USAGE: ", tostring(argv[0] or "script"), " [flags]\nflags:\n\n",
                        FLAGS:get_help(), "\n")
        io.stdout:flush()
        os.exit(0)
      end
    end
    local ok, rest = pcall(FLAGS, argv)
    if not ok then
      io.stderr:write("FATAL Flags parsing error: ", (tostring(rest):gsub("^tf%.flags[^:]*: ", ""):gsub(" %(at [^()]*%)$", "")), "\n",
                      "Pass --helpshort or --helpfull to see help on flags.\n")
      os.exit(1)
    end
    local done, result = xpcall(main, debug.traceback, rest)
    io.stdout:flush()
    if not done then
      io.stderr:write(tostring(result), "\n")
      os.exit(1)
    end
    if result == nil then os.exit(0) end
    if type(result) == "number" then os.exit(result) end
    io.stderr:write(tostring(result), "\n")
    os.exit(1)
  end
end
