-- data/iterator.lua — iterators: ds:make_one_shot_iterator(),
-- ds:make_initializable_iterator(), it:get_next(), and the session hooks that
-- feed get_next. it:get_next() builds one Placeholder per element component
-- (named IteratorGetNext…) and marks them, and the initializer op, on the
-- graph; Session:run (and make_callable) call the graph's `_before_run` /
-- `_wrap_callable` hook with the run's fetches and targets. The hook looks
-- up, memoized per op, which get_next groups and iterator initializers the
-- fetched ops depend on (through data and control inputs, so `train_op`
-- reaches the get_next behind its loss), restarts the iterators whose
-- initializer runs, pulls one element per get_next group the run needs, and
-- adds the element to the run's feeds. Iterator state is per (iterator,
-- session): two sessions iterate independently, like variables.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local dataset = require("moonflow.data.dataset")
local pack = require("moonflow.data.structure").pack
local materialize = require("moonflow.data.component").materialize
local give_back = require("moonflow.data.recycler").give_back
local C = core.C
local fail = core.fail

local Dataset, check_dataset = dataset.Dataset, dataset.check

local M = {}

local Iterator = {}
Iterator.__index = Iterator
M.Iterator = Iterator

local function graph_data(g)
  local d = g._data
  if not d then
    d = {reach = setmetatable({}, {__mode = "k"}), marks = {}}
    g._data = d
    g._before_run = function(sess, tensors, targets, feeds) return M.before_run(g, sess, tensors, targets, feeds) end
    g._wrap_callable = function(sess, fetches, feed_list, tensors, targets)
      return M.wrap_callable(g, sess, fetches, feed_list, tensors, targets)
    end
  end
  return d
end

local function make_iterator(ds, one_shot, what)
  check_dataset(ds, what)
  local g = G.get_default_graph()
  if g._parent then fail(what .. ": build iterators outside tf.cond / tf.while_loop functions") end
  local it = setmetatable({dataset = ds, one_shot = one_shot, graph = g, origin = core.user_location(),
                           states = setmetatable({}, {__mode = "k"})}, Iterator)
  local d = graph_data(g)
  if not one_shot then
    it.initializer = G.build{"NoOp", name = "MakeIterator"}
    d.marks[it.initializer] = {kind = "init", iterator = it}
  end
  it.name = one_shot and "OneShotIterator" or "Iterator"
  return it
end

function Dataset:make_one_shot_iterator() return make_iterator(self, true, "Dataset:make_one_shot_iterator") end
function Dataset:make_initializable_iterator() return make_iterator(self, false, "Dataset:make_initializable_iterator") end

function Iterator:__tostring() return "<moonflow.Iterator over " .. tostring(self.dataset) .. ">" end

-- it:get_next(): the element's tensors, with the dataset's structure. Each
-- run that needs them advances the iterator once (per get_next call).
function Iterator:get_next(name)
  if getmetatable(self) ~= Iterator then fail("Iterator:get_next: call it as a method (it:get_next())") end
  local g = self.graph
  if G.get_default_graph():outermost() ~= g then
    fail("Iterator:get_next: the iterator belongs to another graph; call get_next with its graph as default")
  end
  name = args.name_of(name, "Iterator:get_next") or "IteratorGetNext"
  local phs = {}
  g:as_default(function()
    for i, c in ipairs(self.dataset.spec) do
      phs[i] = G.placeholder(c.dtype, c.shape, name)
    end
  end)
  local group = {kind = "next", iterator = self, tensors = phs}
  local d = graph_data(g)
  for _, t in ipairs(phs) do d.marks[t.op] = group end
  return pack(self.dataset.template, phs)
end

-- The marks (get_next groups, initializers) an op depends on: nil or a list.
-- The cached answer is looked up apart from the walk: a function that makes
-- closures closes upvalues when it returns, which LuaJIT cannot compile, and
-- every run asks for the cached answer.
local walk_reach
local function reach(d, op)
  local r = d.reach[op]
  if r ~= nil then return r or nil end
  return walk_reach(d, op)
end

