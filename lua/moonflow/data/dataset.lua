-- data/dataset.lua — the Dataset class (tf.data.Dataset): a Lua object
-- describing a pipeline. Its fields: kind (TensorFlow's name for it), template
-- (the element structure, data/structure.lua), spec (per component {dtype=,
-- shape=}), open(ctx, ahead) returning next() (the next flat element, or nil
-- at the end). ctx belongs to one iterator in one session: ctx.session,
-- ctx.feeds (the feeds of the run that started the epoch), ctx.node[ds]
-- (state a dataset keeps across epochs: caches, shuffle counters; and
-- ctx.node[traced function]: prefetch's timings),
-- ctx.readers (weak: what to cancel on a re-initialization). `ahead` is how
-- many elements the consumer wants in flight (data/prefetch.lua).
-- Sources (data/sources.lua, data/csv.lua), transformations
-- (data/transforms.lua) and iterators (data/iterator.lua) add to the class.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local pack = require("moonflow.data.structure").pack
local shape_str = require("moonflow.data.component").shape_str

local fail = core.fail

local M = {}

-- tf.data.experimental.AUTOTUNE: prefetch(AUTOTUNE) picks the depth.
M.AUTOTUNE = -1

local Dataset = {}
Dataset.__index = function(ds, k)
  if k == "output_types" then return pack(ds.template, (function()
    local t = {}
    for i, c in ipairs(ds.spec) do t[i] = c.dtype end
    return t
  end)()) end
  if k == "output_shapes" then return pack(ds.template, (function()
    local t = {}
    for i, c in ipairs(ds.spec) do t[i] = G.TensorShape.new(c.shape) end
    return t
  end)()) end
  return Dataset[k]
end
M.Dataset = Dataset

function M.new(kind, template, spec, open)
  return setmetatable({kind = kind, template = template, spec = spec, open = open}, Dataset)
end

function Dataset:__tostring()
  local parts = {}
  for i, c in ipairs(self.spec) do parts[i] = c.dtype.name .. " " .. shape_str(c.shape) end
  return "<moonflow.Dataset " .. self.kind .. ": " .. table.concat(parts, ", ") .. ">"
end

-- Checks of a method's receiver and of a count argument; `what` names the method.
function M.check(ds, what)
  if getmetatable(ds) ~= Dataset then
    fail(what .. ": call it as a method (ds:" .. what:match("[%w_]+$") .. "(...))")
  end
end

function M.check_count(n, what, allow_negative)
  if type(n) ~= "number" or n % 1 ~= 0 or (n < 0 and not allow_negative) then
    fail(what .. ": expected a" .. (allow_negative and "n" or " non-negative") .. " integer count, got " ..
         tostring(n))
  end
end

return M
