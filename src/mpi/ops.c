/* ops.c — the MPI graph ops: MpiAllreduce, MpiAllgather, MpiBroadcast and
 * MpiAllgatherGrad (allgather's gradient), one registration each.
 *
 * Every rank must run the same MPI ops in the same order (a plan's schedule
 * is the same on every rank that built the same graph). Each op first
 * exchanges what every rank holds (dtype and shape, one small allgather),
 * so that ranks that disagree get an error naming every rank's value
 * instead of a hang or a wrong sum; then the collective runs nonblocking,
 * polled up to the deadline (comm.c). */
#include "mpi/comm.h"
#include "mpi/moonflow_mpi.h"

#include "core/status.h"
#include "graph/attrs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one rank holds: dtype, rank, dims. */
enum { HEADER_LEN = 2 + MF_MAX_RANK };
typedef struct header { int64_t v[HEADER_LEN]; } header;

static header header_of(const mf_tensor *t) {
  header h = {{mf_tensor_dtype(t), mf_tensor_rank(t)}};
  memcpy(&h.v[2], mf_tensor_dims(t), (size_t)mf_tensor_rank(t) * sizeof(int64_t));
  return h;
}

/* "float32 [2,3]". */
static const char *header_str(const header *h, char *buf, size_t n) {
  mf_shape shape = {.rank = (int)h->v[1]};
  memcpy(shape.dims, &h->v[2], sizeof shape.dims);
  char dims[160];
  snprintf(buf, n, "%s %s", mf_dtype_name((mf_dtype)h->v[0]), mf_shape_str(&shape, dims, sizeof dims));
  return buf;
}

/* Each rank's header of `x` into all[0 .. size). NULL with s set on failure. */
static header *exchange_headers(const char *who, const mf_tensor *x, mf_status *s) {
  int size = mf_mpi_size();
  header mine = header_of(x), *all = calloc((size_t)size, sizeof *all);
  if (!all) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: out of memory", who);
    return NULL;
  }
  MPI_Request req;
  if (comm_check(MPI_Iallgather(&mine, HEADER_LEN, MPI_INT64_T, all, HEADER_LEN, MPI_INT64_T, comm_world(), &req),
                 who, "MPI_Iallgather", s)) {
    free(all);
    return NULL;
  }
  /* On a timeout MPI may still write `all`: it stays allocated. */
  return comm_wait(&req, who, "the dtypes and shapes of the other ranks", s) ? NULL : all;
}

/* An error listing every rank's dtype and shape: why they disagree is `why`. */
static mf_code disagree(const char *who, const header *all, const char *why, mf_status *s) {
  char list[768] = "", one[200];
  size_t len = 0;
  for (int r = 0; r < mf_mpi_size() && len < sizeof list; r++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%srank %d has %s", r ? ", " : "", r,
                            header_str(&all[r], one, sizeof one));
  return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: %s: %s", who, why, list);
}

/* Whether every rank's header equals this one's from field `from` on. */
static bool headers_agree(const header *all, int from) {
  int me = mf_mpi_rank();
  for (int r = 0; r < mf_mpi_size(); r++)
    if (memcmp(&all[r].v[from], &all[me].v[from], (HEADER_LEN - from) * sizeof(int64_t)) != 0) return false;
  return true;
}

static MPI_Datatype mpi_type(mf_dtype t) {
  switch (t) {
    case MF_FLOAT32: return MPI_FLOAT;
    case MF_FLOAT64: return MPI_DOUBLE;
    case MF_INT32: return MPI_INT32_T;
    case MF_INT64: return MPI_INT64_T;
    default: return MPI_BYTE;
  }
}

/* MPI counts are ints: a larger message goes in pieces of at most this many elements. */
enum { MAX_PIECE = 1 << 30 };

static const char *op_name(mf_kernel_ctx *ctx) { return mf_op_name(ctx->op); }

/* The op's "who" for messages: "MpiAllreduce 'grad'". */
static const char *who_of(const char *type, const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s '%s'", type, name);
  return buf;
}

static mf_code needs_job(mf_infer_ctx *ic, const char *type) {
  if (mf_mpi_initialized()) return MF_OK;
  return mf_status_set(ic->status, MF_FAILED_PRECONDITION,
                       "%s '%s': MPI is not initialized: call mpi.init() before building MPI ops", type, ic->op_name);
}

