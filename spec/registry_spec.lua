-- The op registry: listed from C and Lua, and every registration complete.
local tf = require("moonflow")
local core = require("moonflow.core")
local H = require("spec.helpers")

-- The public Lua functions that build each op that is not internal, as the
-- API docs name them: "tf.nn.relu" indexes from tf; "tf.TensorArray:write" is
-- the method write of the objects tf.TensorArray makes.
local CATALOG = {
  Abs = {"tf.abs"},
  Acos = {"tf.acos"},
  Acosh = {"tf.acosh"},
  Add = {"tf.add"},
  AddN = {"tf.add_n"},
  All = {"tf.reduce_all"},
  Angle = {"tf.math.angle"},
  Any = {"tf.reduce_any"},
  ApplyAdagrad = {"tf.train.AdagradOptimizer"},
  ApplyAdam = {"tf.train.AdamOptimizer"},
  ApplyCenteredRMSProp = {"tf.train.RMSPropOptimizer"},
  ApplyGradientDescent = {"tf.train.GradientDescentOptimizer"},
  ApplyMomentum = {"tf.train.MomentumOptimizer"},
  ApplyRMSProp = {"tf.train.RMSPropOptimizer"},
  ArgMax = {"tf.argmax"},
  ArgMin = {"tf.argmin"},
  AsString = {"tf.strings.as_string", "tf.as_string"},
  Asin = {"tf.asin"},
  Asinh = {"tf.asinh"},
  Assert = {"tf.Assert"},
  Assign = {"tf.assign", "tf.Variable:assign"},
  AssignAdd = {"tf.assign_add", "tf.Variable:assign_add"},
  AssignSub = {"tf.assign_sub", "tf.Variable:assign_sub"},
  Atan = {"tf.atan"},
  Atan2 = {"tf.atan2"},
  Atanh = {"tf.atanh"},
  AvgPool = {"tf.nn.avg_pool"},
  BiasAdd = {"tf.nn.bias_add"},
  BooleanMask = {"tf.boolean_mask"},
  BroadcastTo = {"tf.broadcast_to"},
  Cast = {"tf.cast"},
  Ceil = {"tf.ceil"},
  CheckNumerics = {"tf.debugging.check_numerics"},
  Cholesky = {"tf.cholesky", "tf.linalg.cholesky", "tf.linalg.logdet"},
  Complex = {"tf.complex"},
  ComplexAbs = {"tf.abs"},
  Concat = {"tf.concat"},
  Conj = {"tf.math.conj"},
  Const = {"tf.constant"},
  Conv2D = {"tf.nn.conv2d"},
  DepthwiseConv2dNative = {"tf.nn.depthwise_conv2d", "tf.nn.depthwise_conv2d_native", "tf.nn.separable_conv2d"},
  DepthwiseConv2dNativeBackpropFilter = {"tf.nn.depthwise_conv2d_native_backprop_filter",
                                         "tf.nn.depthwise_conv2d_backprop_filter"},
  DepthwiseConv2dNativeBackpropInput = {"tf.nn.depthwise_conv2d_native_backprop_input",
                                        "tf.nn.depthwise_conv2d_backprop_input"},
  Conv2DBackpropFilter = {"tf.nn.conv2d_backprop_filter"},
  Conv2DBackpropInput = {"tf.nn.conv2d_backprop_input", "tf.nn.conv2d_transpose"},
  Cos = {"tf.cos"},
  Cosh = {"tf.cosh"},
  Cumprod = {"tf.cumprod"},
  Cumsum = {"tf.cumsum"},
  DecodeCSV = {"tf.io.decode_csv", "tf.decode_csv"},
  DecodeImage = {"tf.image.decode_image", "tf.io.decode_image"},
  DecodeJpeg = {"tf.image.decode_jpeg", "tf.io.decode_jpeg"},
  DecodePng = {"tf.image.decode_png", "tf.io.decode_png"},
  DecodeRaw = {"tf.io.decode_raw", "tf.decode_raw"},
  Div = {"tf.divide"},
  Elu = {"tf.nn.elu"},
  EncodeJpeg = {"tf.image.encode_jpeg", "tf.io.encode_jpeg"},
  EncodePng = {"tf.image.encode_png", "tf.io.encode_png"},
  Equal = {"tf.equal"},
  Erf = {"tf.erf"},
  Erfc = {"tf.erfc"},
  Exp = {"tf.exp"},
  ExpandDims = {"tf.expand_dims"},
  Expm1 = {"tf.expm1"},
  FFT = {"tf.signal.fft", "tf.fft"},
  FFT2D = {"tf.signal.fft2d", "tf.fft2d"},
  Fill = {"tf.fill"},
  Floor = {"tf.floor"},
  FloorDiv = {"tf.floordiv"},
  Gather = {"tf.gather"},
  GatherNd = {"tf.gather_nd"},
  Greater = {"tf.greater"},
  GreaterEqual = {"tf.greater_equal"},
  HistogramSummary = {"tf.summary.histogram"},
  IFFT = {"tf.signal.ifft", "tf.ifft"},
  ImageSummary = {"tf.summary.image"},
  IFFT2D = {"tf.signal.ifft2d", "tf.ifft2d"},
  IRFFT = {"tf.signal.irfft"},
  Identity = {"tf.identity"},
  If = {"tf.cond", "tf.case"},
  Imag = {"tf.math.imag"},
  InTopK = {"tf.nn.in_top_k"},
  IsVariableInitialized = {"tf.is_variable_initialized"},
  LeakyRelu = {"tf.nn.leaky_relu"},
  Less = {"tf.less"},
  LessEqual = {"tf.less_equal"},
  Log = {"tf.log"},
  Log1p = {"tf.log1p"},
  LogMatrixDeterminant = {"tf.log_matrix_determinant", "tf.linalg.slogdet"},
  LogicalAnd = {"tf.logical_and"},
  LogicalNot = {"tf.logical_not"},
  LogicalOr = {"tf.logical_or"},
  LogicalXor = {"tf.logical_xor"},
  Lu = {"tf.linalg.lu"},
  LuaFunc = {"tf.lua_func"},
  LuaFuncStateless = {"tf.lua_func"},
  MatMul = {"tf.matmul"},
  MatrixBandPart = {"tf.matrix_band_part", "tf.linalg.band_part"},
  MatrixDeterminant = {"tf.matrix_determinant", "tf.linalg.det"},
  MatrixDiag = {"tf.matrix_diag", "tf.linalg.diag", "tf.diag"},
  MatrixDiagPart = {"tf.matrix_diag_part", "tf.linalg.diag_part", "tf.trace", "tf.diag_part", "tf.einsum"},
  MatrixInverse = {"tf.matrix_inverse", "tf.linalg.inv"},
  MatrixSetDiag = {"tf.matrix_set_diag", "tf.linalg.set_diag"},
  MatrixSolve = {"tf.matrix_solve", "tf.linalg.solve"},
  MatrixTriangularSolve = {"tf.matrix_triangular_solve", "tf.linalg.triangular_solve", "tf.linalg.cholesky_solve"},
  Max = {"tf.reduce_max"},
  LRN = {"tf.nn.lrn", "tf.nn.local_response_normalization"},
  MaxPool = {"tf.nn.max_pool"},
  Maximum = {"tf.maximum"},
  Mean = {"tf.reduce_mean"},
  Min = {"tf.reduce_min"},
  Minimum = {"tf.minimum"},
  Mod = {"tf.mod"},
  MergeSummary = {"tf.summary.merge", "tf.summary.merge_all"},
  Mul = {"tf.multiply"},
  Multinomial = {"tf.multinomial", "tf.random.categorical"},
  Neg = {"tf.negative"},
  NoOp = {"tf.no_op", "tf.group"},
  NotEqual = {"tf.not_equal"},
  OneHot = {"tf.one_hot"},
  OnesLike = {"tf.ones_like"},
  Pack = {"tf.stack"},
  Pad = {"tf.pad"},
  ParseExample = {"tf.io.parse_single_example", "tf.io.parse_example"},
  ParseSequenceExample = {"tf.io.parse_single_sequence_example", "tf.io.parse_sequence_example"},
  Placeholder = {"tf.placeholder"},
  Pow = {"tf.pow"},
  Print = {"tf.Print"},
  Prod = {"tf.reduce_prod"},
  Qr = {"tf.qr", "tf.linalg.qr"},
  RFFT = {"tf.signal.rfft"},
  RandomNormal = {"tf.random_normal"},
  RandomShuffle = {"tf.random_shuffle"},
  RandomUniform = {"tf.random_uniform"},
  RandomUniformInt = {"tf.random_uniform"},
  Range = {"tf.range"},
  Rank = {"tf.rank"},
  ReadVariable = {"tf.Variable:read_value"},
  Real = {"tf.math.real"},
  Reciprocal = {"tf.reciprocal"},
  ReduceJoin = {"tf.strings.reduce_join", "tf.reduce_join"},
  RegexFullMatch = {"tf.strings.regex_full_match"},
  RegexReplace = {"tf.strings.regex_replace", "tf.regex_replace"},
  Relu = {"tf.nn.relu"},
  Relu6 = {"tf.nn.relu6"},
  Reshape = {"tf.reshape"},
  ResizeBilinear = {"tf.image.resize_bilinear", "tf.image.resize_images"},
  ResizeNearestNeighbor = {"tf.image.resize_nearest_neighbor", "tf.image.resize_images"},
  ReverseV2 = {"tf.reverse"},
  Round = {"tf.round"},
  Rsqrt = {"tf.rsqrt"},
  ScalarSummary = {"tf.summary.scalar"},
  ScatterNd = {"tf.scatter_nd"},
  SegmentMax = {"tf.segment_max"},
  SegmentMin = {"tf.segment_min"},
  SegmentProd = {"tf.segment_prod"},
  SegmentSum = {"tf.segment_sum"},
  Select = {"tf.where"},
  SelectV2 = {"tf.where_v2"},
  SelfAdjointEigV2 = {"tf.self_adjoint_eig", "tf.linalg.eigh", "tf.self_adjoint_eigvals", "tf.linalg.eigvalsh"},
  Selu = {"tf.nn.selu"},
  SequenceMask = {"tf.sequence_mask"},
  Shape = {"tf.shape"},
  Sigmoid = {"tf.sigmoid"},
  Sign = {"tf.sign"},
  Sin = {"tf.sin"},
  Sinh = {"tf.sinh"},
  Size = {"tf.size"},
  Slice = {"tf.slice"},
  Softmax = {"tf.nn.softmax"},
  SoftmaxCrossEntropyWithLogits = {"tf.nn.softmax_cross_entropy_with_logits"},
  Softplus = {"tf.nn.softplus"},
  Softsign = {"tf.nn.softsign"},
  SparseSoftmaxCrossEntropyWithLogits = {"tf.nn.sparse_softmax_cross_entropy_with_logits"},
  SparseAdd = {"tf.sparse.add", "tf.sparse_add"},
  SparseReorder = {"tf.sparse.reorder", "tf.sparse_reorder", "tf.sparse.transpose", "tf.sparse_transpose"},
  SparseTensorDenseAdd = {"tf.sparse.add", "tf.sparse_add", "tf.sparse.reduce_sum", "tf.sparse_reduce_sum"},
  SparseTensorDenseMatMul = {"tf.sparse.sparse_dense_matmul", "tf.sparse_tensor_dense_matmul", "tf.sparse.matmul"},
  SparseToDense = {"tf.sparse.to_dense", "tf.sparse_tensor_to_dense", "tf.sparse_to_dense"},
  SplitV = {"tf.split"},
  Sqrt = {"tf.sqrt"},
  Square = {"tf.square"},
  SquaredDifference = {"tf.squared_difference"},
  Squeeze = {"tf.squeeze"},
  StopGradient = {"tf.stop_gradient"},
  StridedSlice = {"tf.strided_slice"},
  StringJoin = {"tf.strings.join", "tf.string_join"},
  StringLength = {"tf.strings.length"},
  StringLower = {"tf.strings.lower"},
  StringSplit = {"tf.string_split"},
  StringSplitV2 = {"tf.strings.split"},
  StringStrip = {"tf.strings.strip"},
  StringToHashBucketFast = {"tf.strings.to_hash_bucket_fast", "tf.string_to_hash_bucket_fast"},
  StringToHashBucketStrong = {"tf.strings.to_hash_bucket_strong", "tf.string_to_hash_bucket_strong"},
  StringToNumber = {"tf.strings.to_number", "tf.string_to_number"},
  StringUpper = {"tf.strings.upper"},
  Sub = {"tf.subtract"},
  Substr = {"tf.strings.substr", "tf.substr"},
  Sum = {"tf.reduce_sum"},
  Svd = {"tf.svd", "tf.linalg.svd"},
  Tan = {"tf.tan"},
  Tanh = {"tf.tanh"},
  TensorArray = {"tf.TensorArray"},
  TensorArrayConcat = {"tf.TensorArray:concat"},
  TensorArrayRead = {"tf.TensorArray:read", "tf.TensorArray:gather"},
  TensorArrayScatter = {"tf.TensorArray:scatter"},
  TensorArraySize = {"tf.TensorArray:size"},
  TensorArraySplit = {"tf.TensorArray:split"},
  TensorArrayStack = {"tf.TensorArray:stack"},
  TensorArrayUnstack = {"tf.TensorArray:unstack"},
  TensorSummaryV2 = {"tf.summary.text"},
  TensorArrayWrite = {"tf.TensorArray:write"},
  Tile = {"tf.tile"},
  TopKV2 = {"tf.nn.top_k"},
  Transpose = {"tf.transpose"},
  TruncateDiv = {"tf.truncatediv"},
  TruncateMod = {"tf.truncatemod"},
  TruncatedNormal = {"tf.truncated_normal"},
  Unpack = {"tf.unstack"},
  UnsortedSegmentMax = {"tf.unsorted_segment_max"},
  UnsortedSegmentMin = {"tf.unsorted_segment_min"},
  UnsortedSegmentProd = {"tf.unsorted_segment_prod"},
  UnsortedSegmentSum = {"tf.unsorted_segment_sum"},
  VariableV2 = {"tf.Variable", "tf.get_variable"},
  Where = {"tf.where"},
  While = {"tf.while_loop"},
  ZerosLike = {"tf.zeros_like"},
}

