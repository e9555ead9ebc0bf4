-- session.lua — tf.Session: run, make_callable, close.
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local hygiene = require("moonflow.hygiene")
local host = require("moonflow.host")
local args = require("moonflow.args")
local C = core.C
local fail = core.fail

local Session = {}
Session.__index = Session

local M = {Session = Session}

-- The engine's session flags (src/include/moonflow.h) from the options
-- {allow_soft_placement=, log_device_placement=}.
local function session_flags(options)
  local flags = 0
  for key, flag in pairs({allow_soft_placement = C.MF_ALLOW_SOFT_PLACEMENT,
                          log_device_placement = C.MF_LOG_DEVICE_PLACEMENT}) do
    local v = options[key]
    if v ~= nil and type(v) ~= "boolean" then
      fail("tf.Session: " .. key .. " must be a boolean, got " .. tostring(v))
    end
    if v then flags = flags + flag end
  end
  return flags
end

-- The engine's device_count (mf_session_config) from TensorFlow's
-- ConfigProto map {CPU = 2, GPU = 0}.
local DEVICE_TYPES = {CPU = C.MF_CPU, GPU = C.MF_CUDA}
local function device_count(config, counts)
  if counts == nil then return end
  if not args.is_options(counts, true) then
    fail("tf.Session: device_count must be a table such as {CPU = 2}, got " .. tostring(counts))
  end
  for key, n in pairs(counts) do
    local t = DEVICE_TYPES[key]
    if not t then fail("tf.Session: device_count: unknown device type '" .. tostring(key) .. "' (expected CPU or GPU)") end
    if type(n) ~= "number" or n < 0 or n % 1 ~= 0 then
      fail("tf.Session: device_count." .. key .. " must be a non-negative integer, got " .. tostring(n))
    end
    -- TensorFlow's 0 GPUs is the engine's -1 (none); its 0 is the default.
    config.device_count[t] = (key == "GPU" and n == 0) and -1 or math.min(n, 0x7fffffff)  -- the engine checks the range
  end
end

-- Numbers fed to numeric tensors go through scalar values kept from run to
-- run, one per feed (`scalars.ptr[key]`, an owned mf_tensor*, and
-- `scalars.data[key]`, its element), so such a run allocates nothing: returns
-- the value holding v. recycle_scalar, after the run, keeps it for the next
-- run unless the run kept a reference (a variable took the fed value, a fetch
-- is the feed itself); then it is left to its holders and the next run makes
-- another.
-- (Numbers fed to bool and string tensors are refused by to_value.)
local function is_number_feed(v, dtype) return type(v) == "number" and (dtype.is_floating or dtype.is_integer) end
local function scalar_feed(scalars, key, v, dtype)
  local ptr = scalars.ptr[key]
  if ptr == nil then
    ptr = C.mf_tensor_new(dtype.enum, 0, nil, core.status)
    if ptr == nil then core.check() end
    ptr = ffi.gc(ptr, C.mf_tensor_release)
    scalars.ptr[key], scalars.data[key] = ptr, ffi.cast(dtype.ptr_ctype, C.mf_tensor_data(ptr))
  end
  scalars.data[key][0] = v
  return ptr
end
local function recycle_scalar(scalars, key)
  local ptr = scalars.ptr[key]
  if ptr ~= nil and C.mf_tensor_refcount(ptr) ~= 1 then scalars.ptr[key], scalars.data[key] = nil, nil end
end
local function new_scalars(weak)
  local mode = weak and {__mode = "k"} or nil
  return {ptr = setmetatable({}, mode), data = setmetatable({}, mode)}
end

-- tf.Session(graph) or tf.Session({graph=, allow_soft_placement=, log_device_placement=,
-- intra_op_parallelism_threads=, elementwise_fusion=, device_count=}).
local SESSION_OPTIONS = {"graph", "allow_soft_placement", "log_device_placement", "intra_op_parallelism_threads",
                         "elementwise_fusion", "device_count", positional = 0, empty = true}
