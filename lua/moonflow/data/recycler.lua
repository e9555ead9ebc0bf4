-- data/recycler.lua — the buffers of the arrays a pipeline makes per element
-- or batch (batch's stacked components, materialized rows), reused.
--
-- Why it exists next to the engine's buffer pool: the C pool (src/exec/pool.c)
-- recycles the buffers of a plan's own values, inside runs. These arrays are
-- made in Lua, between runs, and fed; the C pool never sees them. They own C
-- memory the Lua collector cannot see, so a pipeline would leave dead batches
-- piling up, and each new one would fault in fresh pages (a 100 KB batch cost
-- 80 us that way). So, as session.lua does for fetched results, count the
-- bytes and finish a collection once they pass both 4 MB and twice the Lua
-- heap; and when the collector finds such an array dead and nobody else holds
-- its value (refcount 1: no session, fetch or variable kept it), its buffer
-- goes to a pool (per dtype and shape) that the next array of that shape
-- reuses. Every user of new_array overwrites all its bytes. (Measured when
-- it moved here: without it, a pipeline of 1 MB float32 batches took 1.6x as
-- long per step, with 60% more peak memory.)
local ffi = require("ffi")
local core = require("moonflow.core")
local Array = require("moonflow.array")
local C = core.C

local M = {}

local unseen_bytes = 0
local pool = {}            -- "dtype:d1,d2" -> list of mf_tensor* (plain, no finalizer)
local POOL_MAX = 64
local tensor_ptr = ffi.typeof("mf_tensor*")
local function pool_key(dtype, dims) return dtype.name .. ":" .. table.concat(dims, ",") end
M.key = pool_key

-- When the Lua state closes, every finalizer runs once, in no set order, and
-- finalizers set meanwhile never run. So the pool's buffers are released by
-- one finalizer of the module's own (`closing`), and arrays finalized after
-- it release their buffers instead of pooling them.
local closed = false
M._closing = ffi.gc(ffi.new("char[1]"), function()
  closed = true
  for _, list in pairs(pool) do
    for i = #list, 1, -1 do C.mf_tensor_release(list[i]); list[i] = nil end
  end
end)

local function recycler(key)
  return function(p)
    local list = pool[key]
    if not closed and C.mf_tensor_refcount(p) == 1 and (not list or #list < POOL_MAX) then
      if not list then list = {}; pool[key] = list end
      list[#list + 1] = ffi.cast(tensor_ptr, p)
    else
      C.mf_tensor_release(p)
    end
  end
end
local recyclers = {}

-- A new Array of dtype and dims (size elements), its buffer from the pool
-- when one of that shape is free; its contents are undefined. `key` is
-- M.key(dtype, dims), for callers that keep it.
function M.new_array(dtype, dims, size, key)
  key = key or pool_key(dtype, dims)
  local list = pool[key]
  local a
  if list and #list > 0 then
    local p = list[#list]
    list[#list] = nil
    a = Array.wrap(p)
  else
    unseen_bytes = unseen_bytes + size * dtype.size
    if unseen_bytes >= 4 * 2 ^ 20 and unseen_bytes >= 2048 * collectgarbage("count") then
      unseen_bytes = 0
      collectgarbage()
    end
    a = Array.new(dtype, dims)
  end
  local r = recyclers[key]
  if not r then r = recycler(key); recyclers[key] = r end
  ffi.gc(a.ptr, r)
  a._pool_key = key
  return a
end

-- Without waiting for the collector: an array of new_array that an iterator
-- fed to a run is dead once the run is over, unless a cache keeps it
-- (_kept) or someone else holds its value (refcount > 1: a fetch of
-- get_next, a variable assigned from it). The iterator hands those back at
-- its next step; the Lua object is emptied so that no stale use goes unseen.
function M.give_back(a)
  if a._kept or a.ptr == nil or C.mf_tensor_refcount(a.ptr) ~= 1 then return end
  local list = pool[a._pool_key]
  if not list then list = {}; pool[a._pool_key] = list end
  if #list >= POOL_MAX then return end
  local p = a.ptr
  ffi.gc(p, nil)
  list[#list + 1] = ffi.cast(tensor_ptr, p)
  a.ptr, a._data = nil, nil
end

return M