/* ---------- MpiAllreduce: attr reduce_op "sum" or "average" ---------- */

static bool is_float(mf_dtype t) { return t == MF_FLOAT32 || t == MF_FLOAT64; }

static bool averages(const mf_attrs *attrs) {
  const mf_attr *op = mf_attrs_find(attrs, "reduce_op", MF_ATTR_STRING);
  return op && strcmp(op->v.s, "average") == 0;
}

static mf_code allreduce_infer(mf_infer_ctx *ic) {
  if (needs_job(ic, "MpiAllreduce")) return ic->status->code;
  const mf_attr *op = mf_attrs_find(ic->attrs, "reduce_op", MF_ATTR_STRING);
  if (!op || (strcmp(op->v.s, "sum") != 0 && strcmp(op->v.s, "average") != 0))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "MpiAllreduce '%s': reduce_op must be \"sum\" or \"average\", got %s%s%s", ic->op_name,
                         op ? "\"" : "", op ? op->v.s : "none", op ? "\"" : "");
  mf_dtype t = ic->in_dtypes[0];
  bool average = averages(ic->attrs);
  if (!(is_float(t) || (!average && (t == MF_INT32 || t == MF_INT64))))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "MpiAllreduce '%s': cannot %s a %s tensor: the %s takes float32 or float64%s", ic->op_name,
                         average ? "average" : "sum", mf_dtype_name(t), average ? "average" : "sum",
                         average ? "" : ", int32 or int64");
  ic->out_dtypes[0] = t;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static void scale(mf_tensor *y, double factor) {
  int64_t n = mf_tensor_size(y);
  if (mf_tensor_dtype(y) == MF_FLOAT32) {
    float *p = mf_tensor_data(y), f = (float)factor;
    for (int64_t i = 0; i < n; i++) p[i] *= f;
  } else {
    double *p = mf_tensor_data(y);
    for (int64_t i = 0; i < n; i++) p[i] *= factor;
  }
}

static mf_code allreduce_kernel(mf_kernel_ctx *ctx) {
  char who[256];
  who_of("MpiAllreduce", op_name(ctx), who, sizeof who);
  mf_tensor *x = ctx->inputs[0], *y = ctx->outputs[0];
  mf_status *s = ctx->status;
  comm_lock();
  header *all = NULL;
  if (!comm_ready(who, s) && (all = exchange_headers(who, x, s)) && !headers_agree(all, 0))
    disagree(who, all, "every rank must pass the same dtype and shape", s);
  MPI_Datatype type = mpi_type(mf_tensor_dtype(x));
  size_t esize = mf_dtype_size(mf_tensor_dtype(x));
  for (int64_t off = 0, n = mf_tensor_size(x); mf_ok(s) && off < n; off += MAX_PIECE) {
    int count = (int)(n - off < MAX_PIECE ? n - off : MAX_PIECE);
    MPI_Request req;
    if (!comm_check(MPI_Iallreduce((char *)mf_tensor_data(x) + off * esize, (char *)mf_tensor_data(y) + off * esize,
                                   count, type, MPI_SUM, comm_world(), &req),
                    who, "MPI_Iallreduce", s) &&
        comm_wait(&req, who, "the sum over the ranks", s)) {
      /* Timed out: MPI may still read x and write y. */
      mf_tensor_retain(x);
      mf_tensor_retain(y);
    }
  }
  comm_unlock();
  free(all);
  if (mf_ok(s) && averages(ctx->attrs)) scale(y, 1.0 / mf_mpi_size());
  return s->code;
}

static mf_code allreduce_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_rebuild(gc, "MpiAllreduce", &gc->grads[0], 1);
  return gc->status->code;
}

/* ---------- MpiAllreduceStart(x1..xn) -> ticket, MpiAllreduceWait(ticket) -> y1..yn ----------
 * The overlapped allreduce (Horovod's): Start copies its tensors, one after
 * the other, into one buffer and hands it to the communication thread
 * (comm.c); the plan runs Start right after the step computing its last
 * input (MF_OP_STARTS_EARLY), and the steps after it run while the thread
 * waits for the other ranks. Wait, where the op was built (just before the
 * gradients are applied), waits for the buffer and splits it back. */

