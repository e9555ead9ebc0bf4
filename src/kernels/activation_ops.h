/* activation_ops.h — the activations of ops/nn.c and their gradient ops as
 * tables of element expressions: the CPU loops (ops/nn.c) and the CUDA
 * kernels (src/cuda/activations.cu) are both generated from these lines.
 * Pure macros and enums, for C and CUDA C++ alike: the includer defines
 * CONST(x, c) (c in x's floating type), MF_VMATH(fn, x) and MF_MATH(fn, x)
 * (the math function fn for x's type) and MF_SIGMOID(x). */
#ifndef MF_KERNELS_ACTIVATION_OPS_H
#define MF_KERNELS_ACTIVATION_OPS_H

#define MF_SELU_ALPHA 1.6732632423543772848170429916717
#define MF_SELU_SCALE 1.0507009873554804934193349852946

/* X(name, dtypes, gradient op, what the gradient op reads (IN: the input x,
 *   OUT: the output), expression of the element x and the attr alpha).
 * NaN passes through every activation. Softplus is max(x, 0) + log1p(exp(-|x|)),
 * exact and finite for any x. */
#define MF_ACTIVATIONS(X)                                                                          \
  X(Relu, SIGNED, ReluGrad, OUT, x < 0 ? 0 : x)                                                    \
  X(Relu6, SIGNED, Relu6Grad, OUT, x < 0 ? 0 : x > 6 ? 6 : x)                                      \
  X(LeakyRelu, FLOAT, LeakyReluGrad, IN, x > 0 ? x : alpha * x)                                    \
  X(Elu, FLOAT, EluGrad, OUT, x < 0 ? MF_VMATH(expm1, x)(x) : x)                                    \
  X(Selu, FLOAT, SeluGrad, OUT,                                                                    \
    x < 0 ? CONST(x, MF_SELU_SCALE * MF_SELU_ALPHA) * MF_VMATH(expm1, x)(x) : CONST(x, MF_SELU_SCALE) * x) \
  X(Softplus, FLOAT, SoftplusGrad, IN, (x > 0 ? x : 0) + MF_VMATH(log1p, x)(MF_VMATH(exp, x)(-MF_MATH(fabs, x)(x)))) \
  X(Softsign, FLOAT, SoftsignGrad, IN, x / (1 + MF_MATH(fabs, x)(x)))

/* X(name, dtypes, second-derivative term, expression of the incoming gradient
 * g and the element v of the tensor the forward rule passed). Each is linear
 * in g; the term is the derivative with respect to v (FLAT where it is zero
 * almost everywhere, so no gradient flows there). */
#define MF_ACTIVATION_GRADS(X)                                                                     \
  X(ReluGrad, SIGNED, FLAT, v > 0 ? g : 0)                                                         \
  X(Relu6Grad, SIGNED, FLAT, v > 0 && v < 6 ? g : 0)                                               \
  X(LeakyReluGrad, FLOAT, FLAT, v > 0 ? g : alpha * g)                                             \
  X(EluGrad, FLOAT, BELOW0, v < 0 ? g * (v + 1) : g)                                               \
  X(SeluGrad, FLOAT, BELOW0, v < 0 ? g * (v + CONST(v, MF_SELU_SCALE * MF_SELU_ALPHA)) : g * CONST(v, MF_SELU_SCALE)) \
  X(SoftplusGrad, FLOAT, SOFTPLUS, g * MF_SIGMOID(v))                                              \
  X(SoftsignGrad, FLOAT, SOFTSIGN, g / ((1 + MF_MATH(fabs, v)(v)) * (1 + MF_MATH(fabs, v)(v))))

/* Their numbers, in table order: how the GPU glue names one to the backend. */
#define MF_ACTIVATION_NUMBER_(name, ...) MF_ACT_##name,
enum mf_activation { MF_ACTIVATIONS(MF_ACTIVATION_NUMBER_) MF_ACTIVATION_GRADS(MF_ACTIVATION_NUMBER_) MF_ACT_COUNT };

#endif
