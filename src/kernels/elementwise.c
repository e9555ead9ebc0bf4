/* elementwise.c — running map and zip loop functions over a whole tensor,
 * split over the session's threads when it is large. */
#include "kernels/elementwise.h"
#include "kernels/parallel.h"

#include <stdatomic.h>

typedef struct elementwise_job {
  mf_map_fn map;
  mf_zip_fn zip;
  const char *a, *b;
  bool a_steps, b_steps;
  char *y;
  size_t a_size, b_size, y_size;
  double alpha;
  atomic_bool bad;
} elementwise_job;

static void elementwise_chunk(void *arg, int64_t begin, int64_t end) {
  elementwise_job *j = arg;
  const char *a = j->a + (j->a_steps ? begin * (int64_t)j->a_size : 0);
  char *y = j->y + begin * (int64_t)j->y_size;
  if (j->map) {
    j->map(a, y, end - begin, j->alpha);
    return;
  }
  const char *b = j->b + (j->b_steps ? begin * (int64_t)j->b_size : 0);
  if (j->zip(a, j->a_steps, b, j->b_steps, y, end - begin, j->alpha))
    atomic_store_explicit(&j->bad, true, memory_order_relaxed);
}

/* A tensor of at most one chunk runs its loop here directly: a scalar op in a
 * loop body costs the loop call and little more. */
void mf_map_run(mf_kernel_ctx *ctx, mf_map_fn fn, const mf_tensor *x, mf_tensor *y, double alpha) {
  if (y->size <= MF_PARALLEL_GRAIN) {
    fn(x->data, y->data, y->size, alpha);
    return;
  }
  elementwise_job j = {.map = fn, .a = x->data, .a_steps = true, .y = y->data,
                       .a_size = mf_dtype_size(x->dtype), .y_size = mf_dtype_size(y->dtype), .alpha = alpha};
  mf_parallel_for(ctx, y->size, 1, elementwise_chunk, &j);
}

bool mf_zip_run(mf_kernel_ctx *ctx, mf_zip_fn fn, const mf_tensor *a, bool a_steps, const mf_tensor *b, bool b_steps,
                mf_tensor *y, double alpha) {
  if (y->size <= MF_PARALLEL_GRAIN) return fn(a->data, a_steps, b->data, b_steps, y->data, y->size, alpha);
  elementwise_job j = {.zip = fn, .a = a->data, .a_steps = a_steps, .b = b->data, .b_steps = b_steps,
                       .y = y->data, .a_size = mf_dtype_size(a->dtype), .b_size = mf_dtype_size(b->dtype),
                       .y_size = mf_dtype_size(y->dtype), .alpha = alpha};
  atomic_init(&j.bad, false);
  mf_parallel_for(ctx, y->size, 1, elementwise_chunk, &j);
  return atomic_load(&j.bad);
}

void mf_bcast_nest_of(const mf_tensor *const in[2], const mf_tensor *z, mf_bcast_nest *nest) {
  int64_t stride[2][MF_MAX_RANK];
  for (int k = 0; k < 2; k++) {
    int64_t s = 1;
    for (int d = z->rank - 1; d >= 0; d--) {
      int id = in[k]->rank - z->rank + d;
      int64_t dim = id >= 0 ? in[k]->dims[id] : 1;
      stride[k][d] = dim == 1 ? 0 : s;
      s *= dim;
    }
  }
  nest->rank = 0;
  for (int d = 0; d < z->rank; d++) {
    if (z->dims[d] == 1) continue;
    int m = nest->rank;
    if (m > 0 && nest->stride[0][m - 1] == stride[0][d] * z->dims[d] &&
        nest->stride[1][m - 1] == stride[1][d] * z->dims[d]) {
      nest->dims[m - 1] *= z->dims[d];
      nest->stride[0][m - 1] = stride[0][d];
      nest->stride[1][m - 1] = stride[1][d];
    } else {
      nest->dims[m] = z->dims[d];
      nest->stride[0][m] = stride[0][d];
      nest->stride[1][m] = stride[1][d];
      nest->rank = m + 1;
    }
  }
}
