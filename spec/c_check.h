/* c_check.h — what the C checks (async_check.c, threads_check.c, fuse_check.c) share: a
 * CHECK that counts failures from any thread, and builders of small graphs. */
#ifndef MF_SPEC_C_CHECK_H
#define MF_SPEC_C_CHECK_H

#include "moonflow.h"

#include <stdio.h>

static _Atomic int failures = 0;
#define CHECK(c)                                                            \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      failures++;                                                           \
    }                                                                       \
  } while (0)

/* A Const op holding v (which the caller keeps). */
static inline mf_op *constant(mf_graph *g, mf_tensor *v, mf_status *s) {
  mf_op_desc *d = mf_op_desc_new(g, "Const", NULL);
  mf_op_desc_set_attr_tensor(d, "value", v);
  mf_op_desc_set_attr_type(d, "dtype", mf_tensor_dtype(v));
  return mf_op_desc_finish(d, s);
}

/* An op of `type` on inputs a (and b unless its op is NULL). */
static inline mf_op *op_on(mf_graph *g, const char *type, mf_output a, mf_output b, mf_status *s) {
  mf_op_desc *d = mf_op_desc_new(g, type, NULL);
  mf_op_desc_add_input(d, a);
  if (b.op) mf_op_desc_add_input(d, b);
  return mf_op_desc_finish(d, s);
}

#endif