function M.new(arg)
  local g, options
  if getmetatable(arg) == G.Graph then g, options = arg, {}
  elseif args.is_plain(arg) then
    options = args.options("tf.Session", SESSION_OPTIONS, arg)
    g = options.graph or G.get_default_graph()
    if getmetatable(g) ~= G.Graph then fail("tf.Session: graph must be a tf.Graph, got " .. tostring(g)) end
  elseif arg == nil then g, options = G.get_default_graph(), {}
  else fail("tf.Session(graph_or_options): expected a tf.Graph or an options table, got " .. tostring(arg)) end
  local threads = options.intra_op_parallelism_threads or 0
  if type(threads) ~= "number" or threads < 0 or threads % 1 ~= 0 then
    fail("tf.Session: intra_op_parallelism_threads must be a non-negative integer (0: the default), got " ..
         tostring(threads))
  end
  local fusion = options.elementwise_fusion
  if fusion ~= nil and type(fusion) ~= "boolean" then
    fail("tf.Session: elementwise_fusion must be a boolean, got " .. tostring(fusion))
  end
  local config = ffi.new("mf_session_config", session_flags(options), threads, fusion == false)
  device_count(config, options.device_count)
  local ptr = C.mf_session_new_with_config(g.ptr, config, core.status)
  if ptr == nil then core.check_here() end
  return setmetatable({ptr = ffi.gc(ptr, C.mf_session_free), graph = g, options = options,
                       _log_placement = options.log_device_placement == true, _scalars = new_scalars(true),
                       _flat = setmetatable({}, {__mode = "k"})},
                      Session)
end

-- With log_device_placement, the placement of each op of the plans built
-- since the last call ("a: (Add): /device:CPU:0"), through the print sink.
local function print_placement(self)
  local text = ffi.string(C.mf_session_take_placement_log(self.ptr))
  for line in text:gmatch("[^\n]+") do host.sink(line) end
end

function Session:close()
  if not self.closed then hygiene.session_closing(self) end
  C.mf_session_close(self.ptr)
  self.closed = true
end

