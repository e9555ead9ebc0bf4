/* variables.h — variable state shared by op files (state.c). */
#ifndef MF_OPS_VARIABLES_H
#define MF_OPS_VARIABLES_H

#include "graph/op_def.h"

/* For a ref input k naming a variable that the kernel updates in place: the
 * variable's value, writable (copied first when shared: the copy-on-write rule
 * of state.c). NULL with the status set when the variable has no value
 * ("Attempting to use uninitialized value ...") or memory runs out. */
mf_tensor *mf_kernel_ref_writable(mf_kernel_ctx *ctx, int k);

#endif