-- A sample object per class whose methods the catalog names, and the variable
-- name the API docs call such an object by (they write `ta:write(i, v)`).
local INSTANCES = {
  ["tf.TensorArray"] = {doc_name = "ta", make = function() return tf.TensorArray(tf.float32, 2) end},
  ["tf.Variable"] = {doc_name = "v", make = function() return tf.Variable(1) end},
}

-- A method's class and name: "tf.TensorArray:write" -> "tf.TensorArray", "write".
local function split_method(name)
  return name:match("^(.-):([%w_]+)$")
end

local function callable(x)
  local mt = getmetatable(x)
  return type(x) == "function" or type(mt) == "table" and mt.__call ~= nil
end

-- Whether the catalog name resolves to a function: "tf.a.b" indexes from tf,
-- "tf.X:m" looks m up on a sample object of X.
local function resolves(name)
  local class, method = split_method(name)
  if class then
    local object = tf.Graph():as_default(INSTANCES[class].make)
    return type(object[method]) == "function"
  end
  local path = name:match("^tf%.(.+)$")
  if not path then return false end
  local value = tf
  for key in path:gmatch("[^.]+") do
    if type(value) ~= "table" then return false end
    value = value[key]
  end
  return callable(value)
end

local function api_docs()
  local texts = {}
  local ls = assert(io.popen("ls docs/api/*.md"))
  for path in ls:lines() do texts[#texts + 1] = H.read(path) end
  ls:close()
  assert(#texts > 0, "no docs/api/*.md")
  return table.concat(texts, "\n")
end

-- Whether text mentions word whole: not inside a longer name (tf.add is not
-- tf.add_n, nor tf.math.add).
local function mentions(text, word)
  local from = 1
  while true do
    local i, j = text:find(word, from, true)
    if not i then return false end
    if not text:sub(i - 1, i - 1):match("[%w_.]") and not text:sub(j + 1, j + 1):match("[%w_]") then return true end
    from = i + 1
  end
end

-- How the docs must write a catalog name: in full, and a method on the
-- docs' name for the object ("ta:write").
local function doc_mention(name)
  local class, method = split_method(name)
  if class then return INSTANCES[class].doc_name .. ":" .. method end
  return name
end

describe("the op registry", function()
  local names = tf.registered_ops()

  it("lists every op type once, sorted, from C and Lua", function()
    assert.equal(tonumber(core.C.mf_registry_num_ops()), #names)
    assert.is_true(#names > 100)
    for i = 2, #names do assert.is_true(names[i - 1] < names[i], names[i]) end
    for _, n in ipairs({"Const", "MatMul", "Relu", "While", "ApplyAdam", "TensorArrayWrite"}) do
      assert.is_not_nil(tf.op_info(n), n)
    end
    assert.is_true(core.C.mf_registry_op_name(-1) == nil)
    assert.is_true(core.C.mf_registry_op_name(#names) == nil)
  end)

  it("describes a registration", function()
    local mm = tf.op_info("MatMul")
    assert.same({name = "MatMul", num_inputs = 2, num_outputs = 1, variadic_inputs = false, stateful = false,
                 has_shape_fn = true, kernels = {CPU = true, GPU = true}, has_gradient = true,
                 not_differentiable = false, constant = false, variable = false, internal = false,
                 ref_inputs = {}, value_inputs = {}, host_memory_inputs = {}, elementwise = false,
                 gpu_dtypes = {"float32", "float64"}}, mm)
    local assign = tf.op_info("Assign")
    assert.same({1}, assign.ref_inputs)
    assert.is_true(assign.stateful)
    assert.is_true(tf.op_info("AddN").variadic_inputs)
    assert.is_true(tf.op_info("Const").constant)
    assert.is_true(tf.op_info("VariableV2").variable)
  end)

  it("says which inputs inference reads the values of, and which stay in host memory", function()
    -- Reshape(tensor, shape): the shape vector is read; the tensor is data.
    assert.same({2}, tf.op_info("Reshape").value_inputs)
    assert.same({2}, tf.op_info("Reshape").host_memory_inputs)
    assert.same({1, 2, 3}, tf.op_info("Range").value_inputs)
    assert.same({1}, tf.op_info("RandomUniform").value_inputs)
    -- If's predicate and a TensorArray write's metadata and index are read by the kernel only.
    assert.same({}, tf.op_info("If").value_inputs)
    assert.same({1}, tf.op_info("If").host_memory_inputs)
    assert.same({2, 3}, tf.op_info("TensorArrayWrite").host_memory_inputs)
    assert.same({}, tf.op_info("Add").host_memory_inputs)
    assert.is_nil(tf.op_info("NoSuchOp"))
    local err = H.error_of(tf.op_info, 5)
    assert.truthy(err:find("tf.op_info(op_type): op_type must be a string, got number", 1, true), err)
    assert.truthy(err:find(" %(at [^()]*%.lua:%d+%)$"), err)
  end)

  -- One op is one registration: shape inference, a CPU kernel, and a gradient
  -- rule or a declaration that it has none (a source op has nothing to differentiate).
  for _, name in ipairs(names) do
    it(name .. " has shape inference, a CPU kernel and a gradient rule or a declared lack of one", function()
      local info = tf.op_info(name)
      assert(info.has_shape_fn, name .. ": no shape inference")
      assert(info.kernels.CPU, name .. ": no CPU kernel")
      local source = info.num_inputs == 0 and not info.variadic_inputs
      assert(info.has_gradient or info.not_differentiable or source,
             name .. ": no gradient rule and not declared MF_OP_NOT_DIFFERENTIABLE")
    end)
  end

  -- The other half of a registration: a public op has a documented Lua
  -- wrapper; an internal one is built only by the engine, so it has none.
  local docs = api_docs()
  for _, name in ipairs(names) do
    it(name .. " is internal or built by a Lua function the API docs name", function()
      local builders = CATALOG[name]
      if tf.op_info(name).internal then
        assert(builders == nil, name .. " is MF_OP_INTERNAL but has a catalog entry: remove it from CATALOG")
        return
      end
      assert(name:sub(1, 1) ~= "_", name .. ": a type starting with _ is for engine-built ops; mark it MF_OP_INTERNAL")
      assert(builders, name .. ": no Lua wrapper in CATALOG; add a Lua wrapper and a CATALOG entry, " ..
                       "or mark the op MF_OP_INTERNAL if only the engine builds it")
      for _, fname in ipairs(builders) do
        local class = split_method(fname)
        if class then
          assert(INSTANCES[class], name .. ": " .. fname .. " is a method of " .. class ..
                                   ", which has no sample object in INSTANCES")
        end
        assert(resolves(fname), name .. ": " .. fname .. " is not a function")
        local mention = doc_mention(fname)
        assert(mentions(docs, mention),
               name .. ": " .. fname .. " is not documented: docs/api/*.md never write " .. mention)
      end
    end)
  end

  it("catalogs only registered op types", function()
    for name in pairs(CATALOG) do
      assert(tf.op_info(name), name .. " is in CATALOG but not a registered op type")
    end
  end)
end)
