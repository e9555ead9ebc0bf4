-- The bad-input catalogue (issue 17): each case hands a public function a
-- value of the wrong type, dtype, rank or range, an empty or huge shape, NaN
-- or inf, a closed session or finalized graph, a reused or invalid name, a
-- wrong feed structure or a corrupt file; each must raise the exact message
-- that names the function or op and the caller's line, and leave the graph
-- and the session working.
local tf = require("moonflow")
local ffi = require("ffi")
local H = require("spec.helpers")

describe("bad input", function()
  local dir, x, x_line, y, sess
  before_each(function()
    tf.reset_default_graph()
    x, x_line = tf.placeholder(tf.float32, {2, 3}, "x"), debug.getinfo(1, "l").currentline
    y = x * 2 + 1
    sess = tf.Session()
  end)
  setup(function() dir = H.tmpdir() end)
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  -- The default graph and its session keep working after every error.
  local function works()
    assert.same({{1, 3, 5}, {7, 9, 11}}, sess:run(y, {[x] = {{0, 1, 2}, {3, 4, 5}}}):totable())
  end

  -- fn: a function of one line, calling what must fail (not as a tail call,
  -- so that its frame, the caller's line, stays on the stack). In `expected`,
  -- @ stands for that line, @x for the line that built x (run-time errors
  -- name the line that built the op) and $ for the temporary directory.
  local function case(expected, fn)
    local line = "spec/bad_input_spec.lua:" .. debug.getinfo(fn, "S").linedefined
    local ok, err = pcall(fn)
    assert.is_false(ok, "no error at " .. line)
    expected = expected:gsub("@x", "spec/bad_input_spec.lua:" .. x_line):gsub("@", line):gsub("%$", dir)
    assert.equal(expected, err)
    works()
  end

  it("conversions and constants", function()
    local i32 = tf.constant({1, 2, 3}, tf.int32, {name = "i32"})
    case("tf.constant: expected numbers, got the string \"abc\" (at @)",
         function() tf.constant("abc", tf.float32) end)
    case("tf.constant: expected strings for dtype string, got 1 (at @)",
         function() tf.constant({"a", 1}) end)
    case("tf.constant: expected numbers, got the string \"a\" (at @)",
         function() tf.constant({1, "a"}) end)
    case("tf.constant: ragged nested table: expected 0 elements at depth 2, got 2 (at @)",
         function() tf.constant({{}, {5, 7}}) end)
    case("tf.constant: ragged nested table: expected 2 elements at depth 2, got 1 (at @)",
         function() tf.constant({{1, 2}, {3}}) end)
    case("tf.constant: a Lua table with a hole at index 2 (nil) is not a list; values must be numbers, " ..
         "booleans or nested lists (at @)",
         function() tf.constant({1, nil, 3}) end)
    case("tf.constant: a Lua table with key 'a' is not a list; values must be numbers, booleans or nested " ..
         "lists (at @)",
         function() tf.constant({a = 1}) end)
    case("tf.constant: expected a dtype such as tf.float32, got float99 (at @)",
         function() tf.constant(1, "float99") end)
    case("tf.constant: 3 values cannot fill shape {2, 2} (at @)",
         function() tf.constant({1, 2, 3}, tf.float32, {2, 2}) end)
    case("tf.constant: Cannot convert nan to a Tensor of dtype int32: it is not an integer (use tf.cast to " ..
         "truncate) (at @)",
         function() tf.constant(0 / 0, tf.int32) end)
    case("tf.constant: Cannot convert inf to a Tensor of dtype int64: it is not an integer (use tf.cast to " ..
         "truncate) (at @)",
         function() tf.constant(math.huge, tf.int64) end)
    case("tf.constant: Cannot convert 256 to a Tensor of dtype uint8: out of its range [0, 255] (at @)",
         function() tf.constant(256, tf.uint8) end)
    case("tf.constant: Cannot convert 1.5 to a Tensor of dtype int32: it is not an integer (use tf.cast to " ..
         "truncate) (at @)",
         function() tf.constant(1.5, tf.int32) end)
    case("tf.constant: expected booleans for dtype bool, got 1 (at @)",
         function() tf.constant({true, 1}, tf.bool) end)
    case("tf.convert_to_tensor: Tensor conversion requested dtype int32 for Tensor with dtype float32: " ..
         "Tensor(\"x:0\", shape=(2, 3), dtype=float32) (at @)",
         function() tf.convert_to_tensor(x, tf.int32) end)
    case("tf.convert_to_tensor: argument x: expected a Tensor or a Lua number, boolean, string, nested " ..
         "list or tf.Array, got a function (at @)",
         function() tf.convert_to_tensor(print) end)
    case("tf.add: argument y: Cannot convert 1.5 to a Tensor of dtype int32: it is not an integer (use tf.cast " ..
         "to truncate) (at @)",
         function() local _ = i32 + 1.5 end)
    case("tf.add: argument y: expected numbers, got the " ..
         "string \"s\" (at @)",
         function() local _ = x + "s" end)
    case("tf.multiply: argument y: expected numbers, got a table (at @)",
         function() local _ = x * {1, {2}} end)
    case("tf.array: expected a dtype such as tf.float32, got x (at @)",
         function() tf.array({1, 2}, "x") end)
    case("tf.array: expected a number, boolean, string, nested list or tf.Array, got " .. tostring(sess) .. " (at @)",
         function() tf.array(sess) end)
  end)

  it("placeholders and static shapes", function()
    case("tf.placeholder: expected a dtype such as tf.float32, got float (at @)",
         function() tf.placeholder("float") end)
    case("Placeholder: attr 'shape': shape[2] must be a size or -1 (unknown), got -3 (at @)",
         function() tf.placeholder(tf.float32, {2, -3}) end)
    case("Placeholder: attr 'shape': shape[1] must be a size or -1 (unknown), got 2.5 (at @)",
         function() tf.placeholder(tf.float32, {2.5}) end)
    case("Placeholder: attr 'shape': shapes have at most 8 dimensions, got 9 (at @)",
         function() tf.placeholder(tf.float32, {1, 1, 1, 1, 1, 1, 1, 1, 1}) end)
    case("Placeholder: attr 'shape': a shape must be a Lua list of integers (-1 for unknown), got the string " ..
         "\"abc\" (at @)",
         function() tf.placeholder(tf.float32, "abc") end)
    case("Placeholder: shape [1099511627776,1099511627776] would have more than 2^63 - 1 elements (at @)",
         function() tf.placeholder(tf.float32, {2 ^ 40, 2 ^ 40}) end)
    case("tf.placeholder: unknown option 'bogus' (expected one of: shape, name) (at @)",
         function() tf.placeholder(tf.float32, {2}, {name = "p", bogus = 1}) end)
    case("Tensor:set_shape: Shapes (2, 3) and (3, 3) are incompatible (set_shape on 'x:0') (op 'x' created at " ..
         "@x) (at @)",
         function() x:set_shape({3, 3}) end)
    case("Tensor:set_shape: Shapes (2, 3) and (2,) are incompatible (set_shape on 'x:0') (op 'x' created at " ..
         "@x) (at @)",
         function() x:set_shape({2}) end)
    case("TensorShape:as_list: as_list() is not defined on an unknown TensorShape (at @)",
         function() tf.TensorShape(nil):as_list() end)
  end)

  it("math", function()
    local i32 = tf.constant({1, 2, 3}, tf.int32, {name = "i32"})
    local m = tf.constant({{1, 2}, {3, 4}}, {name = "m"})
    case("Add_1: Incompatible shapes: [2,3] vs. [2,2] (dimension 1: 3 vs. 2); broadcasting needs equal " ..
         "dimensions or 1 (at @)",
         function() tf.add(x, m) end)
    case("Add_1: x has dtype float32 but y has dtype int32; use tf.cast to convert one of them (at @)",
         function() tf.add(x, i32) end)
    case("tf.add: argument x: expected a Tensor or a Lua number, boolean, string, nested list or tf.Array, got nil (at " ..
         "@)",
         function() tf.add(nil, 1) end)
    case("tf.matmul: argument a: expected numbers, got the " ..
         "string \"abc\" (at @)",
         function() tf.matmul("abc", x) end)
    case("Dimensions must be equal, but are 3 and 2 for 'MatMul' (op: 'MatMul') with input shapes: [2,3], " ..
         "[2,3]. The inner dimensions of op(a) and op(b) must match (transpose_a=false, transpose_b=false); " ..
         "if you meant a transposed operand, pass transpose_a or transpose_b (at @)",
         function() tf.matmul(x, x) end)
    case("MatMul: MatMul needs inputs of rank >= 2, but b has shape [3] (rank 1); tf.reshape or tf.expand_dims " ..
         "it into a matrix (at @)",
         function() tf.matmul(x, {1, 2, 3}) end)
    case("tf.matmul: transpose_a must be a boolean, got 1 (at @)",
         function() tf.matmul(x, m, {transpose_a = 1}) end)
    case("tf.matmul: Only one of transpose_a and adjoint_a can be True. (at @)",
         function() tf.matmul(x, m, {transpose_a = true, adjoint_a = true}) end)
    case("tf.cast: expected a dtype such as tf.float32, got complex (at @)",
         function() tf.cast(x, "complex") end)
    case("Sqrt: x has dtype int32, but Sqrt takes only float32, float64, complex64, complex128; use tf.cast to convert (at @)",
         function() tf.sqrt(i32) end)
    case("LogicalAnd: x and y have dtype float32, but LogicalAnd takes only bool; use tf.cast to convert (at @)",
         function() tf.logical_and(x, x) end)
    case("tf.add_n: expected a non-empty list of tensors (at @)",
         function() tf.add_n({}) end)
    case("AddN: input 1 has dtype int32 but input 0 has float32; use tf.cast to convert (at @)",
         function() tf.add_n({x, i32}) end)
    case("Cumsum: axis 5 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.cumsum(x, 5) end)
    case("Pow: Incompatible shapes: [2,3] vs. [2] (dimension 1: 3 vs. 2); broadcasting needs equal dimensions " ..
         "or 1 (at @)",
         function() tf.pow(x, {1, 2}) end)
    case("FloorDiv: x has dtype float32 but y has dtype int32; use tf.cast to convert one of them (at @)",
         function() tf.floordiv(x, i32) end)
    case("tf.maximum: argument y: expected numbers, got the " ..
         "string \"a\" (at @)",
         function() tf.maximum(x, "a") end)
    case("Abs: name must be a string, got 5 (at @)",
         function() tf.abs(x, {name = 5}) end)
    case("tf.exp: unknown option 'foo' (expected one of: name) (at @)",
         function() tf.exp(x, {foo = 1}) end)
  end)

  it("reductions", function()
    case("Sum: axis 5 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.reduce_sum(x, 5) end)
    case("tf.reduce_sum: axis must be an integer or a list of integers, got a (at @)",
         function() tf.reduce_sum(x, "a") end)
    case("tf.reduce_mean: keepdims must be a boolean, got 3 (at @)",
         function() tf.reduce_mean(x, {keepdims = 3}) end)
    case("tf.reduce_sum: unknown option 'foo' (expected one of: axis, keepdims, name, reduction_indices, " ..
         "keep_dims) (at @)",
         function() tf.reduce_sum(x, {axis = 0, foo = 1}) end)
    case("tf.reduce_max: Can not specify both 'axis' and 'reduction_indices'. (at @)",
         function() tf.reduce_max(x, {axis = 0, reduction_indices = 1}) end)
    case("ArgMax: axis 7 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.argmax(x, 7) end)
    case("tf.argmin: axis must be an integer, got {1} (at @)",
         function() tf.argmin(x, {1}) end)
    case("tf.argmax: axis must be an integer, got nan (at @)",
         function() tf.argmax(x, 0 / 0) end)
    case("tf.reduce_logsumexp: axis 3 is out of range for x of shape (2, 3) (rank 2): axes are in [-2, 2) (at " ..
         "@)",
         function() tf.reduce_logsumexp(x, 3) end)
  end)

  it("shapes and layout", function()
    local m = tf.constant({{1, 2}, {3, 4}}, {name = "m"})
    case("Reshape: Cannot reshape a tensor with 6 elements to shape [4,4] (16 elements) (at @)",
         function() tf.reshape(x, {4, 4}) end)
    case("Reshape: only one input size may be -1, not both 0 and 1 (at @)",
         function() tf.reshape(x, {-1, -1}) end)
    case("tf.reshape: expected a shape (a Lua list of integers or an int32 tensor), got the string \"abc\" (at " ..
         "@)",
         function() tf.reshape(x, "abc") end)
    case("tf.reshape: shape[1] must be an integer (of int64's range) or a scalar tensor, got nan (at @)",
         function() tf.reshape(x, {0 / 0}) end)
    case("Reshape: shape [1099511627776,1099511627776] would have more than 2^63 - 1 elements (at @)",
         function() tf.reshape(x, {2 ^ 40, 2 ^ 40}) end)
    case("tf.reshape: argument x: expected a Tensor or a Lua number, boolean, string, nested list or tf.Array, got nil " ..
         "(at @)",
         function() tf.reshape(nil, {4}) end)
    case("concat: Dimensions of inputs should match: shape[0] = [2,3] vs. shape[1] = [2,2] (only dimension 0, " ..
         "the concat axis, may differ) (at @)",
         function() tf.concat({x, m}, 0) end)
    case("concat: axis 5 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.concat({x, x}, 5) end)
    case("tf.concat: expected a non-empty Lua list of tensors, got {} (at @)",
         function() tf.concat({}, 0) end)
    case("tf.concat: axis must be an integer, got nan (at @)",
         function() tf.concat({x, x}, 0 / 0) end)
    case("stack: Shapes of all inputs must match: values[0].shape = [2,3] != values[1].shape = [2,2] (at @)",
         function() tf.stack({x, m}) end)
    case("tf.stack: expected a non-empty Lua list of tensors, got {} (at @)",
         function() tf.stack({}) end)
    case("unstack: axis 5 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.unstack(x, {axis = 5}) end)
    case("unstack: Cannot infer argument `num` from shape [-1]; pass num (at @)",
         function() tf.unstack(tf.placeholder(tf.float32, {-1})) end)
    case("tf.split: dimension 1 has size 3, which 4 pieces cannot share equally (at @)",
         function() tf.split(x, 4, 1) end)
    case("split: the sizes add up to 2, but the dimension 1 being split has size 3 (at @)",
         function() tf.split(x, {1, 1}, 1) end)
    case("Slice: Expected size[0] in [0, 2], but got 3 (at @)",
         function() tf.slice(x, {0, 0}, {3, 1}) end)
    case("Slice: Expected begin and size to have one entry per dimension of the input (rank 2), but they have " ..
         "1 and 1 (at @)",
         function() tf.slice(x, {0}, {1}) end)
    case("tf.slice: begin[2] must be an integer, got nan (at @)",
         function() tf.slice(x, {0, 0 / 0}, {1, 1}) end)
    case("strided_slice: strides[0] must be non-zero (at @)",
         function() tf.strided_slice(x, {0, 0}, {1, 1}, {0, 1}) end)
    case("strided_slice: slice index 5 of dimension 0 out of bounds (size 2) (at @)",
         function() local _ = x[5] end)
    case("Tensor index: the index must be an integer, got 1.5 (at @)",
         function() local _ = x[1.5] end)
    case("transpose: 0 appears twice in perm; perm must be a permutation (at @)",
         function() tf.transpose(x, {0, 0}) end)
    case("transpose: perm[1] = 5 is out of range [0, 2) (at @)",
         function() tf.transpose(x, {0, 5}) end)
    case("Tile: multiples has 1 entries but the input has rank 2; give one multiple per dimension (at @)",
         function() tf.tile(x, {1}) end)
    case("Tile: multiples[0] = -1 must be non-negative (at @)",
         function() tf.tile(x, {-1, 1}) end)
    case("tf.tile: multiples[1] must be an integer, got inf (at @)",
         function() tf.tile(x, {math.huge, 1}) end)
    case("Pad: paddings has 1 (before, after) pairs, but the input has rank 2; give one pair per dimension (at " ..
         "@)",
         function() tf.pad(x, {{1, 1}}) end)
    case("Pad: paddings must be non-negative, got -1 for dimension 0 (at @)",
         function() tf.pad(x, {{-1, 1}, {0, 0}}) end)
    case("Squeeze: Can not squeeze dim[0], expected a dimension of 1, got 2 (at @)",
         function() tf.squeeze(x, {0}) end)
    case("Squeeze: axis 5 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.squeeze(x, 5) end)
    case("ExpandDims: axis 9 is out of range for inserting a dimension into a tensor of rank 2 (expected [-3, " ..
         "2]) (at @)",
         function() tf.expand_dims(x, 9) end)
    case("Fill: dims[1] = -1 must be nonnegative (at @)",
         function() tf.fill({2, -1}, 1) end)
    case("Fill: value must be a scalar, got shape [2] (at @)",
         function() tf.fill({2}, {1, 2}) end)
    case("tf.fill: shape[2] must be an integer (of int64's range) or a scalar tensor, got 2.5 (at @)",
         function() tf.zeros({2, 2.5}) end)
    case("zeros: shape [1099511627776,1099511627776] would have more than 2^63 - 1 elements (at @)",
         function() tf.zeros({2 ^ 40, 2 ^ 40}) end)
    case("range: Requires delta != 0: 0 (at @)",
         function() tf.range(0, 10, 0) end)
    case("range: Requires start <= limit when delta > 0: 10/0 (at @)",
         function() tf.range(10, 0, 1) end)
    case("range: start, limit and delta must be finite, got 0, nan and 1 (at @)",
         function() tf.range(0, 0 / 0) end)
    case("range: the range from 0 to 1e+30 by 1 would have 1e+30 elements, more than 2^63 - 1 (at @)",
         function() tf.range(0, 1e30) end)
    case("tf.eye: num_rows must be an integer >= 0, got -1 (at @)",
         function() tf.eye(-1) end)
    case("tf.linspace: num must be an integer >= 1, got inf (at @)",
         function() tf.linspace(0, 1, math.huge) end)
    case("ReverseV2: axis 5 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.reverse(x, {5}) end)
  end)

  it("indexing", function()
    local feed = {[x] = {{1, 2, 3}, {4, 5, 6}}}
    local ids = tf.constant({1, 2, 3}, tf.int32, {name = "ids"})
    case("tf.gather: argument indices: Cannot convert 0.5 to a Tensor of dtype int32: it is not an integer " ..
         "(use tf.cast to truncate) (at @)",
         function() tf.gather(x, {0.5}) end)
    case("Gather: axis 2 is out of range for a tensor of rank 2 (expected [-2, 2)) (at @)",
         function() tf.gather(x, {1}, {axis = 2}) end)
    case("g: indices[0] = 5 is not in [0, 2) [[node g (defined at @)]]",
         function() sess:run(tf.gather(x, {5}, {name = "g"}), feed) end)
    case("g_1: indices[0] = -1 is not in [0, 2) [[node g_1 (defined at @)]]",
         function() sess:run(tf.gather(x, {-1}, {name = "g"}), feed) end)
    case("gnd: indices[0] = [5, 0] does not index into shape [2,3] [[node gnd (defined at @)]]",
         function() sess:run(tf.gather_nd(x, {{5, 0}}, {name = "gnd"}), feed) end)
    case("OneHot: depth must be non-negative, got -1 (at @)",
         function() tf.one_hot(ids, -1) end)
    case("OneHot: indices must be uint8, int32 or int64, got float32; use tf.cast (at @)",
         function() tf.one_hot(x, 3) end)
    case("tf.one_hot: argument depth: Cannot convert nan to a Tensor of dtype int32: it is not an integer (use " ..
         "tf.cast to truncate) (at @)",
         function() tf.one_hot(ids, 0 / 0) end)
    case("boolean_mask: mask of shape [1] does not match the dims [0, 1) of the tensor's shape [2,3] (at @)",
         function() tf.boolean_mask(x, {true}) end)
    case("SequenceMask: maxlen must be non-negative, got -1 (at @)",
         function() tf.sequence_mask({1, 2}, -1) end)
    case("ScatterNd: shape[0] = -1 must be non-negative (at @)",
         function() tf.scatter_nd({{0}}, {1}, {-1}) end)
    case("tf.nn.embedding_lookup: argument ids: Cannot convert 0.5 to a Tensor of dtype int32: it is not an " ..
         "integer (use tf.cast to truncate) (at @)",
         function() tf.nn.embedding_lookup(x, {0.5}) end)
    case("tf.in_top_k: argument targets: Cannot convert 1.5 to a Tensor of dtype int32: it is not an integer " ..
         "(use tf.cast to truncate) (at @)",
         function() tf.nn.in_top_k(x, {1.5}, 1) end)
    case("Select: the condition must be a bool tensor, got float32 (use a comparison such as tf.less) (at @)",
         function() tf.where(x, x, x) end)
  end)

  it("neural network functions", function()
    local i32 = tf.constant({1, 2, 3}, tf.int32, {name = "i32"})
    local m = tf.constant({{1, 2}, {3, 4}}, {name = "m"})
    local image = tf.zeros({1, 4, 4, 1})
    local sparse_xent, feed = tf.nn.sparse_softmax_cross_entropy_with_logits, {{1, 2, 3}, {4, 5, 6}}
    case("tf.nn.softmax: axis 4 is out of range for logits of shape (2, 3) (expected [-2, 2)) (at @)",
         function() tf.nn.softmax(x, 4) end)
    case("tf.nn.softmax: logits must be a float32 or float64 tensor, got int32 i32:0 (use tf.cast) (at @)",
         function() tf.nn.softmax(i32) end)
    case("tf.nn.log_softmax: axis must be an integer, got a (at @)",
         function() tf.nn.log_softmax(x, {axis = "a"}) end)
    case("Relu: Relu takes no strings, but its input 0 is a string; strings go through tf.strings ops, Identity, " ..
         "Equal, NotEqual, Reshape, ExpandDims, Squeeze, Shape, Size and Rank (at @)",
         function() tf.nn.relu("x") end)
    case("tf.nn.leaky_relu: alpha must be a number, got a (at @)",
         function() tf.nn.leaky_relu(x, "a") end)
    case("Conv2D: input must be 4-D [batch, height, width, channels], got shape [2,3] (rank 2) (at @)",
         function() tf.nn.conv2d(x, x, {1, 1, 1, 1}, "SAME") end)
    case("Conv2D: the input has 1 channels but the filter [height, width, in_channels, out_channels] expects 2 " ..
         "(filter shape [3,3,2,1]) (at @)",
         function() tf.nn.conv2d(image, tf.zeros({3, 3, 2, 1}), {1, 1, 1, 1}, "SAME") end)
    case("Conv2D: strides must be positive (and below 2^31), got {1, 0, 1, 1} (at @)",
         function() tf.nn.conv2d(image, tf.zeros({3, 3, 1, 1}), {1, 0, 1, 1}, "SAME") end)
    case("Conv2D: padding must be \"SAME\" or \"VALID\", got \"BOGUS\" (at @)",
         function() tf.nn.conv2d(image, tf.zeros({3, 3, 1, 1}), {1, 1, 1, 1}, "BOGUS") end)
    case("Negative dimension size caused by subtracting 9 from 4 for '{{node MaxPool}}': the window's height " ..
         "is 9 (9 with dilation 1) but the input's is 4; with padding \"VALID\" the input must be at least " ..
         "as large as the window (use padding \"SAME\" or a larger input) (at @)",
         function() tf.nn.max_pool(image, {1, 9, 9, 1}, {1, 1, 1, 1}, "VALID") end)
    case("tf.nn.avg_pool: ksize must be an integer, a pair {height, width} or 4 integers {1, height, width, " ..
         "1}, got {1, 2, 2} (at @)",
         function() tf.nn.avg_pool(image, {1, 2, 2}, {1, 1, 1, 1}, "VALID") end)
    case("BroadcastTo: cannot broadcast a tensor of shape [2,3] to shape [2,2] (dimension 1: 3 vs. 2) (at @)",
         function() tf.nn.softmax_cross_entropy_with_logits({labels = x, logits = m}) end)
    case("tf.nn.softmax_cross_entropy_with_logits: call it as tf.nn.softmax_cross_entropy_with_logits({labels " ..
         "= ..., logits = ...}) (at @)",
         function() tf.nn.softmax_cross_entropy_with_logits(x, x) end)
    case("tf.nn.sparse_softmax_cross_entropy_with_logits: labels must be int32 or int64 class indices, got " ..
         "float32 (at @)",
         function() tf.nn.sparse_softmax_cross_entropy_with_logits({labels = x, logits = x}) end)
    case("tf.nn.sigmoid_cross_entropy_with_logits: labels of shape (2, 2) and logits of shape (2, 3) must have " ..
         "the same shape (at @)",
         function() tf.nn.sigmoid_cross_entropy_with_logits({labels = m, logits = x}) end)
    case("tf.nn.dropout: keep_prob must be a scalar tensor or a number in the range (0, 1], got 2 (at @)",
         function() tf.nn.dropout(x, 2) end)
    case("tf.nn.dropout: rate must be a scalar tensor or a number in the range [0, 1), got -0.5 (at @)",
         function() tf.nn.dropout(x, {rate = -0.5}) end)
    case("tf.nn.moments: axis 5 is out of range for x of shape (2, 3) (rank 2): axes are in [-2, 2) (at @)",
         function() tf.nn.moments(x, {5}) end)
    case("TopKV2: input must have at least k = 5 columns, got shape [2,3] (at @)",
         function() tf.nn.top_k(x, 5) end)
    case("TopKV2: k must be non-negative, got -1 (at @)",
         function() tf.nn.top_k(x, -1) end)
    case("BiasAdd: bias has 2 elements but the last dimension of value is 3 (value shape [2,3], bias shape " ..
         "[2]); BiasAdd adds one bias per channel (at @)",
         function() tf.nn.bias_add(x, {1, 2}) end)
    case("tf.nn.l2_loss: t must be a float32 or float64 tensor, got int32 i32:0 (use tf.cast) (at @)",
         function() tf.nn.l2_loss(i32) end)
    case("tf.nn.batch_normalization: variance_epsilon must be a non-negative number, got -1 (at @)",
         function() tf.nn.batch_normalization(x, 0, 1, nil, nil, -1) end)
    case("Received a label value of 7 which is outside the valid range of [0, 3).  Label values: 0 7 [[node " ..
         "xent (defined at @)]]",
         function() sess:run(sparse_xent({labels = {0, 7}, logits = x, name = "xent"}), {[x] = feed}) end)
  end)

  it("random values", function()
    case("random_normal: shape must be non-negative, got -1 for dimension 1 (at @)",
         function() tf.random_normal({2, -1}) end)
    case("tf.random_normal: shape[1] must be an integer (of int64's range) or a scalar tensor, got nan (at @)",
         function() tf.random_normal({0 / 0}) end)
    case("tf.random_normal: stddev: expected numbers, got the string \"a\" (at @)",
         function() tf.random_normal({2}, {stddev = "a"}) end)
    case("tf.random_uniform: maxval must be given for integer dtype int32 (at @)",
         function() tf.random_uniform({2}, {dtype = tf.int32}) end)
    case("tf.random_uniform: need minval < maxval, got minval 5, maxval 1 (at @)",
         function() tf.random_uniform({2}, 5, 1, tf.int32) end)
    case("Multinomial: num_samples must be non-negative, got -1 (at @)",
         function() tf.multinomial(x, -1) end)
    case("tf.set_random_seed: the seed must be an integer, got a (at @)",
         function() tf.set_random_seed("a") end)
    case("truncated_normal: dtype must be float32 or float64, got int32; tf.cast the result for other dtypes " ..
         "(at @)",
         function() tf.truncated_normal({2}, {dtype = tf.int32}) end)
  end)

  it("variables and scopes", function()
    local v = tf.Variable(tf.zeros({2}), {name = "v"})
    case("tf.Variable: an initial value is required (at @)",
         function() tf.Variable() end)
    case("Variable: VariableV2 takes no strings, but its output 0 is a string; strings go through tf.strings ops, " ..
         "Identity, Equal, NotEqual, Reshape, ExpandDims, Squeeze, Shape, Size and Rank (at @)",
         function() tf.Variable("abc") end)
    case("tf.Variable: trainable must be a boolean, got 3 (at @)",
         function() tf.Variable(1, {trainable = 3}) end)
    case("VariableV2: 'x y' is not a valid op name: TensorFlow's op names match [A-Za-z0-9.][A-Za-z0-9_.\\-/>]* " ..
         "(at @)",
         function() tf.Variable(1, {name = "x y"}) end)
    case("tf.Variable: the initial value has dtype float32 but dtype int32 was asked for; use tf.cast (at @)",
         function() tf.Variable(x, {dtype = tf.int32}) end)
    case("tf.get_variable: a name is required (at @)",
         function() tf.get_variable() end)
    case("Variable w already exists, disallowed. Did you mean to set reuse=true or reuse=tf.AUTO_REUSE in " ..
         "variable_scope? Originally defined at @ (at @)",
         function() tf.get_variable("w", {2}); tf.get_variable("w", {2}) end)
    case("Shape of a new variable (w2) must be fully defined, but instead was (2, ?). (at @)",
         function() tf.get_variable("w2", {2, -1}) end)
    case("tf.get_variable: If initializer is a constant, do not specify shape. (at @)",
         function() tf.get_variable("w3", {2}, {initializer = 5}) end)
    case("Assign: Shapes must be equal: variable 'v' has shape (2,) but the value has shape (3,); build a " ..
         "value of the variable's shape (tf.fill, tf.reshape) or pass validate_shape = false (at @)",
         function() tf.assign(v, {1, 2, 3}) end)
    case("tf.assign: ref must be a variable (tf.Variable or tf.get_variable), got Tensor(\"x:0\", shape=(2, " ..
         "3), dtype=float32) (at @)",
         function() tf.assign(x, 1) end)
    case("tf.assign_add: argument value: expected numbers, got the string \"a\" (at @)",
         function() tf.assign_add(v, "a") end)
    case("Attempting to use uninitialized value fresh [[node fresh (defined at @)]]",
         function() sess:run(tf.Variable(1, {name = "fresh"})) end)
    case("tf.variables_initializer: var_list must be a list of variables, got 5 (at @)",
         function() tf.variables_initializer(5) end)
    case("tf.variables_initializer: var_list[1] is not a variable: Tensor(\"x:0\", shape=(2, 3), " ..
         "dtype=float32) (at @)",
         function() tf.variables_initializer({x}) end)
    case("tf.name_scope(name, fn): fn must be a function, got number (at @)",
         function() tf.name_scope("a", 5) end)
    case("tf.name_scope(name, fn): name must be a string, got 5 (at @)",
         function() tf.name_scope(5, function() end) end)
    case("tf.name_scope: 'a b' is not a valid scope name: TensorFlow's scope names match [A-Za-z0-9_.\\-/>]* (at @)",
         function() tf.name_scope("a b", function() end) end)
    case("tf.variable_scope: reuse must be true, false, nil or tf.AUTO_REUSE, got 5 (at @)",
         function() tf.variable_scope("s", {reuse = 5}, function() end) end)
    case("Variable s/nope does not exist, or was not created with tf.get_variable(). Did you mean to set " ..
         "reuse=tf.AUTO_REUSE in variable_scope? (at @)",
         function() tf.variable_scope("s", {reuse = true}, function() tf.get_variable("nope", {1}) end) end)
    case("tf.control_dependencies: element 1 is not a Tensor or an Operation: 5 (at @)",
         function() tf.control_dependencies({5}, function() end) end)
    case("tf.control_dependencies(list, fn): fn must be a function (at @)",
         function() tf.control_dependencies({x}, 5) end)
    case("tf.group: element 1 is not a Tensor or an Operation: 5 (at @)",
         function() tf.group(5) end)
    case("Const: 'bad name!' is not a valid op name: TensorFlow's op names match [A-Za-z0-9.][A-Za-z0-9_.\\-/>]* " ..
         "(at @)",
         function() tf.constant(1, {name = "bad name!"}) end)
    case("tf.make_template(name, fn): a name and a function are required (at @)",
         function() tf.make_template(5, function() end) end)
  end)

  it("control flow", function()
    local t = tf.constant(true, {name = "t"})
    local zero = tf.constant(0, {name = "zero"})
    local function below3(i) return tf.less(i, 3) end
    case("tf.cond(pred, true_fn, false_fn): true_fn and false_fn must be functions (at @)",
         function() tf.cond(t, 5, function() return 2 end) end)
    case("tf.cond: true_fn and false_fn must return the same structure: true_fn returns 1 values and false_fn " ..
         "2 (at @)",
         function() tf.cond(t, function() return 1 end, function() return 1, 2 end) end)
    case("tf.cond: result 1 is a float32 tensor in true_fn but a int32 tensor in false_fn; both branches must " ..
         "return the same dtypes (use tf.cast) (at @)",
         function() tf.cond(t, function() return zero end, function() return tf.constant(1, tf.int32) end) end)
    case("tf.cond: pred must be a scalar bool tensor, got x:0 (dtype float32, shape (2, 3)); compare to get " ..
         "one, e.g. tf.less(x, y) (at @)",
         function() tf.cond(x, function() return 1 end, function() return 2 end) end)
    case("tf.while_loop: body must return the loop variables' structure: body returns 2 values for 1 loop " ..
         "variables (at @)",
         function() tf.while_loop(function(i) return tf.less(i, 3) end, function(i) return i + 1, 2 end, {zero}) end)
    case("tf.while_loop(cond, body, loop_vars): cond and body must be functions (at @)",
         function() tf.while_loop(5, function(i) return i end, {zero}) end)
    case("while: loop variable 0 ('zero:0') enters the loop as float32, but the body returns int32 for it; use " ..
         "tf.cast in the body (at @)",
         function() tf.while_loop(below3, function(i) return tf.cast(i, tf.int32) end, {zero}) end)
    case("tf.while_loop: loop_vars must be a non-empty list (at @)",
         function() tf.while_loop(function(i) return tf.less(i, 3) end, function(i) return i + 1 end, {}) end)
    case("tf.while_loop: cond must return a scalar bool tensor, got Tensor(\"loop_var:0\", shape=(), " ..
         "dtype=float32) (at @)",
         function() tf.while_loop(function(i) return i end, function(i) return i + 1 end, {zero}) end)
    case("tf.while_loop: maximum_iterations must be a non-negative integer or an int32 scalar tensor, got -1 " ..
         "(at @)",
         function() tf.while_loop(below3, function(i) return i + 1 end, {zero}, {maximum_iterations = -1}) end)
    case("tf.case: expected a non-empty list of {pred, fn} pairs (at @)",
         function() tf.case({}, function() return 1 end) end)
    case("tf.case: pred 1 must be a scalar bool tensor, got Const_2:0 (dtype float32, shape ()) (at @)",
         function() tf.case({{tf.constant(1), function() return 1 end}}) end)
    case("tf.TensorArray: size must be a non-negative integer or an int32 tensor, got -1 (at @)",
         function() tf.TensorArray(tf.float32, -1) end)
    case("tf.TensorArray: expected a dtype such as tf.float32, got x (at @)",
         function() tf.TensorArray("x", 2) end)
    case("TensorArrayWrite: TensorArray dtype is float32 but Op is trying to write dtype int32; use tf.cast " ..
         "(at @)",
         function() tf.TensorArray(tf.float32, 2):write(0, tf.constant(1, tf.int32)) end)
    case("TensorArray.read: the index must be an int32 or int64 tensor, got float32 (at @)",
         function() tf.TensorArray(tf.float32, 2):read(tf.constant(1.5)) end)
    case("TensorArrayWrite: Tried to write to index 5 but array is not resizeable and size is: 2 [[node " ..
         "TensorArrayWrite (defined at @)]]",
         function() sess:run(tf.TensorArray(tf.float32, 2, {name = "ta"}):write(5, 1):stack()) end)
    case("TensorArrayRead: Could not read from TensorArray index 0 because it has not yet been written to. " ..
         "[[node TensorArrayRead (defined at @)]]",
         function() sess:run(tf.TensorArray(tf.float32, 2, {name = "ta"}):read(0)) end)
  end)

  it("gradients and training", function()
    local m = tf.constant({{1, 2}, {3, 4}}, {name = "m"})
    local w = tf.Variable(tf.zeros({3}), {name = "w"})
    case("tf.gradients: ys must be a Tensor or a list of Tensors, got 5 (at @)",
         function() tf.gradients(5, x) end)
    case("tf.gradients: xs must be a Tensor or a list of Tensors, got 5 (at @)",
         function() tf.gradients(x, 5) end)
    case("tf.gradients: grad_ys[1] is float32 of shape (2, 2), but ys[1] is float32 of shape (2, 3) (at @)",
         function() tf.gradients(x * 2, {x}, {m}) end)
    case("tf.gradients: y 'Cast:0' has dtype int32; only float32 and float64 tensors have gradients (tf.cast " ..
         "it first) (at @)",
         function() tf.gradients(tf.cast(x, tf.int32), x) end)
    case("tf.gradients: grad_ys needs one tensor per y (at @)",
         function() tf.gradients({x}, {x}, {x, x}) end)
    case("tf.train.GradientDescentOptimizer: learning_rate is required (at @)",
         function() tf.train.GradientDescentOptimizer() end)
    case("tf.train.GradientDescentOptimizer: learning_rate must be a number or a Tensor, got a (at @)",
         function() tf.train.GradientDescentOptimizer("a") end)
    case("Optimizer:compute_gradients: loss must be a Tensor, got 5 (at @)",
         function() tf.train.GradientDescentOptimizer(0.1):minimize(5) end)
    case("Optimizer:compute_gradients: var_list[1] is not a variable (tf.Variable or tf.get_variable): " ..
         "Tensor(\"x:0\", shape=(2, 3), dtype=float32) (at @)",
         function() tf.train.GradientDescentOptimizer(0.1):minimize(tf.reduce_sum(x), {var_list = {x}}) end)
    case("tf.train.MomentumOptimizer: momentum is required (at @)",
         function() tf.train.MomentumOptimizer(0.1) end)
    case("Optimizer:apply_gradients: No variables provided: apply_gradients takes a non-empty list of {grad, " ..
         "var} pairs (at @)",
         function() tf.train.GradientDescentOptimizer(0.1):apply_gradients({}) end)
    case("tf.clip_by_value: argument clip_value_max: expected a Tensor or a Lua number, boolean, string, " ..
         "nested list or tf.Array, got nil (at @)",
         function() tf.clip_by_value(x, 1) end)
    case("tf.global_norm: t_list must be a list of tensors, got Tensor(\"x:0\", shape=(2, 3), dtype=float32) " ..
         "(at @)",
         function() tf.clip_by_global_norm(x, 1) end)
    case("tf.train.get_global_step: graph must be a tf.Graph, got 5 (at @)",
         function() tf.train.get_or_create_global_step(5) end)
    case("tf.layers.dense: units must be a positive integer, got 0 (at @)",
         function() tf.layers.dense(x, 0) end)
    case("tf.layers.dense: activation must be a function, got 5 (at @)",
         function() tf.layers.dense(x, 3, {activation = 5}) end)
    case("tf.layers.conv2d: inputs must have rank 4, got shape (2, 3) (rank 2) (at @)",
         function() tf.layers.conv2d(x, 3, 3) end)
    case("tf.layers.dropout: rate must be a number in the range [0, 1), got 2 (at @)",
         function() tf.layers.dropout(x, 2) end)
    case("tf.layers.batch_normalization: axis must be an integer in [-2, 2) for inputs of shape (2, 3), got 7 " ..
         "(at @)",
         function() tf.layers.batch_normalization(x, {axis = 7}) end)
    case("tf.layers.dense: inputs must be float32 or float64, got int32 (use tf.cast) (at @)",
         function() tf.layers.dense(tf.constant({{1}}, tf.int32), 2) end)
    assert.is_truthy(w)
  end)

  it("sessions and graphs", function()
    local feed = {{0, 1, 2}, {3, 4, 5}}
    -- a constant of a graph of its own
    local function other_c() return tf.Graph():as_default(function() return tf.constant(1, {name = "c"}) end) end
    case("You must feed a value for placeholder tensor 'x' with dtype float32 and shape [2,3] [[node x " ..
         "(defined at @x)]]",
         function() sess:run(y) end)
    case("Session:run: feeds must be a table {[tensor or \"name:0\"] = value}, got 5 (at @)",
         function() sess:run(y, 5) end)
    case("Cannot feed value of shape (2,) for Tensor 'x:0', which has shape '(2, 3)' [[node x (defined at @x)]]",
         function() sess:run(y, {[x] = {1, 2}}) end)
    case("feed for x:0: tf.array: ragged nested table: expected 3 elements at depth 2, got 2 (at @)",
         function() sess:run(y, {[x] = {{1, 2, 3}, {4, 5}}}) end)
    case("feed for x:0: tf.array: expected numbers, got the string \"abc\" (at @)",
         function() sess:run(y, {[x] = "abc"}) end)
    case("Cannot feed value of dtype int32 for Tensor 'x:0', which has dtype float32; cast the value or feed a " ..
         "matching dtype [[node x (defined at @x)]]",
         function() sess:run(y, {[x] = tf.array(feed, tf.int32)}) end)
    case("Session:run: Cannot interpret feed_dict key 5 as a Tensor (at @)",
         function() sess:run(y, {[5] = 1}) end)
    case("Session:run: The name 'nope:0' refers to a Tensor which does not exist. The operation, 'nope', does " ..
         "not exist in the graph. (at @)",
         function() sess:run(y, {["nope:0"] = 1}) end)
    case("Session:run: Fetch argument 5 has invalid type number: expected a Tensor, an Operation, a name, or a " ..
         "table of them (at @)",
         function() sess:run(5) end)
    case("Session:run: The name 'nope:0' refers to a Tensor which does not exist. The operation, 'nope', does " ..
         "not exist in the graph. (at @)",
         function() sess:run("nope:0") end)
    case("Session:run: The name 'x:7' refers to a Tensor which does not exist. The operation, 'x', exists but " ..
         "only has 1 outputs. (at @)",
         function() sess:run({a = y, b = "x:7"}) end)
    case("Session:run: Fetch argument nil has invalid type nil: expected a Tensor, an Operation, a name, or a " ..
         "table of them (at @)",
         function() sess:run(nil) end)
    case("Session:run: Attempted to use a closed Session: create a new tf.Session to run again (at @)",
         function() local s = tf.Session(); s:close(); s:run(y) end)
    case("Session:make_callable: Attempted to use a closed Session: create a new tf.Session to run again (at @)",
         function() local s = tf.Session(); s:close(); s:make_callable(y) end)
    case("Cannot feed value of shape (1,) for Tensor 'x:0', which has shape '(2, 3)' [[node x (defined at @x)]]",
         function() sess:make_callable(y, {x})({1}) end)
    case("Session:make_callable: feed 5 is not a Tensor (at @)",
         function() sess:make_callable(y, {5}) end)
    case("Session:make_callable: feed_list must be a list of tensors, got Tensor(\"x:0\", shape=(2, 3), " ..
         "dtype=float32) (at @)",
         function() sess:make_callable(y, x) end)
    case("tf.Session(graph_or_options): expected a tf.Graph or an options table, got 5 (at @)",
         function() tf.Session(5) end)
    case("tf.Session: graph must be a tf.Graph, got 5 (at @)",
         function() tf.Session({graph = 5}) end)
    case("tf.Session: unknown option 'bogus' (expected one of: graph, allow_soft_placement, " ..
         "log_device_placement, intra_op_parallelism_threads, elementwise_fusion, device_count) (at @)",
         function() tf.Session({bogus = 1}) end)
    local two_cpus = tf.Session({device_count = {CPU = 2}})
    case("tf.Session: device_count: unknown device type 'TPU' (expected CPU or GPU) (at @)",
         function() tf.Session({device_count = {TPU = 1}}) end)
    case("device_count: CPU must be 0 (the default: 1) to 8, got 9 (at @)",
         function() tf.Session({device_count = {CPU = 9}}) end)
    case("Cannot assign a device for operation 'on_cpu2': Could not satisfy explicit device specification " ..
         "'/device:CPU:2' because no devices matching that specification are registered in this process; " ..
         "available devices: /device:CPU:0, /device:CPU:1 (op 'on_cpu2' created at @)",
         function() two_cpus:run(tf.device("/cpu:2", function() return tf.constant(1, {name = "on_cpu2"}) end)) end)
    case("tf.DeviceSpec: device_index must be a non-negative integer, got -1 (at @)",
         function() tf.DeviceSpec({device_index = -1}) end)
    case("tf.Session: log_device_placement must be a boolean, got yes (at @)",
         function() tf.Session({log_device_placement = "yes"}) end)
    case("tf.Session: elementwise_fusion must be a boolean, got 0 (at @)",
         function() tf.Session({elementwise_fusion = 0}) end)
    case("Session:plan_stats: feed_list must be a list of tensors, got 5 (at @)",
         function() sess:plan_stats(y, 5) end)
    case("Graph is finalized and cannot be modified (creating Const op 'Const') (at @)",
         function() local g = tf.Graph(); g:finalize(); g:as_default(function() tf.constant(2) end) end)
    case("Graph:as_default(fn): fn must be a function, got 5 (at @)",
         function() tf.Graph():as_default(5) end)
    case("Graph:get_tensor_by_name: The name 'x' looks like an (invalid) Operation name, not a Tensor. Tensor " ..
         "names must be of the form \"<op_name>:<output_index>\". (at @)",
         function() tf.get_default_graph():get_tensor_by_name("x") end)
    case("Graph:get_tensor_by_name: The name 'x:5' refers to a Tensor which does not exist. The operation, " ..
         "'x', exists but only has 1 outputs. (at @)",
         function() tf.get_default_graph():get_tensor_by_name("x:5") end)
    case("Graph:get_operation_by_name: The name 'zzz' refers to an Operation not in the graph. (at @)",
         function() tf.get_default_graph():get_operation_by_name("zzz") end)
    case("Add: Tensor(\"x:0\") must be from the same graph as Tensor(\"c:0\"); build all ops of a computation " ..
         "inside one graph (at @)",
         function() local _ = other_c() + x end)
    case("Session:run: Fetch argument Tensor(\"c:0\", shape=(), dtype=float32) is not an element of this " ..
         "session's graph (created at @) (at @)",
         function() sess:run(other_c()) end)
    case("Operation:get_attr: Operation 'x' has no attr named 'nope'. (at @)",
         function() local _ = x.op:get_attr("nope") end)
    case("Cannot assign a device for operation 'on_gpu': Could not satisfy explicit device specification " ..
         "'/device:GPU:0' because no devices matching that specification are registered in this process; " ..
         "available devices: /device:CPU:0; no GPU in this process: " .. tf.config.gpu_status() ..
         " (op 'on_gpu' created at @)",
         function() sess:run(tf.device("/gpu:0", function() return tf.constant(1, {name = "on_gpu"}) end)) end)
  end)

  it("files", function()
    local v = tf.Variable(tf.zeros({2}), {name = "v"})
    sess:run(v.initializer)
    local saver = tf.train.Saver()
    local function csv(path) return tf.data.experimental.CsvDataset(path, {tf.float32, tf.float32}) end
    H.write(dir .. "/corrupt", "\255\255\255\255\255\255\255\255garbage")
    H.write(dir .. "/short", "abc")
    H.write(dir .. "/graph.json", "{not json")
    H.write(dir .. "/other.json", '{"ops": 5}')
    local header = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }"
    header = header .. string.rep(" ", 63 - (10 + #header) % 64) .. "\n"
    H.write(dir .. "/half.npy", "\147NUMPY\1\0" .. string.char(#header, 0) .. header .. string.rep("\0", 4))
    H.write(dir .. "/bad.csv", "1,2\n3,x\n")
    case("tf.train.Saver: var_list[1] is not a variable: 5 (at @)",
         function() tf.train.Saver({5}) end)
    case("Saver:save: NotFound: cannot write $/no/such/m: the directory $/no/such does not exist or is not " ..
         "writable (at @)",
         function() saver:save(sess, dir .. "/no/such/m") end)
    case("Saver:save(sess, path): a session is required (at @)",
         function() saver:save(5, dir .. "/m") end)
    case("Saver:save: global_step must be an integer (it names the file path-<step>), got 1.5 (at @)",
         function() saver:save(sess, dir .. "/m", {global_step = 1.5}) end)
    case("Saver:restore: NotFound: Failed to find any matching files for $/missing (at @)",
         function() saver:restore(sess, dir .. "/missing") end)
    case("Saver:restore: DataLoss: $/corrupt is not a valid checkpoint (truncated or corrupted?): the header " ..
         "length is 18446744073709551615 bytes but only 7 bytes follow it (at @)",
         function() saver:restore(sess, dir .. "/corrupt") end)
    case("Saver:restore: DataLoss: $/short is not a valid checkpoint (truncated or corrupted?): the file has 3 " ..
         "bytes, fewer than the 8-byte header length (at @)",
         function() saver:restore(sess, dir .. "/short") end)
    case("Saver:restore: FailedPrecondition: $ is a directory, not a checkpoint file; use " ..
         "tf.train.latest_checkpoint(dir) for the newest checkpoint in it (at @)",
         function() saver:restore(sess, dir) end)
    case("tf.train.load_variable: NotFound: Failed to find any matching files for $/missing (at @)",
         function() tf.train.load_variable(dir .. "/missing", "v") end)
    case("tf.train.write_graph: expected a tf.Graph, got 5 (at @)",
         function() tf.train.write_graph(5, dir .. "/g") end)
    case("tf.train.write_graph: NotFound: cannot write $/no/such/g: the directory $/no/such does not exist or " ..
         "is not writable (at @)",
         function() tf.train.write_graph(tf.get_default_graph(), dir .. "/no/such/g") end)
    case("tf.train.import_graph: NotFound: graph file $/missing does not exist (at @)",
         function() tf.train.import_graph(dir .. "/missing") end)
    case("tf.train.import_graph: graph file $/graph.json is not valid JSON: string or '}' expected near 'not' " ..
         "(line 1, column 4) (at @)",
         function() tf.train.import_graph(dir .. "/graph.json") end)
    case("tf.train.import_graph: graph file $/other.json is not a moonflow graph (format 'moonflow.graph') (at " ..
         "@)",
         function() tf.train.import_graph(dir .. "/other.json") end)
    case("tf.io.read_npy: cannot open '$/missing.npy': $/missing.npy: No such file or directory (at @)",
         function() tf.io.read_npy(dir .. "/missing.npy") end)
    case("tf.io.read_npy: '$/half.npy' holds dtype '<f2'; supported: float32 (<f4), float64 (<f8), int32 " ..
         "(<i4), int64 (<i8), uint8 (|u1), bool (|b1), complex64 (<c8), complex128 (<c16) (at @)",
         function() tf.io.read_npy(dir .. "/half.npy") end)
    case("tf.io.write_npy: cannot write '$/no/such/a.npy': $/no/such/a.npy: No such file or directory (at @)",
         function() tf.io.write_npy(dir .. "/no/such/a.npy", tf.array({1})) end)
    case("tf.io.write_npy(path, array): path must be a string (at @)",
         function() tf.io.write_npy(5, tf.array({1})) end)
    case("CsvDataset: cannot open '$/missing.csv': no such file or not readable (at @)",
         function() tf.data.experimental.CsvDataset(dir .. "/missing.csv", {tf.float32}) end)
    case("CsvDataset: $/bad.csv line 2, column 1: 'x' is not a number (at @)",
         function() local n = csv(dir .. "/bad.csv"):make_one_shot_iterator():get_next(); sess:run(n); sess:run(n) end)
  end)

  it("datasets", function()
    local Dataset = tf.data.Dataset
    case("Dataset.from_tensor_slices: components have different first dimensions (2 and 3); every component " ..
         "needs one row per element (at @)",
         function() Dataset.from_tensor_slices({tf.constant({1, 2}), tf.constant({1, 2, 3})}) end)
    case("Dataset.from_tensor_slices: component 1 is a number; slicing needs an array of rank >= 1 (at @)",
         function() Dataset.from_tensor_slices(5) end)
    case("Dataset:batch: batch_size must be a positive integer, got 0 (at @)",
         function() Dataset.range(3):batch(0) end)
    case("Dataset:map: expected a function (at @)",
         function() Dataset.range(3):map(5) end)
    case("Dataset:shuffle: buffer_size must be a positive integer, got -1 (at @)",
         function() Dataset.range(3):shuffle(-1) end)
    case("Dataset:take: expected an integer count, got a (at @)",
         function() Dataset.range(3):take("a") end)
    case("Dataset:filter: the predicate must return a scalar bool tensor, got int64 of shape [] (use tf.equal, " ..
         "tf.less, … and reduce to a scalar) (at @)",
         function() Dataset.range(3):filter(function(e) return e end) end)
    case("OutOfRangeError: End of sequence: iterator 'OneShotIterator' (created at @) has no more elements; a " ..
         "one-shot iterator does not restart: use ds:make_initializable_iterator() and run it.initializer " ..
         "for another epoch, or ds:repeat_() (at @)",
         function() local n = Dataset.range(1):make_one_shot_iterator():get_next(); sess:run(n); sess:run(n) end)
  end)

  it("debugging", function()
    local feed = {[x] = {{1, 2, 3}, {4, 5, 6}}}
    local one = tf.constant(1, {name = "one"})
    case("bad : Tensor had NaN values [[node cn (defined at @)]]",
         function() sess:run(tf.debugging.check_numerics(tf.constant(0 / 0), "bad", {name = "cn"})) end)
    case("assertion failed: [Condition x == y did not hold element-wise:] [x (one:0) = ] [1] [y (two:0) = ] " ..
         "[2] [[node eq/Assert (defined at @)]]",
         function() sess:run(tf.assert_equal(one, tf.constant(2, {name = "two"}), {name = "eq"})) end)
    case("tf.assert_rank: Tensor x:0 must have rank 3. Received rank 2, shape (2, 3) (at @)",
         function() tf.assert_rank(x, 3) end)
    case("tf.Print: message must be a string, got 5 (at @)",
         function() tf.Print(x, {x}, 5) end)
    case("tf.lua_func: fn must be a function, got 5 (at @)",
         function() tf.lua_func(5, {x}, {tf.float32}) end)
    case("LuaFunc: the Lua function of tf.lua_func returned a bad value: output 1 is missing: return a " ..
         "tf.Array, a number or a nested table of numbers (at @) [[node LuaFunc (defined at @)]]",
         function() sess:run(tf.lua_func(function() return 1 end, {x}, {tf.float32, tf.float32}), feed) end)
  end)

  it("arrays", function()
    local a = tf.array({1, 2})
    case("Array:get/set: index 5 is out of range for dimension 0 of size 2 (at @)",
         function() a:get(5) end)
    case("Array:get/set: expected 1 indices, got 2 (at @)",
         function() a:get(0, 0) end)
    case("Array:set: cannot convert 'string' to 'float': the value must be a number (at @)",
         function() a:set(0, "a") end)
    case("tf.Array.from_pointer: expected FFI cdata (an array, VLA or pointer), got a number (at @)",
         function() tf.Array.from_pointer(5, {2}, tf.float32) end)
    case("tf.Array.from_pointer: float [2] holds 8 bytes, but shape {3} of float32 needs 12 (at @)",
         function() tf.Array.from_pointer(ffi.new("float[2]"), {3}, tf.float32) end)
    case("a float32 value of shape [140737488355328] is too large to allocate [[node huge (defined at @)]]",
         function() sess:run(tf.zeros({2 ^ 47}, {name = "huge"})) end)
  end)

  it("linear algebra", function()
    case("inv: input must be a square matrix or a batch of them, got shape [2,3] (at @)",
         function() tf.matrix_inverse(x, {name = "inv"}) end)
    case("det: input must have rank >= 2 (a matrix or a batch of them), got shape [3] (at @)",
         function() tf.linalg.det({1, 2, 3}, {name = "det"}) end)
    case("inv: Input is not invertible. [[node inv (defined at @)]]",
         function() sess:run(tf.linalg.inv(tf.zeros({2, 2}), {name = "inv"})) end)
    case("chol: Cholesky decomposition was not successful. The input might not be valid. (its leading minor of " ..
         "order 1 is not positive definite) (the matrix at batch index [1]) [[node chol (defined at @)]]",
         function() sess:run(tf.cholesky(tf.stack({tf.eye(2), -tf.eye(2)}), {name = "chol"})) end)
    case("tf.einsum: label 'j' has size 3 in one operand and 2 in another (at @)",
         function() tf.einsum("ij,jk->ik", x, x) end)
    case("tf.matrix_band_part: num_lower must be an integer, got 0.5 (at @)",
         function() tf.matrix_band_part(x, 0.5, 0) end)
  end)

  it("images and sparse sums", function()
    case("png: invalid PNG data (12 bytes): the data ends too early (truncated) [[node png (defined at @)]]",
         function() sess:run(tf.image.decode_png("\137PNG\r\n\26\n\0\0\0\13", {name = "png"})) end)
    case("jpeg: invalid JPEG data (4 bytes): Not a JPEG file: starts with 0x6e 0x6f [[node jpeg (defined at @)]]",
         function() sess:run(tf.image.decode_jpeg("nope", {name = "jpeg"})) end)
    case("image: Unknown image file format (4 bytes): PNG or JPEG required [[node image (defined at @)]]",
         function() sess:run(tf.image.decode_image("nope", {name = "image"})) end)
    case("EncodePng: image has dtype float32, but EncodePng takes only uint8; use tf.cast to convert (at @)",
         function() tf.image.encode_png(x) end)
    case("EncodeJpeg: quality must be in [0,100], got -1 (at @)",
         function() tf.image.encode_jpeg(tf.zeros({1, 1, 1}, tf.uint8), {quality = -1}) end)
    case("tf.image.random_crop: Need value.shape >= size, got (2, 3) [3, 3] (at @)",
         function() tf.image.random_crop(x, {3, 3}) end)
    local a = tf.SparseTensor({{0, 0}}, {1}, {2, 3})
    case("sum: Operands' shapes do not match: got 3 and 2 for dimension 1 (at @)",
         function() tf.sparse.add(a, tf.SparseTensor({{0, 0}}, {1}, {2, 2}), {name = "sum"}) end)
  end)
end)
