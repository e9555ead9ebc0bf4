-- data/init.lua — tf.data: Dataset input pipelines and their iterators.
--
-- Design. A Dataset is a Lua object describing a pipeline (sources and
-- transformations); an iterator runs it once per session. The elements a
-- pipeline produces are host values (tf.Array, or Lua numbers and booleans
-- for scalars), and they reach the graph as feeds:
--   * `it:get_next()` builds one Placeholder per element component (named
--     IteratorGetNext…) and registers them, with the iterator, on the graph;
--   * Session:run (and make_callable) call the graph's `_before_run` /
--     `_wrap_callable` hook (two lines in session.lua) with the run's fetches
--     and targets. The hook looks up, memoized per op, which get_next groups
--     and iterator initializers the fetched ops depend on (through data and
--     control inputs, so `train_op` reaches the get_next behind its loss),
--     restarts the iterators whose initializer runs, pulls one element per
--     get_next group the run needs, and adds the element to the run's feeds.
-- So a run that needs get_next advances the iterator once, a run that does
-- not leaves it alone, nothing is looked at per run beyond one table lookup
-- per fetch, and no data ever becomes a graph constant: a 100 MB array goes to
-- the kernels zero-copy as a fed tf.Array, not into a Const op.
--
-- Why not a C iterator op with per-session state: the elements come from Lua
-- (generators, CSV rows, traced map/filter functions), so a C kernel would have
-- to call back into Lua mid-run, which LuaJIT forbids from JIT-compiled
-- callers ("bad callback") and which could not raise errors across the C
-- executor. Feeding keeps the executor untouched and plans cached (the fed
-- ports are the same every step).
--
-- The work per element stays in C where it is bulk: slicing rows and stacking
-- batches are memcpy (ffi.copy) into one allocation per component, and map and
-- filter functions are traced once into a private graph and run through a
-- prepared callable (one C call per element). Iterator state is per (iterator,
-- session): two sessions iterate independently, like variables.
--
--
-- The files, one concern each (a file requires only those above it):
--   recycler.lua   buffers of the arrays made per element or batch, reused
--   structure.lua  element structures: templates, flatten and pack
--   component.lua  one component's value: Row views, shapes, conversion
--   dataset.lua    the Dataset class
--   block.lua      blocks of rows: stacking, slicing, exact batch sizes
--   sources.lua    from_tensor_slices, range, from_generator
--   csv.lua        CsvDataset: the CSV parser
--   tfrecord.lua   TFRecordDataset (the reader is moonflow/tfrecord.lua)
--   trace.lua      map and filter functions traced into a private graph
--   prefetch.lua   their runs, read ahead on a worker thread
--   rowwise.lua    map-and-batch fusion: elementwise functions run per block
--   transforms.lua map, filter, batch, shuffle, repeat_, take, skip, cache, prefetch
--   iterator.lua   iterators, get_next and the session hooks that feed it
local dataset = require("moonflow.data.dataset")
require("moonflow.data.sources")
local csv = require("moonflow.data.csv")
local tfrecord = require("moonflow.data.tfrecord")
require("moonflow.data.transforms")
local iterator = require("moonflow.data.iterator")
local prefetch = require("moonflow.data.prefetch")
local rowwise = require("moonflow.data.rowwise")

return function(tf)
  local data = tf.data or {}
  tf.data = data
  data.experimental = data.experimental or {}
  data.experimental.AUTOTUNE = dataset.AUTOTUNE
  data.Dataset = dataset.Dataset
  data.Iterator = iterator.Iterator
  data.experimental.CsvDataset = csv.CsvDataset
  data.TFRecordDataset = tfrecord.TFRecordDataset
  data._before_run, data._wrap_callable = iterator.before_run, iterator.wrap_callable
  -- For tests: tf.data._async_runs, the jobs prefetch has submitted to worker
  -- threads; tf.data._fused_blocks, the blocks a fused map-and-batch ran.
  setmetatable(data, {__index = function(_, k)
    if k == "_async_runs" then return prefetch.async_runs end
    if k == "_fused_blocks" then return rowwise.fused_blocks end
  end})
end
