/* tf_graphdef_ops.c — the table of ops of TensorFlow's GraphDef, both ways
 * (tf_graphdef_write.c, tf_graphdef_read.c). Op types and attributes differ
 * where moonflow keeps as an attribute what TensorFlow takes as a constant
 * input (reduce_sum's axis, transpose's perm), where TensorFlow records
 * dtypes moonflow infers (T, Tidx), and in a few names: one row per op says
 * it (mf_gd_row in tf_graphdef.h); the few TensorFlow ops moonflow builds
 * from others (LogSoftmax, FusedBatchNorm) have an expansion instead, and the
 * ops of a control flow v1 loop are read as one While. moonflow's own ops
 * that a training graph holds are written under names saying so
 * ("Moonflow..."), so TensorBoard shows the graph and moonflow reads it back. */
#include "io/tf_graphdef.h"
#include "core/memory.h"

#include <stdio.h>
#include <string.h>

#define UNARY(op) {#op, #op, "T=0", "", "", NULL},
#define BINARY(op) {#op, #op, "T=0", "", "", NULL},
#define REDUCE(op, types) {#op, #op, types, "axis:reduction_indices", "keepdims:keep_dims", NULL},
#define GRAD(op) {#op, #op, "T=0", "", "", NULL},
static const mf_gd_row OPS[] = {
    {"Const", "Const", "dtype=out", "", "", NULL},
    {"Placeholder", "Placeholder", "", "", "", NULL},
    {"Identity", "Identity", "T=0", "", "", NULL},
    {"StopGradient", "StopGradient", "T=0", "", "", NULL},
    {"NoOp", "NoOp", "", "", "", NULL},
    UNARY(Neg) UNARY(Abs) UNARY(Sign) UNARY(Square) UNARY(Sqrt) UNARY(Rsqrt) UNARY(Exp) UNARY(Log)
    UNARY(Log1p) UNARY(Sin) UNARY(Cos) UNARY(Tan) UNARY(Asin) UNARY(Acos) UNARY(Atan) UNARY(Sinh)
    UNARY(Cosh) UNARY(Asinh) UNARY(Acosh) UNARY(Atanh) UNARY(Erf) UNARY(Erfc) UNARY(Expm1)
    UNARY(Reciprocal) UNARY(Tanh) UNARY(Sigmoid) UNARY(Floor) UNARY(Ceil) UNARY(Round)
    UNARY(Relu) UNARY(Relu6) UNARY(Elu) UNARY(Selu) UNARY(Softplus) UNARY(Softsign)
    {"LeakyRelu", "LeakyRelu", "T=0", "", "", NULL},
    {"Softmax", "Softmax", "T=0", "", "", NULL},
    {"LogicalNot", "LogicalNot", "", "", "", NULL},
    {"Add", "AddV2", "T=0", "", "", NULL},
    {"Add", "Add", "T=0", "", "", NULL},
    {"Div", "Div", "T=0", "", "", NULL},
    {"Div", "RealDiv", "T=0", "", "", NULL},
    {"Mod", "FloorMod", "T=0", "", "", NULL},
    {"TruncateMod", "Mod", "T=0", "", "", NULL},
    BINARY(Sub) BINARY(Mul) BINARY(FloorDiv) BINARY(TruncateDiv) BINARY(Pow) BINARY(SquaredDifference)
    BINARY(Atan2) BINARY(Maximum) BINARY(Minimum) BINARY(Equal) BINARY(NotEqual) BINARY(Less)
    BINARY(LessEqual) BINARY(Greater) BINARY(GreaterEqual)
    {"LogicalAnd", "LogicalAnd", "", "", "", NULL},
    {"LogicalOr", "LogicalOr", "", "", "", NULL},
    {"AddN", "AddN", "T=0 N=n", "", "", NULL},
    {"MatMul", "MatMul", "T=0", "", "", NULL},
    {"BiasAdd", "BiasAdd", "T=0", "", "", NULL},
    {"Conv2D", "Conv2D", "T=0", "", ":use_cudnn_on_gpu :explicit_paddings", NULL},
    {"DepthwiseConv2dNative", "DepthwiseConv2dNative", "T=0", "", ":explicit_paddings", NULL},
    {"DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropInput", "T=1", "", ":explicit_paddings", NULL},
    {"DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropFilter", "T=0", "", ":explicit_paddings",
     NULL},
    {"LRN", "LRN", "T=0", "", "", NULL},
    {"LRNGrad", "LRNGrad", "T=0", "", "", NULL},
    {"MaxPool", "MaxPool", "T=0", "", "", NULL},
    {"AvgPool", "AvgPool", "T=0", "", "", NULL},
    REDUCE(Sum, "T=0 Tidx=1") REDUCE(Mean, "T=0 Tidx=1") REDUCE(Max, "T=0 Tidx=1") REDUCE(Min, "T=0 Tidx=1")
    REDUCE(Prod, "T=0 Tidx=1") REDUCE(Any, "Tidx=1") REDUCE(All, "Tidx=1")
    {"ArgMax", "ArgMax", "T=0 Tidx=1", "axis:dimension", "", NULL},
    {"ArgMin", "ArgMin", "T=0 Tidx=1", "axis:dimension", "", NULL},
    {"Cast", "Cast", "SrcT=0", "", ":Truncate", NULL},
    {"Reshape", "Reshape", "T=0 Tshape=1", "", "", NULL},
    {"Shape", "Shape", "T=0 out_type=out!", "", "", NULL},
    {"Size", "Size", "T=0 out_type=out!", "", "", NULL},
    {"Rank", "Rank", "T=0", "", "", NULL},
    {"Fill", "Fill", "T=1 index_type=0", "", "", NULL},
    {"ZerosLike", "ZerosLike", "T=0", "", "", NULL},
    {"OnesLike", "OnesLike", "T=0", "", "", NULL},
    {"Range", "Range", "Tidx=0", "", "", NULL},
    {"Concat", "ConcatV2", "T=0 N=n Tidx=-1", "axis:axis", "", NULL},
    {"Pack", "Pack", "T=0 N=n", "", "", NULL},
    {"Unpack", "Unpack", "T=0", "", "", NULL},
    {"SplitV", "SplitV", "T=0 Tlen=1", "axis:split_dim", "", NULL},
    {"Squeeze", "Squeeze", "T=0", "", "axis:squeeze_dims", NULL},
    {"ExpandDims", "ExpandDims", "T=0 Tdim=1", "axis:dim", "", NULL},
    {"Transpose", "Transpose", "T=0 Tperm=1", "perm:perm", "", NULL},
    {"Pad", "Pad", "T=0 Tpaddings=1", "paddings:paddings:2", "mode=CONSTANT:", NULL},
    {"Slice", "Slice", "T=0 Index=1", "begin:begin size:size", "", NULL},
    {"StridedSlice", "StridedSlice", "T=0 Index=1", "begin:begin end:end strides:strides", "", NULL},
    {"Tile", "Tile", "T=0 Tmultiples=1", "multiples:multiples", "", NULL},
    {"Select", "SelectV2", "T=1", "", "", NULL},
    {"Gather", "GatherV2", "Tparams=0 Tindices=1 Taxis=2", "axis:axis", "", NULL},
    {"OneHot", "OneHot", "T=out TI=0", "", "", NULL},
    {"VariableV2", "VariableV2", "dtype=out! shape=outshape!", "", "", NULL},
    {"Assign", "Assign", "T=0", "", "", NULL},
    {"ScalarSummary", "ScalarSummary", "T=1", "", "", NULL},
    {"HistogramSummary", "HistogramSummary", "T=1", "", "", NULL},
    {"ImageSummary", "ImageSummary", "T=1", "", ":bad_color", NULL},
    {"TensorSummaryV2", "TensorSummaryV2", "T=1", "", "", NULL},
    {"MergeSummary", "MergeSummary", "N=n", "", "", NULL},
    /* what gradients, initializers and optimizers build: a training graph (TensorFlow's ops, inputs in its
     * order; a Conv2D's backprops take the same renames as it) */
    {"RandomUniform", "RandomUniform", "T=0", "", "", NULL},
    {"RandomNormal", "RandomStandardNormal", "T=0", "", "", NULL},
    {"TruncatedNormal", "TruncatedNormal", "T=0", "", "", NULL},
    {"BroadcastTo", "BroadcastTo", "T=0 Tidx=1", "", "", NULL},
    {"SoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits", "T=0", "", "", NULL},
    {"SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", "T=0 Tlabels=1", "", "", NULL},
    GRAD(ReluGrad) GRAD(Relu6Grad) GRAD(EluGrad) GRAD(SeluGrad) GRAD(SoftplusGrad) GRAD(SoftsignGrad)
    GRAD(LeakyReluGrad) GRAD(BiasAddGrad) GRAD(MaxPoolGrad) GRAD(MaxPoolGradGrad)
    {"AvgPoolGrad", "AvgPoolGrad", "T=1", "", "", NULL},
    {"Conv2DBackpropInput", "Conv2DBackpropInput", "T=1", "", ":use_cudnn_on_gpu :explicit_paddings", NULL},
    {"Conv2DBackpropFilter", "Conv2DBackpropFilter", "T=0", "", ":use_cudnn_on_gpu :explicit_paddings", NULL},
    {"ApplyGradientDescent", "ApplyGradientDescent", "T=0", "", ":use_locking", NULL},
    {"ApplyMomentum", "ApplyMomentum", "T=0", "", ":use_locking", NULL},
    {"ApplyAdam", "ApplyAdam", "T=0", "", ":use_locking", NULL},
    {"ApplyRMSProp", "ApplyRMSProp", "T=0", "", ":use_locking", NULL},
    {"ApplyCenteredRMSProp", "ApplyCenteredRMSProp", "T=0", "", ":use_locking", NULL},
    {"ApplyAdagrad", "ApplyAdagrad", "T=0", "", ":use_locking", NULL},
    /* moonflow's own gradient helpers, under names that say so (TensorBoard shows them; TensorFlow has no
     * such op): SumToShape sums a broadcast gradient back to an input's shape */
    {"SumToShape", "MoonflowSumToShape", "T=0 Tshape=1", "", "", NULL},
    /* control flow v1: a loop's frame becomes one While (loops_find, loop_build) */
    {NULL, "Enter", "", "", "", NULL},
    {NULL, "Merge", "", "", "", NULL},
    {NULL, "Switch", "", "", "", NULL},
    {NULL, "NextIteration", "", "", "", NULL},
    {NULL, "LoopCond", "", "", "", NULL},
    {NULL, "Exit", "", "", "", NULL},
    {NULL, "LogSoftmax", "", "", "", mf_gd_expand_log_softmax},
    {NULL, "FusedBatchNorm", "", "", "", mf_gd_expand_batch_norm},
    {NULL, "FusedBatchNormV2", "", "", "", mf_gd_expand_batch_norm},
    {NULL, "FusedBatchNormV3", "", "", "", mf_gd_expand_batch_norm},
};
#undef UNARY
#undef BINARY
#undef REDUCE
#undef GRAD

