-- mpi.lua — require "moonflow.mpi": data-parallel training across processes
-- and machines on MPI, the way Horovod does it for TensorFlow 1.x. Run the
-- script under mpirun; every rank builds the same graph, feeds its own share
-- of the batch, and the gradients are averaged across ranks before they are
-- applied, so every rank keeps the same weights.
--
-- The graph ops live in libmoonflow_mpi.so (src/mpi/), which links Open MPI
-- and adds its ops to the core's registry when mpi.init() runs; the core
-- library never depends on MPI. Policy lives here: gradient averaging with
-- small tensors fused into one buffer per step, broadcasting the variables,
-- and rank 0 alone writing checkpoints.
local ffi = require("ffi")
local tf = require("moonflow")
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

ffi.cdef(require("moonflow.mpi_cdef"))

local fail, options = core.fail, args.options

local M = {}

-- The library: MOONFLOW_MPI_LIB, else beside the core library.
M.library_path = os.getenv("MOONFLOW_MPI_LIB") or
  ((core.library_path:match("^(.*)[/\\]") or ".") .. "/libmoonflow_mpi.so")
local loaded, L = pcall(ffi.load, M.library_path)
if not loaded then
  error("moonflow.mpi: cannot load " .. M.library_path .. " (" .. tostring(L) .. "); it is built by make " ..
        "where Open MPI's mpicc is installed (Debian: libopenmpi-dev openmpi-bin)", 2)
end
M.C = L

local INIT_OPTIONS = {"timeout", "write_on_all_ranks", positional = 0, empty = true}

-- mpi.init({timeout=, write_on_all_ranks=}): joins the MPI job (once; later
-- calls only apply the options). timeout: seconds a collective waits for the
-- other ranks before failing (default MOONFLOW_MPI_TIMEOUT or 300; 0 waits
-- forever). Unless write_on_all_ranks, only rank 0's Saver:save writes files.
function M.init(...)
  local o = options("mpi.init", INIT_OPTIONS, ...)
  if o.timeout ~= nil and (type(o.timeout) ~= "number" or o.timeout ~= o.timeout) then
    fail("mpi.init: timeout must be a number of seconds, got " .. args.describe(o.timeout))
  end
  if L.mf_mpi_init(core.status) ~= 0 then core.check() end
  -- The ops went into the registry of the library libmoonflow_mpi.so is
  -- linked with: it must be the one this Lua state uses.
  if not core.C.mf_op_type_registered("MpiAllreduce") then
    fail("mpi.init: " .. M.library_path .. " registered its ops in another copy of libmoonflow than " ..
         core.library_path .. "; load both from one build")
  end
  if o.timeout ~= nil then L.mf_mpi_set_timeout(o.timeout) end
  core.writes_checkpoints = o.write_on_all_ranks == true or L.mf_mpi_rank() == 0
end

local function job(fname)
  if not L.mf_mpi_initialized() then fail(fname .. ": MPI is not initialized: call mpi.init() first") end
end

-- This process's rank, the job's size, and the rank and count among the
-- ranks on this machine.
function M.rank() job("mpi.rank"); return L.mf_mpi_rank() end
function M.size() job("mpi.size"); return L.mf_mpi_size() end
function M.local_rank() job("mpi.local_rank"); return L.mf_mpi_local_rank() end
function M.local_size() job("mpi.local_size"); return L.mf_mpi_local_size() end
function M.is_initialized() return L.mf_mpi_initialized() end

-- Waits until every rank has called it (with the deadline).
function M.barrier()
  job("mpi.barrier")
  if L.mf_mpi_barrier(core.status) ~= 0 then core.check() end
end

-- The last n (default and at most 64) collectives the communication thread
-- ran for overlapped allreduces, oldest first: {ticket=, bytes=, tensors=,
-- submitted=, started=, finished=}, times in seconds on mpi.clock()'s clock
-- (handed over by MpiAllreduceStart, begun by the thread, done on every rank).
function M.recent_collectives(n)
  if n ~= nil and (type(n) ~= "number" or n % 1 ~= 0 or n < 0) then
    fail("mpi.recent_collectives: n must be a count >= 0, got " .. args.describe(n))
  end
  n = math.min(n or 64, 64)
  local buf = ffi.new("mf_mpi_collective[?]", math.max(n, 1))
  local list = {}
  for i = 0, L.mf_mpi_recent_collectives(buf, n) - 1 do
    local c = buf[i]
    list[#list + 1] = {ticket = tonumber(c.ticket), bytes = tonumber(c.bytes), tensors = c.tensors,
                       submitted = c.submitted, started = c.started, finished = c.finished}
  end
  return list
end

-- Seconds on a monotonic clock, the one recent_collectives' times are on.
function M.clock() return L.mf_mpi_clock() end

-- Ends MPI in this process (also done at exit).
function M.shutdown() L.mf_mpi_shutdown() end