function walk_reach(d, op)
  local found, seen = nil, nil
  local function add(list)
    if not list then return end
    if found == nil then found = list; return end
    if not seen then
      local copy = {}
      seen = {}
      for i, m in ipairs(found) do copy[i] = m; seen[m] = true end
      found = copy
    end
    for _, m in ipairs(list) do
      if not seen[m] then seen[m] = true; found[#found + 1] = m end
    end
  end
  local mark = d.marks[op]
  if mark then add({mark}) end
  local p = op.ptr
  local g = op.graph
  for i = 0, C.mf_op_num_inputs(p) - 1 do
    local inp = C.mf_op_input(p, i)
    add(reach(d, g:_op(inp.op)))
  end
  for i = 0, C.mf_op_num_control_inputs(p) - 1 do add(reach(d, g:_op(C.mf_op_control_input(p, i)))) end
  d.reach[op] = found or false
  return found
end

local function end_of_sequence(it)
  local how = it.one_shot and
    "a one-shot iterator does not restart: use ds:make_initializable_iterator() and run it.initializer " ..
    "for another epoch, or ds:repeat_()" or
    "catch it with pcall to end the epoch, and run it.initializer to start another"
  fail("OutOfRangeError: End of sequence: iterator '" .. it.name .. "' (created at " .. it.origin ..
       ") has no more elements; " .. how)
end

-- (Re)starts the iterator's epoch in this session.
local function restart(it, sess, feeds)
  local st = it.states[sess]
  if not st then
    st = {node = {}}
    it.states[sess] = st
  end
  if st.readers then  -- the last epoch's work read ahead: cancel it
    for discard in pairs(st.readers) do discard() end
  end
  st.next, st.done = nil, false
  local ctx = {session = sess, feeds = feeds, node = st.node, readers = setmetatable({}, {__mode = "k"})}
  st.readers = ctx.readers
  st.next = it.dataset.open(ctx)
  ctx.feeds = nil
  return st
end

local function pull(it, sess)
  local st = it.states[sess]
  if not st or not st.next then
    if not it.one_shot or (st and st.done) then
      if st and st.done then end_of_sequence(it) end
      fail("FailedPreconditionError: GetNext() failed because the iterator has not been initialized. " ..
           "Ensure that you have run the initializer operation for this iterator before getting the " ..
           "next element: sess:run(it.initializer) (iterator created at " .. it.origin .. ")")
    end
    st = restart(it, sess, nil)
  end
  if st.done then end_of_sequence(it) end
  local fed = st.fed
  if fed then
    for i = 1, #fed do give_back(fed[i]) end
    st.fed = nil
  end
  local e = st.next()
  if e == nil then
    st.done = true
    end_of_sequence(it)
  end
  return e
end

local function collect(d, list, out, seen)
  for _, x in ipairs(list) do
    local op = G.is_tensor(x) and x.op or x
    local r = reach(d, op)
    if r then
      for _, m in ipairs(r) do
        if not seen[m] then seen[m] = true; out[#out + 1] = m end
      end
    end
  end
end

-- Restarts the iterators whose initializer is among marks; then, for each
-- get_next group, calls put(tensor, value) with the next element (groups
-- whose tensors are fed already (`fed(tensor)`) are left alone).
local function advance(marks, sess, feeds, fed, put)
  for _, m in ipairs(marks) do
    if m.kind == "init" then restart(m.iterator, sess, feeds) end
  end
  for _, m in ipairs(marks) do
    if m.kind == "next" and not fed(m.tensors[1]) then
      local e = pull(m.iterator, sess)
      local fed
      for i, t in ipairs(m.tensors) do
        local v = materialize(e[i])
        if type(v) == "table" and v._pool_key and not v._kept then
          fed = fed or {}
          fed[#fed + 1] = v
        end
        put(t, v)
      end
      m.iterator.states[sess].fed = fed
    end
  end
end

-- Graph g's _before_run hook (Session:run): feeds plus the next elements of
-- the get_next groups the run needs, after restarting the iterators whose
-- initializer it runs.
function M.before_run(g, sess, tensors, targets, feeds)
  local d = g._data
  local marks, seen = {}, {}
  collect(d, tensors, marks, seen)
  collect(d, targets, marks, seen)
  if #marks == 0 then return feeds end
  local out = {}
  if feeds then for k, v in pairs(feeds) do out[k] = v end end
  advance(marks, sess, feeds,
          function(t) return feeds ~= nil and (feeds[t] ~= nil or feeds[t.name] ~= nil) end,
          function(t, v) out[t] = v end)
  return out
end

-- Graph g's _wrap_callable hook (Session:make_callable): the callable, fed
-- the next elements of the get_next groups it needs on each call.
function M.wrap_callable(g, sess, fetches, feed_list, tensors, targets)
  local d = g._data
  local marks, seen = {}, {}
  collect(d, tensors, marks, seen)
  collect(d, targets, marks, seen)
  feed_list = feed_list or {}
  if #marks == 0 then return sess:make_callable(fetches, feed_list, true) end
  local user = #feed_list
  local list, slot = {}, {}
  local fed = {}
  for i, t in ipairs(feed_list) do
    list[i] = t
    if type(t) == "string" then t = g:get_tensor_by_name(t) end
    fed[t] = i
  end
  for _, m in ipairs(marks) do
    if m.kind == "next" and not fed[m.tensors[1]] then
      for _, t in ipairs(m.tensors) do list[#list + 1] = t; slot[t] = #list end
    end
  end
  local call = sess:make_callable(fetches, list, true)
  local total = #list
  return function(...)
    local args = {...}
    local feeds = nil
    for _, m in ipairs(marks) do
      if m.kind == "init" then
        feeds = {}
        for i = 1, user do feeds[list[i]] = args[i] end
        break
      end
    end
    advance(marks, sess, feeds, function(t) return fed[t] ~= nil end,
            function(t, v) args[slot[t]] = v end)
    return call(unpack(args, 1, total))
  end
end

return M