typedef struct fused_job {
  comm_job base;        /* first: the thread runs &base */
  char who[256];
  bool average;
  mf_tensor *buffer;    /* the tensors one after the other: the input's shape when one, else flat */
  int n;
  int64_t hash;         /* of the dtype and every tensor's shape: ranks compare it */
  int64_t dims[];       /* per tensor MF_MAX_RANK + 1: its rank, then its dims */
} fused_job;

static void fused_job_free(comm_job *job) {
  fused_job *j = (fused_job *)job;
  mf_tensor_release(j->buffer);
  free(j);
}

static bool same_dtype_inputs(mf_infer_ctx *ic) {
  for (int k = 1; k < ic->num_inputs; k++)
    if (ic->in_dtypes[k] != ic->in_dtypes[0]) return false;
  return true;
}

static mf_code allreduce_start_infer(mf_infer_ctx *ic) {
  if (!same_dtype_inputs(ic))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "MpiAllreduceStart '%s': every tensor of one buffer must have one dtype: input 0 is %s, "
                         "another is not",
                         ic->op_name, mf_dtype_name(ic->in_dtypes[0]));
  if (allreduce_infer(ic)) return ic->status->code;  /* reduce_op and dtype, as MpiAllreduce */
  ic->out_dtypes[0] = MF_INT64;
  ic->out_shapes[0] = (mf_shape){.rank = 0};
  return MF_OK;
}

enum { FIELDS_PER_TENSOR = MF_MAX_RANK + 1 };

/* FNV-1a over 64-bit words. */
static int64_t hash_words(const int64_t *w, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint64_t)w[i]) * 1099511628211u;
  return (int64_t)h;
}

/* On the communication thread: every rank's dtype, tensor count, elements and
 * shapes' hash agree, then the buffer is summed (and averaged) in place. */
static void fused_job_run(comm_job *job) {
  fused_job *j = (fused_job *)job;
  mf_status *s = &job->status;
  mf_tensor *y = j->buffer;
  if (comm_ready(j->who, s)) return;
  int size = mf_mpi_size();
  int64_t mine[4] = {mf_tensor_dtype(y), j->n, mf_tensor_size(y), j->hash}, *all = calloc((size_t)size * 4, sizeof *all);
  if (!all) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: out of memory", j->who);
    return;
  }
  MPI_Request req;
  if (comm_check(MPI_Iallgather(mine, 4, MPI_INT64_T, all, 4, MPI_INT64_T, comm_world(), &req), j->who,
                 "MPI_Iallgather", s))
    return free(all);
  if (comm_wait(&req, j->who, "the dtypes and shapes of the other ranks", s)) return; /* MPI may still write `all` */
  char list[768] = "";
  size_t len = 0;
  bool agree = true;
  for (int r = 0; r < size; r++) agree = agree && memcmp(&all[4 * r], mine, sizeof mine) == 0;
  for (int r = 0; !agree && r < size && len < sizeof list; r++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%srank %d has %lld %s tensors of %lld elements%s",
                            r ? ", " : "", r, (long long)all[4 * r + 1], mf_dtype_name((mf_dtype)all[4 * r]),
                            (long long)all[4 * r + 2], all[4 * r + 3] == all[3] ? "" : " (shapes unlike rank 0's)");
  free(all);
  if (!agree) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "%s: every rank must allreduce tensors of the same dtypes and shapes: %s",
                  j->who, list);
    return;
  }
  MPI_Datatype type = mpi_type(mf_tensor_dtype(y));
  size_t esize = mf_dtype_size(mf_tensor_dtype(y));
  for (int64_t off = 0, n = mf_tensor_size(y); mf_ok(s) && off < n; off += MAX_PIECE) {
    int count = (int)(n - off < MAX_PIECE ? n - off : MAX_PIECE);
    if (!comm_check(MPI_Iallreduce(MPI_IN_PLACE, (char *)mf_tensor_data(y) + off * esize, count, type, MPI_SUM,
                                   comm_world(), &req),
                    j->who, "MPI_Iallreduce", s) &&
        comm_wait(&req, j->who, "the sum over the ranks", s))
      mf_tensor_retain(y); /* timed out: MPI may still write it */
  }
  if (mf_ok(s) && j->average) scale(y, 1.0 / size);
}