-- Graph ops ------------------------------------------------------------------------

local function tensor_arg(x)
  if not G.is_tensor(x) then x = G.convert(x) end
  return x
end

-- mpi.allreduce(x, average=true, name) or (x, {average=, name=}): x summed over
-- the ranks, divided by their number unless average is false (Horovod's
-- default). Float tensors average; int32 and int64 ones only sum.
function M.allreduce(x, ...)
  local o = options("mpi.allreduce", {"average", "name", empty = true}, ...)
  job("mpi.allreduce")
  return G.op{"MpiAllreduce", inputs = {tensor_arg(x)},
              attrs = {reduce_op = o.average == false and "sum" or "average"}, name = o.name}
end

-- mpi.allgather(x, name): the ranks' tensors concatenated along dim 0, in rank
-- order; their first dims may differ, the other dims and the dtype may not.
function M.allgather(x, ...)
  local o = options("mpi.allgather", {"name", empty = true}, ...)
  job("mpi.allgather")
  return G.op{"MpiAllgather", inputs = {tensor_arg(x)}, name = o.name}
end

-- mpi.broadcast(x, root, name): root's x on every rank.
function M.broadcast(x, root, ...)
  local o = options("mpi.broadcast", {"name", empty = true}, ...)
  job("mpi.broadcast")
  if type(root) ~= "number" or root % 1 ~= 0 then
    fail("mpi.broadcast: root must be a rank (an integer), got " .. args.describe(root))
  end
  return G.op{"MpiBroadcast", inputs = {tensor_arg(x)}, attrs = {root = G.attr.int(root)},
              name = o.name}
end

-- mpi.broadcast_global_variables(root): an op assigning every global variable
-- root's value, run once after initialization so all ranks start alike.
function M.broadcast_global_variables(root)
  job("mpi.broadcast_global_variables")
  if type(root) ~= "number" or root % 1 ~= 0 then
    fail("mpi.broadcast_global_variables: root must be a rank (an integer), got " .. args.describe(root))
  end
  local assigns = {}
  tf.name_scope("broadcast_global_variables", function()
    for i, v in ipairs(tf.global_variables()) do assigns[i] = tf.assign(v, M.broadcast(v, root)) end
  end)
  return tf.group(assigns, {name = "broadcast_global_variables"})
end

