/* fuse.h — fusion of elementwise ops (fuse.c): at plan build, groups of
 * neighbouring elementwise steps (mf_op_def.element_loop: math, casts,
 * activations) become one step that makes one pass over the data. A group's
 * program is generated from the graph: an instruction per op, calling the
 * op's own element loop on a tile of elements held in registers (tile
 * buffers), so each element sees the same float operations in the same order
 * as in the unfused run, and the values that only the group reads are never
 * materialised. Reductions, matmul, convolution and every other op are
 * boundaries. For exec/ files only. */
#ifndef MF_EXEC_FUSE_H
#define MF_EXEC_FUSE_H

#include "exec/exec.h"

/* Whether st runs one element loop (*loop set): a CPU kernel of an
 * elementwise op of one or two value inputs and one output, nothing fed, no
 * variable state. */
bool mf_step_element_loop(const mf_step *st, mf_element_loop *loop);
/* Groups p's steps, before liveness is computed: moves each group's steps
 * together (to where its last step was) and gives the group's first step its
 * program (mf_step.fused, owned by the step). Errors only when out of memory. */
mf_code mf_plan_fuse(mf_plan *p, mf_status *s);
/* Runs the group whose first step is `first` in one pass over its elements,
 * split over the session's threads, then pools the values that die in it.
 * False, having changed nothing, when this run's shapes call for the group's
 * steps to run one by one (a shape known only now broadcasts inside the
 * group, inference fails, a caller's buffer does not fit): the executor then
 * runs them as it would unfused, errors included. True otherwise; on error
 * with s set as the failing op's own step would set it and *failed that op
 * (whose name and line the caller appends). */
bool mf_fused_run(mf_run *r, const mf_step *first, const mf_op **failed, mf_status *s);
/* Whether step j of the group keeps its value in tile buffers only (only
 * the group reads it): then it has a buffer only when the steps run one by one. */
bool mf_fused_in_tiles(const mf_fused *f, int j);
/* The number of steps (ops) of a group. */
int mf_fused_num_steps(const mf_fused *f);
void mf_fused_free(mf_fused *f);

#endif