static mf_code allreduce_start_kernel(mf_kernel_ctx *ctx) {
  mf_status *s = ctx->status;
  int n = ctx->num_inputs;
  fused_job *j = calloc(1, sizeof *j + (size_t)n * FIELDS_PER_TENSOR * sizeof(int64_t));
  if (!j) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "MpiAllreduceStart '%s': out of memory", op_name(ctx));
  who_of("MpiAllreduceStart", op_name(ctx), j->who, sizeof j->who);
  if (comm_ready(j->who, s)) return free(j), s->code;
  mf_dtype dtype = mf_tensor_dtype(ctx->inputs[0]);
  int64_t total = 0;
  for (int k = 0; k < n; k++) {
    const mf_tensor *x = ctx->inputs[k];
    int64_t *d = &j->dims[k * FIELDS_PER_TENSOR];
    d[0] = mf_tensor_rank(x);
    memcpy(d + 1, mf_tensor_dims(x), (size_t)d[0] * sizeof *d);
    total += mf_tensor_size(x);
  }
  j->buffer = n == 1 ? mf_tensor_new(dtype, mf_tensor_rank(ctx->inputs[0]), mf_tensor_dims(ctx->inputs[0]), s)
                     : mf_tensor_new(dtype, 1, &total, s);
  if (!j->buffer) return free(j), s->code;
  size_t esize = mf_dtype_size(dtype), at = 0;
  for (int k = 0; k < n; k++) {
    size_t bytes = (size_t)mf_tensor_size(ctx->inputs[k]) * esize;
    memcpy((char *)mf_tensor_data(j->buffer) + at, mf_tensor_data(ctx->inputs[k]), bytes);
    at += bytes;
  }
  j->n = n;
  j->average = averages(ctx->attrs);
  j->hash = hash_words(j->dims, (size_t)n * FIELDS_PER_TENSOR, 14695981039346656037u ^ (uint64_t)dtype);
  j->base.run = fused_job_run;
  j->base.free = fused_job_free;
  j->base.bytes = (int64_t)(total * (int64_t)esize);
  j->base.tensors = n;
  if (comm_submit(&j->base, j->who, s)) {
    fused_job_free(&j->base);
    return s->code;
  }
  *(int64_t *)mf_tensor_data(ctx->outputs[0]) = j->base.ticket;
  return MF_OK;
}

static mf_code allreduce_wait_infer(mf_infer_ctx *ic) {
  if (needs_job(ic, "MpiAllreduceWait")) return ic->status->code;
  const mf_op *start = ic->in_ports ? ic->in_ports[0].op : NULL;
  if (!start || strcmp(mf_op_type(start), "MpiAllreduceStart") != 0 || ic->in_ports[0].index != 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "MpiAllreduceWait '%s': its input must be the ticket of an MpiAllreduceStart, got %s",
                         ic->op_name, start ? mf_op_type(start) : "a value known only at run time");
  int n = mf_op_num_inputs(start);
  if (mf_infer_set_num_outputs(ic, n)) return ic->status->code;
  for (int k = 0; k < n; k++) {
    mf_output x = mf_op_input(start, k);
    ic->out_dtypes[k] = mf_op_output_dtype(x.op, x.index);
    mf_op_output_shape(x.op, x.index, &ic->out_shapes[k]);
  }
  return MF_OK;
}