const mf_gd_row *mf_gd_row_for_mf(const char *type) {
  for (size_t i = 0; i < MF_ARRAY_LEN(OPS); i++)
    if (OPS[i].mf && strcmp(OPS[i].mf, type) == 0) return &OPS[i];
  return NULL;
}

const mf_gd_row *mf_gd_row_for_tf(const char *type) {
  for (size_t i = 0; i < MF_ARRAY_LEN(OPS); i++)
    if (strcmp(OPS[i].tf, type) == 0) return &OPS[i];
  return NULL;
}

/* The next space-separated word of *list into word (at most size - 1 bytes); false at the end. */
bool mf_gd_next_word(const char **list, char *word, size_t size) {
  const char *p = *list;
  while (*p == ' ') p++;
  size_t n = strcspn(p, " ");
  if (n == 0) return false;
  snprintf(word, size, "%.*s", (int)n, p);
  *list = p + n;
  return true;
}

/* Whether word "a:b" or "a=v:b" has side (0: before the colon, without "=v"; 1: after it) equal to name. */
bool mf_gd_side_is(const char *word, int side, const char *name) {
  const char *colon = strchr(word, ':');
  if (!colon) return false;
  if (side == 1) return strcmp(colon + 1, name) == 0;
  size_t n = strcspn(word, "=:");
  return n == strlen(name) && strncmp(word, name, n) == 0;
}