-- The default session (TensorFlow 1.x's): the innermost sess:as_default(fn),
-- else the open tf.InteractiveSession made last; Tensor:eval and
-- Operation:run use it.
local default_sessions = {}
local interactive

function M.get_default_session()
  local top = default_sessions[#default_sessions]
  if top then return top end
  if interactive and not interactive.closed then return interactive end
end

-- sess:as_default(fn): fn(...) with sess as the default session (Python's
-- `with sess.as_default():`); returns what fn returns.
function Session:as_default(fn, ...)
  if type(fn) ~= "function" then
    fail("Session:as_default(fn): fn must be a function, got " .. args.describe(fn))
  end
  return G.with_pushed(default_sessions, self, fn, ...)
end

-- tf.InteractiveSession(graph_or_options): a session that makes itself the
-- default one until it is closed, for the REPL.
function M.interactive(arg)
  interactive = M.new(arg)
  return interactive
end

-- The session that t:eval() and op:run() use: `session` or the default one,
-- of the graph of x.
local function session_for(x, session, who)
  session = session or M.get_default_session()
  if session == nil then
    fail(who .. ": No default session is registered. Use sess:as_default(fn), make a " ..
         "tf.InteractiveSession(), or pass the session: " .. who:gsub(":.*", "") .. ":" ..
         (who:find("eval") and "eval(feeds, sess)" or "run(feeds, sess)"))
  end
  if getmetatable(session) ~= Session then
    fail(who .. ": session must be a tf.Session, got " .. args.describe(session))
  end
  if session.graph ~= x.graph then
    fail(who .. ": Cannot use the given session to evaluate " .. tostring(x) ..
         ": its graph is different from the session's graph.")
  end
  return session
end

-- t:eval(feeds, session): the value of t (Session:run's) in that session
-- or the default one.
function G.tensor_methods.eval(t, feeds, session)
  return session_for(t, session, "Tensor:eval"):run(t, feeds)
end

-- op:run(feeds, session): runs op in that session or the default one.
function G.op_methods.run(op, feeds, session)
  session_for(op, session, "Operation:run"):run(op, feeds)
end

function Session:__tostring()
  return "<tf.Session on " .. tostring(self.graph) .. (self.closed and " (closed)>" or ">")
end

-- Resolves a fetch or feed key given by name ("x:0" is a tensor, "x" an op)
-- for fname.
local function resolve(graph, x, fname)
  if type(x) ~= "string" then return x end
  local found, why
  if x:find(":%d+$") then found, why = graph:_find_tensor(x) else found, why = graph:_find_operation(x) end
  if not found then fail(fname .. ": " .. why) end
  return found
end

-- A fetch whose metatable has __fetch (tf.report_uninitialized_variables)
-- stands for another fetch structure and a function of its fetched value:
-- `__fetch(obj)` returns both. Its template is marked with this metatable.
local Converted = {}

-- Flattens a fetch structure into tensors and target ops; returns a template
-- that rebuild() fills: an index into the fetched values, false for an op, or
-- a table of templates.
local function flatten(graph, fetch, tensors, targets, fname)
  fetch = resolve(graph, fetch, fname)
  local mt = getmetatable(fetch)
  if type(mt) == "table" and mt.__fetch then
    local inner, convert = mt.__fetch(fetch)
    return setmetatable({inner = flatten(graph, inner, tensors, targets, fname), convert = convert}, Converted)
  end
  if G.is_tensor(fetch) then
    tensors[#tensors + 1] = fetch
    return #tensors
  elseif G.is_operation(fetch) then
    targets[#targets + 1] = fetch
    return false
  elseif type(fetch) == "table" and getmetatable(fetch) == nil then
    local template = {}
    for k, v in pairs(fetch) do template[k] = flatten(graph, v, tensors, targets, fname) end
    return template
  end
  fail(fname .. ": Fetch argument " .. tostring(fetch) .. " has invalid type " .. type(fetch) ..
       ": expected a Tensor, an Operation, a name, or a table of them")
end

-- A fetch from another graph: the error names the line that created it.
local function foreign_fetch(t, fname)
  local origin = t.op.origin
  fail(fname .. ": Fetch argument " .. tostring(t) .. " is not an element of this session's graph" ..
       (origin ~= "" and " (created at " .. origin .. ")" or ""))
end

local function rebuild(template, values)
  if type(template) == "number" then return values[template] end
  if template == false then return nil end
  if getmetatable(template) == Converted then return template.convert(rebuild(template.inner, values)) end
  local out = {}
  for k, v in pairs(template) do out[k] = rebuild(v, values) end
  return out
end

-- Fetched values own C memory that LuaJIT's collector cannot see (a 40 MB
-- result is a small cdata to it), so results a loop drops would pile up for
-- thousands of runs before their buffers went back to the session's
-- allocator for reuse. So count the bytes handed out, and before a run finish
-- a collection once they exceed both 32 MB and twice the Lua heap. A full
-- collection costs about 1 ns per heap byte, so this spends at most ~0.5 ns
-- per fetched byte, and with the small heap of most scripts (about 1 MB:
-- moonflow's own modules) about 0.03 ns, less than the page faults of fresh
-- buffers, and keeps dead results bounded. (With 4 MB, a collection every
-- 16 results of a 256x256 matmul took a quarter of its time.) A loop
-- fetching large results then allocates nothing after a few runs.
local unseen_bytes = 0
local UNSEEN_MIN = 32 * 2 ^ 20
local function collect_if_due()
  if unseen_bytes >= UNSEEN_MIN and unseen_bytes >= 2048 * collectgarbage("count") then
    unseen_bytes = 0
    collectgarbage()
  end
end

-- A fetched mf_tensor* (new reference) as a Lua value: scalars become numbers
-- (booleans for bool, complex cdata for complex dtypes), anything else an Array.
local function to_lua(ptr)
  if C.mf_tensor_rank(ptr) == 0 then
    local dtype = core.by_enum[tonumber(C.mf_tensor_dtype(ptr))]
    if dtype.name == "string" or dtype.is_complex then
      local s = Array.wrap(ptr):get()
      return s
    end
    local v = ffi.cast(dtype.ptr_ctype, C.mf_tensor_data(ptr))[0]
    C.mf_tensor_release(ptr)
    if dtype.name == "bool" then return v end
    return tonumber(v)
  end
  unseen_bytes = unseen_bytes + tonumber(C.mf_tensor_nbytes(ptr))
  return Array.wrap(ptr)
end
M.to_lua = to_lua

-- A feed value as an mf_tensor* for tensor `t` of `dtype`. Returns the
-- pointer and what keeps its value alive until the run is over (`hold`: an
-- Array, or for a number a new reference with a finalizer, which release_holds
-- releases after the run; an error on the way leaves it to the collector, so
-- nothing leaks), and for FFI cdata (a pointer or array holding raw data,
-- wrapped without copying in the shape of t, which must be fully defined) the
-- wrapping Array, whose memory fetched results may share (see keep_fed).
local function to_value(v, dtype, t)
  if Array.is(v) then return v.ptr, v end
  if type(v) == "cdata" then
    local shape = t:get_shape()
    if not shape:is_fully_defined() then
      fail("cannot feed a cdata pointer to a tensor of shape " .. tostring(shape) .. ", which is not fully " ..
           "defined; use tf.Array.from_pointer(ptr, shape, dtype)")
    end
    -- The elements must be of dtype's C type (a void* is trusted).
    local ctype = tostring(ffi.typeof(v)):match("^ctype<(.*)>$"):gsub("^const ", "")
    local elem = tostring(ffi.typeof(dtype.ctype)):match("^ctype<(.*)>$")
    if ctype ~= "void *" and ctype:sub(1, #elem + 2) ~= elem .. " [" and ctype ~= elem .. " *" then
      fail("cannot feed a cdata of type " .. ctype .. " to a " .. dtype.name .. " tensor: it must hold " ..
           dtype.ctype .. " values (or be a void*)")
    end
    local a = Array.from_pointer(v, shape:as_list(), dtype)
    return a.ptr, a, a
  end
  if type(v) == "number" or type(v) == "boolean" then
    if dtype.name == "bool" and type(v) ~= "boolean" then fail("cannot feed a number to a bool tensor") end
    if dtype.name == "string" then fail("cannot feed a " .. type(v) .. " to a string tensor") end
    local ptr = C.mf_tensor_new(dtype.enum, 0, nil, core.status)
    if ptr == nil then core.check() end
    ptr = ffi.gc(ptr, C.mf_tensor_release)
    local data = ffi.cast(dtype.ptr_ctype, C.mf_tensor_data(ptr))
    if dtype.name == "bool" then data[0] = v else data[0] = type(v) == "boolean" and (v and 1 or 0) or v end
    return ptr, ptr
  end
  if type(v) == "table" or type(v) == "string" then
    local a = Array.from(v, dtype)
    return a.ptr, a
  end
  fail("cannot feed a " .. type(v) .. ": use a number, boolean, string, nested table, tf.Array or FFI cdata")
end
M.to_value = to_value

-- Loops on the run path (sess:run, callables) run for the second and later
-- elements only: each(first, last, fn, x, y) calls fn(i, x, y) for i = first..last,
-- the first call outside the loop. LuaJIT counts a loop hot at every pass of
-- its back edge, leaving or not, so a loop that runs once per run (one feed,
-- one fetch) becomes a trace start that always aborts ("leaving loop in root
-- trace"); after enough runs (a soak of 1M) LuaJIT blacklists it, and from
-- then on every trace through it aborts too: the whole run path, and the
-- caller's loop, fall back to the interpreter (10x slower) for good. Loops
-- over tables (pairs) likewise take the usual single key with next().
local function each(first, last, fn, x, y)
  if first > last then return end
  fn(first, x, y)
  for i = first + 1, last do fn(i, x, y) end
end

-- Ends what the hold of to_value in holds[i] keeps alive, once the run is
-- over, and clears the entry; release_holds does so for holds[first..last].
local function release_hold(i, holds)
  local hold = holds[i]
  if type(hold) == "cdata" then C.mf_tensor_release(ffi.gc(hold, nil)) end
  holds[i] = nil
end
local function release_holds(holds, first, last) each(first, last, release_hold, holds) end
M.release_holds = release_holds

-- Fetched Arrays whose data lies inside a cdata feed's memory (the fed
-- placeholder itself, or a view of it) keep that memory alive.
local function keep_fed(values, kept)
  if not kept or not next(kept) then return end
  for _, a in pairs(kept) do
    local lo = ffi.cast("uintptr_t", C.mf_tensor_data(a.ptr))
    local hi = lo + a:size() * a.dtype.size
    for _, v in ipairs(values) do
      if Array.is(v) then
        local p = ffi.cast("uintptr_t", C.mf_tensor_data(v.ptr))
        if p >= lo and p < hi then v._keep = a end
      end
    end
  end
end

-- Reusable C buffers, grown on demand, so a run allocates no cdata.
local function buffers(self, nfeeds, nfetches, ntargets)
  local b = self._buf
  if not b or b.nfeeds < nfeeds or b.nfetches < nfetches or b.ntargets < ntargets then
    b = {nfeeds = math.max(nfeeds, 4), nfetches = math.max(nfetches, 4), ntargets = math.max(ntargets, 4),
         graph = self.graph}
    b.feed_ports = core.ports(b.nfeeds)
    b.feed_values = core.value_ptrs(b.nfeeds)
    b.feed_holds = {}
    b.scalar_keys = {}
    b.fetch_ports = core.ports(b.nfetches)
    b.fetch_values = core.value_ptrs(b.nfetches)
    b.targets = core.op_ptrs(b.ntargets)
    self._buf = b
  end
  return b
end

-- Converts feed k = v into the buffers at index n; returns the next index.
local function set_feed(self, b, n, k, v)
  local ok, t = true, k  -- only a name can fail to resolve
  if type(k) == "string" then ok, t = pcall(resolve, self.graph, k, "Session:run") end
  if not ok or not G.is_tensor(t) then
    release_holds(b.feed_holds, 0, n - 1)
    if not ok then error(t, 0) end
    fail("Session:run: Cannot interpret feed_dict key " .. tostring(k) .. " as a Tensor")
  end
  b.feed_ports[n].op = t.op.ptr
  b.feed_ports[n].index = t.value_index
  local dtype = t.dtype
  if is_number_feed(v, dtype) then
    b.feed_values[n] = scalar_feed(self._scalars, t, v, dtype)
    b.scalar_keys[n] = t
    n = n + 1
  else
    local converted, ptr, hold, kept = pcall(to_value, v, dtype, t)
    if not converted then
      release_holds(b.feed_holds, 0, n - 1)
      fail("feed for " .. t.name .. ": " .. tostring(ptr))
    end
    b.feed_values[n] = ptr
    b.feed_holds[n] = hold
    b.scalar_keys[n] = false
    n = n + 1
    if kept then
      b.feed_kept = b.feed_kept or {}
      b.feed_kept[n] = kept
    end
  end
  return n
end

-- Converts feeds {[tensor or "x:0"] = value} into the buffers; returns the count.
local function set_feeds(self, b, feeds)
  b.feed_kept = nil
  local k, v = next(feeds)
  if k == nil then return 0 end
  local n = set_feed(self, b, 0, k, v)
  if next(feeds, k) == nil then return n end  -- one feed: no loop (see each)
  for k2, v2 in next, feeds, k do n = set_feed(self, b, n, k2, v2) end
  return n
end

-- Feeds keyed by a composite tensor (a tf.SparseTensor), whose metatable's
-- __feed(key, value) lists the {tensor, value} pairs it stands for, replaced
-- by those pairs; the feeds themselves when there is none.
local function is_composite(k)
  local mt = type(k) == "table" and getmetatable(k)
  return mt and mt.__feed ~= nil
end
local function expand_feeds(feeds)
  local first = next(feeds)
  if first == nil or (next(feeds, first) == nil and not is_composite(first)) then return feeds end  -- see each
  local expanded
  for k in pairs(feeds) do
    if is_composite(k) then expanded = {} break end
  end
  if not expanded then return feeds end
  for k, v in pairs(feeds) do
    if is_composite(k) then
      for _, pair in ipairs(getmetatable(k).__feed(k, v)) do expanded[pair[1]] = pair[2] end
    else
      expanded[k] = v
    end
  end
  return expanded
end

-- The flattened fetches of a run (flatten): tensors, targets and template.
-- A fetch that is one Tensor or Operation, immutable handles, keeps them in
-- the session for its next runs (read-only from then on).
local function flat_fetches(self, fetches)
  local flat = self._flat[fetches]
  if flat then return flat[1], flat[2], flat[3] end
  local tensors, targets = {}, {}
  local template = flatten(self.graph, fetches, tensors, targets, "Session:run")
  if G.is_tensor(fetches) or G.is_operation(fetches) then self._flat[fetches] = {tensors, targets, template} end
  return tensors, targets, template
end

local function count_feeds(feeds)
  local k = feeds and next(feeds)
  if k == nil then return 0 end
  if next(feeds, k) == nil then return 1 end  -- see each
  local n = 0
  for _ in pairs(feeds) do n = n + 1 end
  return n
end

-- Fetch port i (0-based) of buffers b: tensors[i + 1].
local function set_fetch_port(i, b, tensors)
  local t = tensors[i + 1]
  if t.graph ~= b.graph then foreign_fetch(t, "Session:run") end
  b.fetch_ports[i].op = t.op.ptr
  b.fetch_ports[i].index = t.value_index
end
local function set_target(i, b, targets) b.targets[i] = targets[i + 1].ptr end

-- After a run: the scalar of feed i goes back to the session's (recycle_scalar).
local function recycle_fed_scalar(i, self, b)
  if b.scalar_keys[i] then recycle_scalar(self._scalars, b.scalar_keys[i]) end
end

-- sess:run(fetches, feeds): fetches is a tensor, op, name or nested table.
local CLOSED = "Attempted to use a closed Session: create a new tf.Session to run again"

function Session:run(fetches, feeds)
  if self.closed then fail("Session:run: " .. CLOSED) end
  if feeds ~= nil and not args.is_plain(feeds) then
    fail("Session:run: feeds must be a table {[tensor or \"name:0\"] = value}, got " .. args.describe(feeds))
  end
  if feeds then feeds = expand_feeds(feeds) end
  local graph = self.graph
  local tensors, targets, template = flat_fetches(self, fetches)
  -- Dataset iterators (data/iterator.lua) add their next elements to the feeds.
  if graph._before_run then feeds = graph._before_run(self, tensors, targets, feeds) end
  local b = buffers(self, count_feeds(feeds), #tensors, #targets)
  each(0, #tensors - 1, set_fetch_port, b, tensors)
  each(0, #targets - 1, set_target, b, targets)
  local nfeeds = feeds and set_feeds(self, b, feeds) or 0
  collect_if_due()
  -- A graph with host ops (tf.lua_func, tf.Print) calls back into Lua: host.lua.
  local run_c = graph._host_ops and host.session_run or C.mf_session_run
  local rc = run_c(self.ptr, b.feed_ports, b.feed_values, nfeeds, b.fetch_ports,
                   b.fetch_values, #tensors, b.targets, #targets, core.status)
  release_holds(b.feed_holds, 0, nfeeds - 1)
  each(0, nfeeds - 1, recycle_fed_scalar, self, b)
  if self._log_placement then
    local message = rc ~= 0 and ffi.string(C.mf_status_message(core.status))
    print_placement(self)
    if message then error(message, 0) end
  end
  if rc ~= 0 then core.check() end
  hygiene.after_run(self)
  if self.on_run then self.on_run(self, tensors, targets) end
  local kept = b.feed_kept
  b.feed_kept = nil
  if template == 1 and not kept then return to_lua(b.fetch_values[0]) end
  local values = {}
  for i = 1, #tensors do values[i] = to_lua(b.fetch_values[i - 1]) end
  keep_fed(values, kept)
  return rebuild(template, values)
end

-- The engine's callable fetching the flattened fetches (tensors, targets) with
-- the tensors of feed_list fed, and those tensors; prints the placement of a
-- new plan when the session logs it. fname names the caller in errors.
local function engine_callable(self, fname, tensors, targets, feed_list)
  local graph = self.graph
  feed_list = feed_list or {}
  if not args.is_plain(feed_list) then
    fail(fname .. ": feed_list must be a list of tensors, got " .. args.describe(feed_list))
  end
  local nfeeds, nfetches = #feed_list, #tensors
  local feed_ports = core.ports(math.max(nfeeds, 1))
  local feed_tensors = {}
  for i, k in ipairs(feed_list) do
    local t = resolve(graph, k, fname)
    if not G.is_tensor(t) then fail(fname .. ": feed " .. tostring(k) .. " is not a Tensor") end
    feed_tensors[i] = t
    feed_ports[i - 1].op, feed_ports[i - 1].index = t.op.ptr, t.value_index
  end
  local fetch_ports = core.ports(math.max(nfetches, 1))
  for i, t in ipairs(tensors) do
    if t.graph ~= graph then foreign_fetch(t, fname) end
    fetch_ports[i - 1].op, fetch_ports[i - 1].index = t.op.ptr, t.value_index
  end
  local target_ptrs = core.op_ptrs(math.max(#targets, 1))
  for i, op in ipairs(targets) do target_ptrs[i - 1] = op.ptr end
  local callable = C.mf_session_make_callable(self.ptr, feed_ports, nfeeds, fetch_ports, nfetches,
                                              target_ptrs, #targets, core.status)
  if callable == nil then core.check() end
  if self._log_placement then print_placement(self) end
  return callable, feed_tensors
end

-- mf_callable_run_into as a pointer returning int: LuaJIT's interpreter boxes
-- an enum result (mf_code) in a new cdata, which would make every frame of a
-- loop running into caller buffers leave garbage when the loop is not compiled.
local callable_run_into = ffi.cast("int (*)(mf_callable *, mf_tensor *const *, mf_tensor *const *, mf_status *)",
                                   C.mf_callable_run_into)

-- sess:make_callable(fetches, feed_list): a function taking the feed values in
-- feed_list order and returning what run would.
function Session:make_callable(fetches, feed_list, _unwrapped)
  if self.closed then fail("Session:make_callable: " .. CLOSED) end
  local graph = self.graph
  local tensors, targets = {}, {}
  local template = flatten(graph, fetches, tensors, targets, "Session:make_callable")
  -- Dataset iterators (data/iterator.lua) wrap the callable to feed their elements.
  if graph._wrap_callable and not _unwrapped then
    return graph._wrap_callable(self, fetches, feed_list, tensors, targets)
  end
  local callable, feed_tensors = engine_callable(self, "Session:make_callable", tensors, targets, feed_list)
  local nfeeds, nfetches = #feed_tensors, #tensors
  local log_placement = self._log_placement
  local feed_values = core.value_ptrs(math.max(nfeeds, 1))
  local fetch_values = core.value_ptrs(math.max(nfetches, 1))
  local holds, cdata_feeds, scalar_used, scalars = {}, {}, {}, new_scalars(false)
  local feed_dtypes = {}
  for i, t in ipairs(feed_tensors) do feed_dtypes[i] = t.dtype end
  local session = self  -- keeps the session (and so the callable) alive
  local single = type(template) == "number"
  local out_values = core.value_ptrs(math.max(nfetches, 1))
  -- A trailing {out = arrays}: the results go into the caller's arrays (an
  -- Array for one fetched tensor, else a list of them in fetch order), which
  -- are returned; nothing is allocated for them, nor any Lua garbage made
  -- when the caller reuses its options table.
  local function outputs_of(options)
    if type(options) ~= "table" or options.out == nil or next(options, next(options)) ~= nil then
      fail("Session callable: takes " .. nfeeds .. " feed values and optionally {out = arrays}, got " ..
           select("#", options) .. " extra argument of type " .. type(options))
    end
    local out = options.out
    if Array.is(out) and nfetches == 1 then
      out_values[0] = out.ptr
      return out
    end
    if type(out) ~= "table" or Array.is(out) or #out ~= nfetches then
      fail("Session callable: out must be " .. (nfetches == 1 and "an Array" or "a list of " .. nfetches ..
           " Arrays, one per fetched tensor"))
    end
    for i = 1, nfetches do
      if not Array.is(out[i]) then fail("Session callable: out[" .. i .. "] is not an Array") end
      out_values[i - 1] = out[i].ptr
    end
    return out
  end
  -- Feed i takes value v; true when its Array shares cdata memory (to_value's kept).
  local function set_feed_value(i, v)
    local dtype = feed_dtypes[i]
    if is_number_feed(v, dtype) then
      feed_values[i - 1], scalar_used[i] = scalar_feed(scalars, i, v, dtype), true
      return false
    end
    local ok, ptr, hold, kept = pcall(to_value, v, dtype, feed_tensors[i])
    if not ok then
      release_holds(holds, 1, i - 1)
      fail("feed for " .. feed_tensors[i].name .. ": " .. tostring(ptr))
    end
    feed_values[i - 1], holds[i], cdata_feeds[i], scalar_used[i] = ptr, hold, kept, false
    return kept ~= nil
  end
  -- After a run: feed i's hold ends, its scalar goes back (recycle_scalar).
  local function finish_feed(i)
    release_hold(i, holds)
    if scalar_used[i] then recycle_scalar(scalars, i) end
  end
  local function forget_cdata_feed(i) cdata_feeds[i] = nil end
  return function(...)
    if session.closed then
      fail(CLOSED)
    end
    local out = select("#", ...) > nfeeds and outputs_of(select(nfeeds + 1, ...))
    -- The first feed outside the loop (see each); select, as (...) here came out as the
    -- last argument in this LuaJIT (spec/memory_spec.lua's out = arrays runs).
    local any_kept = nfeeds > 0 and set_feed_value(1, (select(1, ...)))
    for i = 2, nfeeds do
      if set_feed_value(i, (select(i, ...))) then any_kept = true end
    end
    collect_if_due()
    local rc
    if out then
      rc = callable_run_into(callable, feed_values, out_values, core.status)
    elseif session.graph._host_ops then  -- calls back into Lua: host.lua
      rc = host.callable_run(session.ptr, callable, feed_values, fetch_values, core.status)
    else
      rc = C.mf_callable_run(callable, feed_values, fetch_values, core.status)
    end
    each(1, nfeeds, finish_feed)
    if log_placement then  -- plans of functions (branches, loop bodies) built by this run
      local message = rc ~= 0 and ffi.string(C.mf_status_message(core.status))
      print_placement(session)
      if message then error(message, 0) end
    end
    if rc ~= 0 and out then fail("Session callable: " .. ffi.string(C.mf_status_message(core.status))) end
    if rc ~= 0 then core.check() end
    if out then
      each(1, nfeeds, forget_cdata_feed)
      if Array.is(out) then return single and out or rebuild(template, {out}) end
      if single then return out[1] end
      return rebuild(template, out)
    end
    local result
    if single and not any_kept then
      result = to_lua(fetch_values[0])
    else
      local values = {}
      for i = 1, nfetches do values[i] = to_lua(fetch_values[i - 1]) end
      keep_fed(values, cdata_feeds)
      result = single and values[1] or rebuild(template, values)
    end
    each(1, nfeeds, forget_cdata_feed)
    return result
  end
end

local plan_stats = ffi.new("mf_plan_stats")
-- sess:plan_stats(fetches, feed_list): what a run fetching fetches with the
-- tensors of feed_list fed runs (mf_callable_plan_stats): {num_steps=,
-- num_fused_groups=, num_fused_ops=}, a fused group counting as one step.
function Session:plan_stats(fetches, feed_list)
  if self.closed then fail("Session:plan_stats: " .. CLOSED) end
  local tensors, targets = {}, {}
  flatten(self.graph, fetches, tensors, targets, "Session:plan_stats")
  C.mf_callable_plan_stats(engine_callable(self, "Session:plan_stats", tensors, targets, feed_list), plan_stats)
  return {num_steps = plan_stats.num_steps, num_fused_groups = plan_stats.num_fused_groups,
          num_fused_ops = plan_stats.num_fused_ops}
end

-- Number of execution plans cached (one per feeds/fetches/targets signature).
function Session:num_plans() return C.mf_session_num_plans(self.ptr) end
-- Buffers taken from the system by all runs so far.
function Session:num_allocations() return tonumber(C.mf_session_num_allocations(self.ptr)) end

local function memory_table(m, into)
  into = into or {}
  into.bytes_in_use, into.peak_bytes_in_use = tonumber(m.bytes_in_use), tonumber(m.peak_bytes_in_use)
  into.bytes_kept, into.num_allocations = tonumber(m.bytes_kept), tonumber(m.num_allocations)
  return into
end

local stats = ffi.new("mf_memory_stats")
-- The session's memory for tensors (mf_memory_stats), summed over its
-- devices: bytes in use, the peak, bytes kept for reuse, buffers taken from
-- the system.
function Session:memory_stats()
  C.mf_session_memory_stats(self.ptr, stats)
  return memory_table(stats)
end

-- The session's devices, as TensorFlow's Session.list_devices:
-- {{name = "/job:localhost/replica:0/task:0/device:CPU:0", device_type = "CPU",
-- memory_limit = bytes}, ...}, CPU:0 first.
function Session:list_devices()
  local out = {}
  for i = 0, C.mf_session_num_devices(self.ptr) - 1 do
    local name = ffi.string(C.mf_session_device_name(self.ptr, i))
    local kind, index = name:match("/device:(%u+):(%d+)$")
    -- A session's extra CPUs split the host's memory; a GPU's is its own.
    out[#out + 1] = {name = name, device_type = kind,
                     memory_limit = tonumber(C.mf_device_memory_limit(DEVICE_TYPES[kind],
                                                                       kind == "GPU" and tonumber(index) or 0))}
  end
  return out
end

local device_stats = ffi.new("mf_device_stats")
-- Per device (in list_devices' order): its memory (as memory_stats) and the
-- values runs copied onto and off it (copies_to, copies_from, bytes_to,
-- bytes_from; mf_device_stats).
function Session:device_stats()
  local out = {}
  for i = 0, C.mf_session_num_devices(self.ptr) - 1 do
    C.mf_session_device_stats(self.ptr, i, device_stats)
    local d = memory_table(device_stats.memory, {name = ffi.string(C.mf_session_device_name(self.ptr, i))})
    d.copies_to, d.copies_from = tonumber(device_stats.copies_to), tonumber(device_stats.copies_from)
    d.bytes_to, d.bytes_from = tonumber(device_stats.bytes_to), tonumber(device_stats.bytes_from)
    out[i + 1] = d
  end
  return out
end

return M