static mf_code allreduce_wait_kernel(mf_kernel_ctx *ctx) {
  mf_status *s = ctx->status;
  int64_t ticket = *(const int64_t *)mf_tensor_data(ctx->inputs[0]);
  fused_job *j = (fused_job *)comm_take(ticket);
  if (!j)
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "MpiAllreduceWait '%s': no allreduce with ticket %lld is pending: it was waited for "
                         "already, or MPI was shut down",
                         op_name(ctx), (long long)ticket);
  if (!mf_ok(&j->base.status) || j->n != ctx->num_outputs) {
    if (mf_ok(&j->base.status))
      mf_status_set(s, MF_INTERNAL, "MpiAllreduceWait '%s': the allreduce fused %d tensors, the op has %d outputs",
                    op_name(ctx), j->n, ctx->num_outputs);
    else
      *s = j->base.status;
    fused_job_free(&j->base);
    return s->code;
  }
  mf_dtype dtype = mf_tensor_dtype(j->buffer);
  size_t at = 0;
  for (int k = 0; k < j->n && mf_ok(s); k++) {
    const int64_t *d = &j->dims[k * FIELDS_PER_TENSOR];
    mf_tensor *y = j->n == 1 ? mf_tensor_retain(j->buffer) : mf_tensor_new(dtype, (int)d[0], d + 1, s);
    if (!y) break;
    if (j->n > 1) memcpy(mf_tensor_data(y), (const char *)mf_tensor_data(j->buffer) + at, mf_tensor_nbytes(y));
    at += mf_tensor_nbytes(y);
    mf_tensor_release(ctx->outputs[k]);
    ctx->outputs[k] = y;
  }
  fused_job_free(&j->base);
  return s->code;
}

/* The sum over the ranks of g (the gradients of allgather and broadcast start with it). */
static mf_output summed(mf_grad_ctx *gc, mf_output g) {
  mf_op_desc *d = mf_grad_begin(gc, "MpiAllreduce");
  if (d) {
    mf_op_desc_add_input(d, g);
    mf_op_desc_set_attr_string(d, "reduce_op", "sum");
  }
  return mf_grad_finish(gc, d);
}

/* ---------- MpiAllgather: the ranks' tensors concatenated along dim 0 ---------- */

static mf_code allgather_infer(mf_infer_ctx *ic) {
  if (needs_job(ic, "MpiAllgather")) return ic->status->code;
  const mf_shape *x = &ic->in_shapes[0];
  if (x->rank == 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "MpiAllgather '%s': x must have at least one dimension (ranks are concatenated along "
                         "dim 0), got a scalar; reshape it to [1]",
                         ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = *x;
  /* The other ranks' first dims are known only when the op runs. */
  if (x->rank > 0) ic->out_shapes[0].dims[0] = -1;
  return MF_OK;
}

/* The bytes of one row (dim 0 index) of t. */
static size_t row_bytes_of(const mf_tensor *t) {
  size_t n = mf_dtype_size(mf_tensor_dtype(t));
  for (int i = 1; i < mf_tensor_rank(t); i++) n *= (size_t)mf_tensor_dims(t)[i];
  return n;
}

/* Each rank's rows in bytes and where they start, as MPI's int counts; the rows of all ranks. */
static mf_code byte_counts(const char *who, const header *all, size_t row_bytes, int *counts, int *displs,
                           int64_t *total_rows, mf_status *s) {
  int64_t offset = 0;
  *total_rows = 0;
  for (int r = 0; r < mf_mpi_size(); r++) {
    int64_t bytes = all[r].v[2] * (int64_t)row_bytes;
    if (bytes > INT32_MAX || offset > INT32_MAX - bytes)
      return mf_status_set(s, MF_UNIMPLEMENTED, "%s: more than 2 GiB to gather; gather it in pieces", who);
    counts[r] = (int)bytes;
    displs[r] = (int)offset;
    offset += bytes;
    *total_rows += all[r].v[2];
  }
  return MF_OK;
}

static mf_code allgather_kernel(mf_kernel_ctx *ctx) {
  char who[256];
  who_of("MpiAllgather", op_name(ctx), who, sizeof who);
  mf_tensor *x = ctx->inputs[0], *y = NULL;
  mf_status *s = ctx->status;
  int size = mf_mpi_size(), rank = mf_tensor_rank(x);
  size_t row_bytes = row_bytes_of(x);
  int *counts = calloc((size_t)size * 2, sizeof(int));
  if (!counts) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: out of memory", who);
  comm_lock();
  header *all = NULL;
  int64_t rows = 0;
  if (!comm_ready(who, s) && (all = exchange_headers(who, x, s))) {
    /* Dims after the first must agree; the first may differ. */
    bool agree = true;
    for (int r = 0; r < size; r++)
      agree = agree && all[r].v[0] == all[0].v[0] && all[r].v[1] == all[0].v[1] &&
              memcmp(&all[r].v[3], &all[0].v[3], (HEADER_LEN - 3) * sizeof(int64_t)) == 0;
    if (!agree)
      disagree(who, all, "every rank must pass the same dtype and the same dims after the first", s);
    else
      byte_counts(who, all, row_bytes, counts, counts + size, &rows, s);
  }
  if (mf_ok(s)) {
    int64_t dims[MF_MAX_RANK];
    memcpy(dims, mf_tensor_dims(x), (size_t)rank * sizeof *dims);
    dims[0] = rows;
    y = mf_tensor_new(mf_tensor_dtype(x), rank, dims, s);
  }
  MPI_Request req;
  if (y && !comm_check(MPI_Iallgatherv(mf_tensor_data(x), counts[mf_mpi_rank()], MPI_BYTE, mf_tensor_data(y), counts,
                                       counts + size, MPI_BYTE, comm_world(), &req),
                       who, "MPI_Iallgatherv", s) &&
      comm_wait(&req, who, "the tensors of the other ranks", s)) {
    mf_tensor_retain(x); /* timed out: MPI may still use x, y and the counts */
    mf_tensor_retain(y);
    counts = NULL;
  }
  comm_unlock();
  free(all);
  free(counts);
  if (!mf_ok(s)) {
    mf_tensor_release(y);
    return s->code;
  }
  ctx->outputs[0] = y;
  return MF_OK;
}

/* d/dx of allgather: the rows of the summed gradient that came from this rank. */
static mf_code allgather_grad(mf_grad_ctx *gc) {
  mf_output x = mf_op_input(gc->op, 0);
  gc->input_grads[0] = mf_grad_op2(gc, "MpiAllgatherGrad", summed(gc, gc->grads[0]), x);
  return gc->status->code;
}

/* ---------- MpiAllgatherGrad(g, x): rows of g that x's rank gave to the allgather ---------- */

static mf_code allgather_grad_infer(mf_infer_ctx *ic) {
  if (needs_job(ic, "MpiAllgatherGrad")) return ic->status->code;
  if (ic->in_dtypes[0] != ic->in_dtypes[1])
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "MpiAllgatherGrad '%s': g is %s but x is %s", ic->op_name,
                         mf_dtype_name(ic->in_dtypes[0]), mf_dtype_name(ic->in_dtypes[1]));
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[1];
  return MF_OK;
}