int mf_gd_count_words(const char *list) {
  char word[64];
  int n = 0;
  while (mf_gd_next_word(&list, word, sizeof word)) n++;
  return n;
}

/* dtypes ------------------------------------------------------------------------------ */
static const struct { mf_dtype mf; Tensorflow__DataType tf; } DTYPES[] = {
    {MF_FLOAT32, TENSORFLOW__DATA_TYPE__DT_FLOAT}, {MF_FLOAT64, TENSORFLOW__DATA_TYPE__DT_DOUBLE},
    {MF_INT32, TENSORFLOW__DATA_TYPE__DT_INT32},   {MF_INT64, TENSORFLOW__DATA_TYPE__DT_INT64},
    {MF_BOOL, TENSORFLOW__DATA_TYPE__DT_BOOL},     {MF_UINT8, TENSORFLOW__DATA_TYPE__DT_UINT8},
    {MF_STRING, TENSORFLOW__DATA_TYPE__DT_STRING},
};

Tensorflow__DataType mf_gd_tf_dtype(mf_dtype t) {
  for (size_t i = 0; i < MF_ARRAY_LEN(DTYPES); i++)
    if (DTYPES[i].mf == t) return DTYPES[i].tf;
  return TENSORFLOW__DATA_TYPE__DT_INVALID;
}

