-- conformance_spec.lua — one conformance table per op family (math, nn,
-- segment, linalg, image, sparse, complex, signal): each case calls a function on the edge
-- cases TensorFlow's kernel tests use (empty tensors, size-1 and rank-0
-- inputs, negative axes, NaN and inf, integer division and modulo signs,
-- dtypes that must not mix) and must give TensorFlow's result — dtype,
-- shape and values — or, where TensorFlow refuses the input, an error (when
-- the graph is built or when it runs). The cases and TensorFlow's results
-- are spec/fixtures/conformance_values.py's output, committed as
-- spec/fixtures/conformance_values.lua.
local tf = require("moonflow")
local core = require("moonflow.core")
local H = require("spec.helpers")
local CASES = require("spec.fixtures.conformance_values")

-- Float results within a few ulps of TensorFlow's (ops may sum in another order).
local TOL = {float32 = 4e-6, float64 = 1e-13}

local function is_tensor_spec(v) return type(v) == "table" and type(v[1]) == "string" and core.dtypes[v[1]] end

-- A tensor from {dtype, shape, flat values} (complex values as {re, im} pairs).
local function tensor(spec)
  local dtype, shape, flat = tf[spec[1]], spec[2], spec[3]
  if dtype.is_complex then flat = H.complex(flat) end
  if #shape == 0 then return tf.constant(flat[1], dtype) end
  if #flat == 0 then return tf.zeros(shape, dtype) end
  return tf.reshape(tf.constant(flat, dtype), shape)
end

local function argument(a)
  if is_tensor_spec(a) then return tensor(a) end
  local kind = a[1]
  if kind == "raw" then
    return type(a[2]) == "string" and core.dtypes[a[2]] or a[2]
  elseif kind == "list" then
    local out = {}
    for i = 2, #a do out[i - 1] = tensor(a[i]) end
    return out
  elseif kind == "sparse" then
    return tf.SparseTensor(tensor(a[2]), tensor(a[3]), tensor(a[4]))
  end
  error("unknown argument kind " .. tostring(kind))
end

local function resolve(path)
  local f = tf
  for part in path:gmatch("[^.]+") do f = f[part] end
  return f
end

-- A readable name for a case: the call with its arguments' dtypes and shapes.
local function describe_arg(a)
  if is_tensor_spec(a) then return a[1] .. "[" .. table.concat(a[2], ",") .. "]" end
  if a[1] == "raw" then return type(a[2]) == "table" and "{" .. table.concat(a[2], ",") .. "}" or tostring(a[2]) end
  if a[1] == "sparse" then return "sparse " .. a[3][1] .. "[" .. table.concat(a[4][3], ",") .. "]" end
  local parts = {}
  for i = 2, #a do parts[#parts + 1] = describe_arg(a[i]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function describe_case(c, i)
  local parts = {}
  for _, a in ipairs(c.args) do parts[#parts + 1] = describe_arg(a) end
  local opts = {}
  for k, v in pairs(c.opts) do opts[#opts + 1] = k .. "=" .. (is_tensor_spec(v) and describe_arg(v) or tostring(v)) end
  table.sort(opts)
  if #opts > 0 then parts[#parts + 1] = "{" .. table.concat(opts, ", ") .. "}" end
  return string.format("#%d tf.%s(%s)%s", i, c.fn, table.concat(parts, ", "), c.err and " fails" or "")
end

-- Builds the case's graph and runs it: ok and the outputs, or false and the error.
local function run_case(c)
  return pcall(function()
    tf.reset_default_graph()
    local args = {}
    for i, a in ipairs(c.args) do args[i] = argument(a) end
    if next(c.opts) then
      local opts = {}
      for k, v in pairs(c.opts) do opts[k] = is_tensor_spec(v) and tensor(v) or core.dtypes[v] or v end
      args[#args + 1] = opts
    end
    local outs = {resolve(c.fn)(unpack(args, 1, #c.args + (next(c.opts) and 1 or 0)))}
    if tf.is_sparse(outs[1]) then outs = {tf.sparse.to_dense(outs[1])} end
    local sess = tf.Session()
    local values = sess:run(outs)
    sess:close()
    return {outs = outs, values = values}
  end)
end

local function check_result(c, r)
  assert.equal(#c.want, #r.outs, "number of results")
  for k, want in ipairs(c.want) do
    local dtype, shape, flat = want[1], want[2], want[3]
    local out, v = r.outs[k], r.values[k]
    assert.equal(dtype, out.dtype.name, "dtype of result " .. k)
    local got_shape = type(v) == "table" and v:shape() or {}
    assert.same(shape, got_shape, "shape of result " .. k)
    local got = type(v) == "table" and H.flat(v) or {v}
    if core.dtypes[dtype].is_complex then flat, got = H.flat(flat), H.flat(H.pairs(v)) end
    local real = core.dtypes[dtype].real_dtype
    H.assert_values(flat, got, TOL[real and real.name or dtype] or 0)
  end
end

local families = {}
for i, c in ipairs(CASES) do
  families[c.family] = families[c.family] or {}
  table.insert(families[c.family], {c, i})
end

for _, family in ipairs({"math", "nn", "segment", "linalg", "image", "sparse", "complex", "signal"}) do
  describe("conformance: " .. family, function()
    setup(H.growth_off)
    teardown(H.growth_restore)
    for _, entry in ipairs(families[family]) do
      local c, i = entry[1], entry[2]
      it(describe_case(c, i), function()
        local ok, r = run_case(c)
        if c.err then
          assert.is_false(ok, "TensorFlow refuses this input, moonflow accepted it")
        else
          assert(ok, tostring(r))
          check_result(c, r)
        end
      end)
    end
  end)
end