static mf_code allgather_grad_kernel(mf_kernel_ctx *ctx) {
  char who[256];
  who_of("MpiAllgatherGrad", op_name(ctx), who, sizeof who);
  mf_tensor *g = ctx->inputs[0], *x = ctx->inputs[1], *dx = ctx->outputs[0];
  mf_status *s = ctx->status;
  int size = mf_mpi_size();
  int64_t mine = mf_tensor_dims(x)[0], *rows = calloc((size_t)size, sizeof *rows);
  if (!rows) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "%s: out of memory", who);
  comm_lock();
  MPI_Request req;
  if (!comm_ready(who, s) &&
      !comm_check(MPI_Iallgather(&mine, 1, MPI_INT64_T, rows, 1, MPI_INT64_T, comm_world(), &req), who,
                  "MPI_Iallgather", s) &&
      comm_wait(&req, who, "the first dims of the other ranks", s))
    rows = NULL; /* timed out: MPI may still write it */
  comm_unlock();
  int64_t before = 0, total = 0;
  for (int r = 0; mf_ok(s) && r < size; r++) {
    if (r < mf_mpi_rank()) before += rows[r];
    total += rows[r];
  }
  free(rows);
  if (!mf_ok(s)) return s->code;
  bool fits = mf_tensor_rank(g) == mf_tensor_rank(x) && mf_tensor_dims(g)[0] == total &&
              memcmp(mf_tensor_dims(g) + 1, mf_tensor_dims(x) + 1, (size_t)(mf_tensor_rank(x) - 1) * sizeof(int64_t)) == 0;
  if (!fits) {
    char gs[160], xs[160];
    mf_shape gsh = {.rank = mf_tensor_rank(g)}, xsh = {.rank = mf_tensor_rank(x)};
    memcpy(gsh.dims, mf_tensor_dims(g), (size_t)gsh.rank * sizeof(int64_t));
    memcpy(xsh.dims, mf_tensor_dims(x), (size_t)xsh.rank * sizeof(int64_t));
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "%s: the gradient %s does not cover the %lld gathered rows of tensors shaped like %s", who,
                         mf_shape_str(&gsh, gs, sizeof gs), (long long)total, mf_shape_str(&xsh, xs, sizeof xs));
  }
  memcpy(mf_tensor_data(dx), (char *)mf_tensor_data(g) + (size_t)before * row_bytes_of(x), mf_tensor_nbytes(dx));
  return MF_OK;
}