bool mf_gd_mf_dtype(Tensorflow__DataType t, mf_dtype *out) {
  for (size_t i = 0; i < MF_ARRAY_LEN(DTYPES); i++)
    if (DTYPES[i].tf == t) return *out = DTYPES[i].mf, true;
  return false;
}

/* TensorFlow's name of dtype t ("DT_HALF"), or its number. */
const char *mf_gd_dtype_name(Tensorflow__DataType t, char *buf, size_t size) {
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&tensorflow__data_type__descriptor, (int)t);
  if (v) return v->name;
  snprintf(buf, size, "DataType %d", (int)t);
  return buf;
}

/* Counting op types --------------------------------------------------------------------- */
/* "Type (count), ..." of the op types in types[0..n) (n_kinds distinct, in first-seen order). */
void mf_gd_list_types(char *out, size_t size, const char *const *types, const int *counts, int n) {
  size_t at = 0;
  out[0] = '\0';
  for (int i = 0; i < n && at < size; i++)
    at += (size_t)snprintf(out + at, size - at, "%s%s (%d)", i ? ", " : "", types[i], counts[i]);
}

/* Counts type into the first-seen list types/counts (n of them); false when out of memory. */
bool mf_gd_count_type(const char ***types, int **counts, int *n, const char *type) {
  for (int i = 0; i < *n; i++)
    if (strcmp((*types)[i], type) == 0) return (*counts)[i]++, true;
  const char **t = mf_realloc(*types, (size_t)(*n + 1) * sizeof *t);
  if (t) *types = t;
  int *c = t ? mf_realloc(*counts, (size_t)(*n + 1) * sizeof *c) : NULL;
  if (!c) return false;
  *counts = c;
  (*types)[*n] = type, (*counts)[(*n)++] = 1;
  return true;
}
