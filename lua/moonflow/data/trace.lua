-- data/trace.lua — the functions of map and filter, traced. fn is called once
-- with placeholders standing for an element, in a private graph (it inherits
-- the default graph's random seed); the ops it builds run per element through
-- a prepared callable of a private session, or ahead on that session's worker
-- thread (data/prefetch.lua).
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local Session = require("moonflow.session")
local structure = require("moonflow.data.structure")
local component = require("moonflow.data.component")
local C = core.C
local fail = core.fail

local flatten, ordered_keys, call_structured = structure.flatten, structure.ordered_keys, structure.call_structured
local materialize, static_shape = component.materialize, component.static_shape

local M = {}

-- Traces fn over the elements of ds. Returns what prepare returns, and
-- template and spec (of its results), graph, args (its placeholders) and
-- outs (its result tensors). `what` ("Dataset:map") opens the messages.
function M.trace(ds, fn, what)
  if type(fn) ~= "function" then fail(what .. ": expected a function") end
  local outer = G.get_default_graph()
  local g = G.Graph.new()
  C.mf_graph_set_seed(g.ptr, C.mf_graph_seed(outer.ptr))
  local args, outs, template = {}, {}, nil
  local ok, err = pcall(g.as_default, g, function()
    for i, c in ipairs(ds.spec) do args[i] = G.placeholder(c.dtype, c.shape, "arg" .. (i - 1)) end
    local results = {call_structured(fn, ds.template, args)}
    local n = table.maxn(results)
    if n == 0 or (n == 1 and results[1] == nil) then
      fail(what .. ": the function returned nothing; return a tensor or a table of tensors")
    end
    local value = n == 1 and results[1] or results
    local flat = {}
    if G.is_tensor(value) or type(value) ~= "table" or Array.is(value) then
      template = flatten(value, flat)
    else
      template = {}
      for _, k in ipairs(ordered_keys(value)) do template[k] = flatten(value[k], flat) end
    end
    for i, v in ipairs(flat) do
      if not G.is_tensor(v) then v = G.convert(v) end
      if v.graph ~= g then
        fail(what .. ": the function returned tensor " .. v.name .. " of another graph; a dataset " ..
             "function runs in its own graph: pass data through the dataset, or build constants inside")
      end
      outs[i] = v
    end
  end)
  if not ok then
    err = tostring(err)
    if err:find("same graph", 1, true) then
      -- The advice goes before the line the message names, if it names one.
      local head, at = err:match("^(.-)( %(at [^()]*%))$")
      err = (head or err) .. "; a dataset function runs in its own graph: pass data through the dataset, " ..
            "or build the constants it needs inside the function" .. (at or "")
    end
    if err:sub(1, #what) ~= what then err = what .. ": " .. err end
    fail(err)
  end
  local traced = M.prepare(g, args, outs)
  traced.template = template
  traced.spec = {}
  for i, t in ipairs(outs) do traced.spec[i] = {dtype = t.dtype, shape = static_shape(t)} end
  traced.graph, traced.args, traced.outs = g, args, outs
  return traced
end

-- The runs of outs (tensors of private graph g) fed args: {call = a prepared
-- callable of a private session, session =, async = for read-ahead
-- (data/prefetch.lua) the C callable itself ({callable=, session=, args=,
-- nout=}), the plan make_callable made (same signature), unless the graph
-- calls back into Lua}.
function M.prepare(g, args, outs)
  local sess = Session.new(g)
  local call = sess:make_callable(outs, args)
  local async = nil
  if not g._host_ops then
    local feed_ports, fetch_ports = core.ports(math.max(#args, 1)), core.ports(math.max(#outs, 1))
    for i, t in ipairs(args) do feed_ports[i - 1].op, feed_ports[i - 1].index = t.op.ptr, t.value_index end
    for i, t in ipairs(outs) do fetch_ports[i - 1].op, fetch_ports[i - 1].index = t.op.ptr, t.value_index end
    local c = C.mf_session_make_callable(sess.ptr, feed_ports, #args, fetch_ports, #outs, nil, 0, core.status)
    if c == nil then core.check() end
    async = {callable = c, session = sess, args = args, nout = #outs}
  end
  return {call = call, session = sess, async = async}
end


-- Runs the callable of trace over a flat element of n components; raises
-- "what: <the run's error>".
function M.run(call, elem, n, what)
  local args = {}
  for i = 1, n do args[i] = materialize(elem[i]) end
  local ok, res = pcall(call, unpack(args, 1, n))
  if not ok then fail(what .. ": " .. tostring(res)) end
  return res
end

return M