/* ---------- MpiBroadcast: attr root (int), every rank gets root's tensor ---------- */

static mf_code broadcast_infer(mf_infer_ctx *ic) {
  if (needs_job(ic, "MpiBroadcast")) return ic->status->code;
  const mf_attr *root = mf_attrs_find(ic->attrs, "root", MF_ATTR_INT);
  if (!root || root->v.i < 0 || root->v.i >= mf_mpi_size())
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "MpiBroadcast '%s': root must be a rank of the job, 0 to %d, got %lld", ic->op_name,
                         mf_mpi_size() - 1, root ? (long long)root->v.i : -1LL);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code broadcast_kernel(mf_kernel_ctx *ctx) {
  char who[256];
  who_of("MpiBroadcast", op_name(ctx), who, sizeof who);
  mf_tensor *x = ctx->inputs[0], *y = ctx->outputs[0];
  mf_status *s = ctx->status;
  int root = (int)mf_attrs_find(ctx->attrs, "root", MF_ATTR_INT)->v.i;
  if (mf_mpi_rank() == root) memcpy(mf_tensor_data(y), mf_tensor_data(x), mf_tensor_nbytes(x));
  comm_lock();
  header *all = NULL;
  if (!comm_ready(who, s) && (all = exchange_headers(who, x, s)) && !headers_agree(all, 0))
    disagree(who, all, "every rank must pass the same dtype and shape", s);
  size_t n = mf_tensor_nbytes(y);
  for (size_t off = 0; mf_ok(s) && off < n; off += MAX_PIECE) {
    int count = (int)(n - off < MAX_PIECE ? n - off : MAX_PIECE);
    MPI_Request req;
    if (!comm_check(MPI_Ibcast((char *)mf_tensor_data(y) + off, count, MPI_BYTE, root, comm_world(), &req), who,
                    "MPI_Ibcast", s) &&
        comm_wait(&req, who, "the root's tensor", s))
      mf_tensor_retain(y); /* timed out: MPI may still write y */
  }
  comm_unlock();
  free(all);
  return s->code;
}

/* Gradients flow to the root: the sum of every rank's gradient there, zeros elsewhere. */
static mf_code broadcast_grad(mf_grad_ctx *gc) {
  int64_t root = 0;
  mf_op_attr_int(gc->op, "root", &root);
  mf_output sum = summed(gc, gc->grads[0]);
  gc->input_grads[0] = mf_mpi_rank() == root ? sum : mf_grad_op1(gc, "ZerosLike", sum);
  return gc->status->code;
}

static const mf_op_def defs[] = {
    {.name = "MpiAllreduce", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_STATEFUL,
     .infer = allreduce_infer, .kernel = {[MF_CPU] = allreduce_kernel}, .grad = allreduce_grad},
    {.name = "MpiAllreduceStart", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_STATEFUL | MF_OP_VARIADIC_INPUTS | MF_OP_STARTS_EARLY | MF_OP_INTERNAL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = allreduce_start_infer, .kernel = {[MF_CPU] = allreduce_start_kernel}},
    {.name = "MpiAllreduceWait", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_INTERNAL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = allreduce_wait_infer, .kernel = {[MF_CPU] = allreduce_wait_kernel}},
    {.name = "MpiAllgather", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = allgather_infer, .kernel = {[MF_CPU] = allgather_kernel}, .grad = allgather_grad},
    {.name = "MpiAllgatherGrad", .num_inputs = 2, .num_outputs = 1,
     .flags = MF_OP_STATEFUL | MF_OP_INTERNAL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = allgather_grad_infer, .kernel = {[MF_CPU] = allgather_grad_kernel}},
    {.name = "MpiBroadcast", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_STATEFUL,
     .infer = broadcast_infer, .kernel = {[MF_CPU] = broadcast_kernel}, .grad = broadcast_grad},
};
MF_OP_TABLE(mf_mpi_ops, defs);