-- Gradient averaging ----------------------------------------------------------------
-- Gradients are averaged in buffers, each of one dtype: consecutive ones
-- whose sizes are known are fused into buffers of at most fusion_threshold
-- bytes (Horovod's HOROVOD_FUSION_THRESHOLD, 64 MiB). One allreduce per
-- buffer instead of one per variable saves the latency of each.
--
-- Overlapped (the default), as Horovod does it: the gradients are taken in
-- the order the backward pass computes them (their ops' creation order, which
-- is the schedule's, the same on every rank), so each buffer fills with
-- gradients computed one after the other. An MpiAllreduceStart per buffer
-- copies them into it and hands it to the communication thread; the plan runs
-- it right after the last of them is computed, and the backward pass goes on
-- meanwhile. MpiAllreduceWait, built after every gradient, waits for the
-- buffer just before the update. Not overlapped: the buffers in the
-- gradients' order, each flattened, concatenated, allreduced by MpiAllreduce
-- after the whole backward pass and split back.
M.FUSION_THRESHOLD = 64 * 1024 * 1024

local function static_bytes(t)
  local shape = t:get_shape()
  if not shape:is_fully_defined() then return nil end
  return shape:num_elements() * t.dtype.size, shape:as_list()
end

-- The positions in grads of each buffer, in the order the buffers close.
local function buffers_of(grads, order, threshold)
  local closed, open = {}, {}   -- open: dtype -> buffer {bytes =, k1, k2, ...}
  local function close(buf)
    if buf and #buf > 0 then closed[#closed + 1] = buf end
  end
  for _, k in ipairs(order) do
    local g = grads[k]
    local bytes = static_bytes(g)
    if not bytes or bytes >= threshold then
      -- Alone in its buffer, after the open one of its dtype: buffers close in the gradients' order.
      close(open[g.dtype])
      open[g.dtype] = nil
      close({k})
    else
      local buf = open[g.dtype]
      if buf and buf.bytes + bytes > threshold then close(buf); buf = nil end
      if not buf then
        buf = {bytes = 0}
        open[g.dtype] = buf
      end
      buf[#buf + 1] = k
      buf.bytes = buf.bytes + bytes
    end
  end
  -- Each dtype's last buffer, in the order of their first gradients.
  local last = {}
  for _, buf in pairs(open) do last[#last + 1] = buf end
  table.sort(last, function(a, b) return a[1] < b[1] end)
  for _, buf in ipairs(last) do close(buf) end
  return closed
end

-- Averages the buffer's gradients with MpiAllreduce into out.
local function average_now(grads, buf, out)
  if #buf == 1 then
    out[buf[1]] = M.allreduce(grads[buf[1]])
    return
  end
  local flat, sizes = {}, {}
  for i, k in ipairs(buf) do
    flat[i] = tf.reshape(grads[k], {-1})
    sizes[i] = grads[k]:get_shape():num_elements()
  end
  local parts = tf.split(M.allreduce(tf.concat(flat, 0), {name = "fused_allreduce"}), sizes, 0)
  for i, k in ipairs(buf) do out[k] = tf.reshape(parts[i], grads[k]:get_shape():as_list()) end
end

-- The averages of grads (a list, nil entries kept), in buffers of at most
-- threshold bytes, overlapped with the backward pass unless overlap is false.
function M.average_gradients(grads, threshold, overlap)
  job("mpi.average_gradients")
  if threshold ~= nil and (type(threshold) ~= "number" or threshold < 0) then
    fail("mpi.average_gradients: threshold must be a number of bytes >= 0, got " .. args.describe(threshold))
  end
  if overlap ~= nil and type(overlap) ~= "boolean" then
    fail("mpi.average_gradients: overlap must be true or false, got " .. args.describe(overlap))
  end
  threshold = threshold or M.FUSION_THRESHOLD
  local order = {}
  for k = 1, table.maxn(grads) do
    if grads[k] ~= nil then order[#order + 1] = k end
  end
  if overlap ~= false then
    table.sort(order, function(a, b)
      local x, y = grads[a], grads[b]
      if x._id ~= y._id then return x._id < y._id end
      if x.value_index ~= y.value_index then return x.value_index < y.value_index end
      return a < b
    end)
  end
  local out = {}
  tf.name_scope("average_gradients", function()
    local buffers = buffers_of(grads, order, threshold)
    if overlap == false then
      for _, buf in ipairs(buffers) do average_now(grads, buf, out) end
      return
    end
    local tickets = {}
    for i, buf in ipairs(buffers) do
      local inputs = {}
      for j, k in ipairs(buf) do inputs[j] = grads[k] end
      tickets[i] = G.op{"MpiAllreduceStart", inputs = inputs, attrs = {reduce_op = "average"},
                        name = "allreduce_start"}
    end
    for i, buf in ipairs(buffers) do
      local averaged = {G.op{"MpiAllreduceWait", inputs = {tickets[i]}, name = "allreduce_wait"}}
      for j, k in ipairs(buf) do out[k] = averaged[j] end
    end
  end)
  return out
end

-- mpi.DistributedOptimizer(opt, {fusion_threshold=, overlap=}): opt whose
-- gradients are averaged across the ranks before they are applied, overlapped
-- with the backward pass unless overlap is false; every other method is opt's.
local Distributed = {}
Distributed.__index = function(self, k)
  local own = rawget(Distributed, k)
  if own ~= nil then return own end
  local v = self._opt[k]
  if type(v) ~= "function" then return v end
  return function(me, ...) if me == self then return v(self._opt, ...) end return v(me, ...) end
end

function Distributed:__tostring() return "<mpi.DistributedOptimizer of " .. tostring(self._opt) .. ">" end

function Distributed:compute_gradients(loss, ...)
  local pairs_in = self._opt:compute_gradients(loss, ...)
  if L.mf_mpi_size() == 1 then return pairs_in end
  local grads = {}
  for i, gv in ipairs(pairs_in) do grads[i] = gv[1] end
  local averaged = M.average_gradients(grads, self._threshold, self._overlap)
  local out = {}
  for i, gv in ipairs(pairs_in) do out[i] = {averaged[i], gv[2]} end
  return out
end

function Distributed:apply_gradients(grads_and_vars, ...) return self._opt:apply_gradients(grads_and_vars, ...) end

-- The optimizer's own minimize, which calls self:compute_gradients (the
-- averaging one above) and self:apply_gradients.
function Distributed:minimize(loss, ...) return self._opt.minimize(self, loss, ...) end

function M.DistributedOptimizer(opt, ...)
  local o = options("mpi.DistributedOptimizer", {"fusion_threshold", "overlap", positional = 0, empty = true}, ...)
  job("mpi.DistributedOptimizer")
  if type(opt) ~= "table" or type(opt.compute_gradients) ~= "function" then
    fail("mpi.DistributedOptimizer: expected an optimizer (tf.train.*Optimizer), got " .. args.describe(opt))
  end
  local t = o.fusion_threshold
  if t ~= nil and (type(t) ~= "number" or t < 0) then
    fail("mpi.DistributedOptimizer: fusion_threshold must be a number of bytes >= 0, got " .. args.describe(t))
  end
  if o.overlap ~= nil and type(o.overlap) ~= "boolean" then
    fail("mpi.DistributedOptimizer: overlap must be true or false, got " .. args.describe(o.overlap))
  end
  return setmetatable({_opt = opt, _threshold = t, _overlap = o.overlap}, Distributed)
end

return M
