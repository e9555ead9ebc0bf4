-- hygiene.lua — warnings about graph-building mistakes that TensorFlow lets
-- pass in silence (see "How Not To Program the TensorFlow Graph"):
--   * a line that keeps creating ops between the runs of a session, e.g.
--     `sess:run(tf.assign(x, x + 1))` in a loop: the graph grows every step;
--   * a constant larger than 1 MB embedded in the graph instead of fed;
--   * a tf.Print or assertion that no run of a session reached, reported when
--     the session closes (ops/debugging.lua registers the check).
-- Each warning goes to stderr once per cause (the Lua line responsible).
-- The settings are this module's fields, exposed as tf.hygiene:
--   tf.hygiene.enabled = false          silences every warning
--                                       (or MOONFLOW_HYGIENE=0 in the environment)
--   tf.hygiene.graph_growth = false     silences one kind;
--   tf.hygiene.large_constants = false  likewise
--   tf.hygiene.unreached_debug_ops = false  likewise
--   tf.hygiene.growth_runs              gaps between runs in which one line must
--                                       create ops before it is reported (10)
--   tf.hygiene.large_constant_bytes     the size above which a constant is reported
--   tf.hygiene.output                   function(message) writing a warning
local ffi = require("ffi")
local core = require("moonflow.core")
local C = core.C

local M = {
  enabled = os.getenv("MOONFLOW_HYGIENE") ~= "0",
  graph_growth = true,
  large_constants = true,
  unreached_debug_ops = true,
  growth_runs = 10,
  large_constant_bytes = 2 ^ 20,
  output = function(message) io.stderr:write(message, "\n") end,
}

-- Causes already reported: kind .. "@" .. Lua line (or the key given).
local warned = {}

local function warn(kind, where, message, key)
  if not M.enabled or not M[kind] then return end
  key = kind .. "@" .. (key or where)
  if warned[key] then return end
  warned[key] = true
  M.output("moonflow warning: " .. where .. ": " .. message ..
           " (silence with tf.hygiene." .. kind .. " = false)")
end

local function megabytes(bytes) return string.format("%.1f MB", bytes / 2 ^ 20) end

-- Called by graph.lua for every constant built from a Lua value.
function M.constant_built(t, bytes, where)
  if bytes <= M.large_constant_bytes then return end
  local dims = t:get_shape():as_list()
  warn("large_constants", where, string.format(
    "a constant of %s ('%s', %s, shape {%s}) is embedded in the graph, which keeps a copy " ..
    "for as long as it lives. Feed the data instead: local x = tf.placeholder(tf.%s, {%s}), " ..
    "then sess:run(y, {[x] = value})",
    megabytes(bytes), t.op.name, t.dtype.name, table.concat(dims, ", "), t.dtype.name,
    table.concat(dims, ", ")))
end

-- At most this many of the ops created since the last run are looked at: the
-- offending line is among the newest, and a run must stay cheap.
local SCAN_LIMIT = 4096

-- Called by Session:run after each run: notes which lines created ops since
-- the session's previous run, and reports a line that did so in
-- `growth_runs` such gaps.
function M.after_run(sess)
  local gptr = sess.graph.ptr
  local n = C.mf_graph_num_ops(gptr)
  local last = sess._hygiene_num_ops
  sess._hygiene_num_ops = n
  if last == nil or n == last or not (M.enabled and M.graph_growth) then return end
  local gaps = sess._hygiene_gaps
  if not gaps then gaps = {}; sess._hygiene_gaps = gaps end
  local seen = {}
  for id = n - 1, math.max(last, n - SCAN_LIMIT), -1 do  -- newest first: the op the line ran
    local op = C.mf_graph_op(gptr, id)
    local where = ffi.string(C.mf_op_origin(op))
    if not seen[where] then
      seen[where] = true
      local count = (gaps[where] or 0) + 1
      gaps[where] = count
      if count >= M.growth_runs and where ~= "" and where ~= "?" then
        warn("graph_growth", where, string.format(
          "new ops (such as '%s', a %s) were created here between %d runs of a session; the " ..
          "graph keeps growing (%d ops now) and every run has to prepare new ops. Build the op " ..
          "once, before the loop, and run it many times: local step = tf.assign(x, x + 1) ... " ..
          "for i = 1, n do sess:run(step) end",
          ffi.string(C.mf_op_name(op)), ffi.string(C.mf_op_type(op)), count, n))
      end
    end
  end
end

-- Checks run when a session closes, before its values go: functions(sess, warn)
-- where warn(kind, where, message, key) reports once per key.
M.close_checks = {}

-- Called by Session:close.
function M.session_closing(sess)
  if not M.enabled then return end
  for _, check in ipairs(M.close_checks) do check(sess, warn) end
end

return M
