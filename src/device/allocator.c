/* allocator.c — memory for tensors: host memory, or a device's through
 * mf_device_memory hooks (a GPU's, device.c). A tensor that dies comes back here
 * whole (header and buffer) and is handed out again for a request it fits, so
 * a result the caller drops is the next run's output buffer: steady-state
 * runs allocate nothing even when the caller holds on to results for a while.
 * What is kept is bounded by the peak bytes ever in use. */
#include "device/allocator.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

#include <pthread.h>
#include <stdatomic.h>

struct mf_allocator {
  atomic_int refcount;
  mf_device_type type;   /* the device whose memory this is, stamped on its tensors */
  int index;
  mf_device_memory mem;  /* a device's memory; all NULL for host memory */
  pthread_mutex_t lock;
  mf_tensor **kept;      /* dead tensors, theirs to reuse */
  int num_kept, cap_kept;
  size_t kept_bytes;
  bool closed;
  mf_memory_stats stats;
};

mf_allocator *mf_allocator_new(mf_device_type type, int index, const mf_device_memory *mem) {
  mf_allocator *a = mf_calloc(1, sizeof *a);
  if (!a) return NULL;
  a->type = type;
  a->index = index;
  if (mem) a->mem = *mem;
  atomic_init(&a->refcount, 1);
  pthread_mutex_init(&a->lock, NULL);
  return a;
}

/* Frees a tensor of a's, header and buffer. */
static void free_tensor(mf_allocator *a, mf_tensor *t) {
  if (a->mem.free) a->mem.free(a->mem.ctx, t->data);
  else mf_aligned_free(t->data);
  mf_free(t);
}

static void free_kept(mf_allocator *a) {
  for (int i = 0; i < a->num_kept; i++) free_tensor(a, a->kept[i]);
  a->num_kept = 0;
  a->kept_bytes = 0;
}

void mf_allocator_release(mf_allocator *a) {
  if (!a || atomic_fetch_sub_explicit(&a->refcount, 1, memory_order_acq_rel) != 1) return;
  free_kept(a);
  mf_free(a->kept);
  if (a->mem.close) a->mem.close(a->mem.ctx);
  pthread_mutex_destroy(&a->lock);
  mf_free(a);
}

/* A dead tensor of a: kept for reuse, or freed. Takes its reference to a. */
static void take_back(mf_tensor *t) {
  mf_allocator *a = t->recycle_arg;
  pthread_mutex_lock(&a->lock);
  a->stats.bytes_in_use -= t->capacity;
  bool keep = !a->closed && a->kept_bytes + t->capacity <= a->stats.peak_bytes_in_use;
  if (keep && a->num_kept == a->cap_kept) {
    int cap = a->cap_kept ? 2 * a->cap_kept : 16;
    mf_tensor **grown = mf_realloc(a->kept, (size_t)cap * sizeof *grown);
    if (grown) {
      a->kept = grown;
      a->cap_kept = cap;
    }
    keep = grown != NULL;
  }
  if (keep) {
    a->kept[a->num_kept++] = t;
    a->kept_bytes += t->capacity;
  }
  a->stats.bytes_kept = a->kept_bytes;
  pthread_mutex_unlock(&a->lock);
  if (!keep) free_tensor(a, t);
  mf_allocator_release(a);
}

/* The kept tensor that fits `bytes` best (at most twice as large), taken out; NULL if none.
 * An exact fit ends the search, newest first: a loop of runs dropping its
 * results keeps thousands of same-sized tensors between two collections of
 * the Lua heap, and a full scan per allocation made the runs quadratic. */
static mf_tensor *take_kept(mf_allocator *a, size_t bytes) {
  int best = -1;
  for (int i = a->num_kept - 1; i >= 0; i--) {
    size_t cap = a->kept[i]->capacity;
    if (cap >= bytes && cap <= 2 * bytes + MF_ALIGNMENT && (best < 0 || cap < a->kept[best]->capacity)) best = i;
    if (cap == bytes) break;
  }
  if (best < 0) return NULL;
  mf_tensor *t = a->kept[best];
  a->kept[best] = a->kept[--a->num_kept];
  a->kept_bytes -= t->capacity;
  return t;
}

/* A new tensor whose buffer is `bytes` of the device's memory. */
static mf_tensor *device_tensor(mf_allocator *a, mf_dtype dtype, int rank, const int64_t *dims, size_t bytes,
                                mf_status *s) {
  if (dtype == MF_STRING) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "string values stay in host memory");
    return NULL;
  }
  void *data = NULL;
  if (!a->mem.alloc(a->mem.ctx, bytes, &data, s)) return NULL;
  mf_tensor *t = mf_tensor_wrap(dtype, rank, dims, data, NULL, NULL, s);
  if (!t) {
    a->mem.free(a->mem.ctx, data);
    return NULL;
  }
  t->owned = true;  /* its buffer is the allocator's to keep and reshape */
  t->capacity = bytes;
  return t;
}

mf_tensor *mf_allocator_tensor(mf_allocator *a, mf_dtype dtype, int rank, const int64_t *dims, mf_status *s) {
  int64_t n = mf_shape_num_elements(rank, dims);
  size_t bytes = (size_t)(n > 0 ? n : 0) * mf_dtype_size(dtype);
  pthread_mutex_lock(&a->lock);
  /* A string value is built whole (core/tstring.h): never into a used buffer. */
  mf_tensor *t = dtype == MF_STRING ? NULL : take_kept(a, bytes);
  pthread_mutex_unlock(&a->lock);
  bool fresh = !t;
  if (t) {
    atomic_store_explicit(&t->refcount, 1, memory_order_relaxed);
    mf_tensor_reshape_owned(t, dtype, rank, dims);
  } else if (!(t = a->mem.alloc ? device_tensor(a, dtype, rank, dims, bytes, s)
                                 : mf_tensor_new_uninit(dtype, rank, dims, s))) {
    return NULL;
  }
  t->device = a->type;
  t->device_index = a->index;
  t->recycle = take_back;
  t->recycle_arg = a;
  atomic_fetch_add_explicit(&a->refcount, 1, memory_order_relaxed);
  pthread_mutex_lock(&a->lock);
  a->stats.bytes_in_use += t->capacity;
  if (a->stats.bytes_in_use > a->stats.peak_bytes_in_use) a->stats.peak_bytes_in_use = a->stats.bytes_in_use;
  a->stats.bytes_kept = a->kept_bytes;
  a->stats.num_allocations += fresh;
  pthread_mutex_unlock(&a->lock);
  return t;
}

void mf_allocator_close(mf_allocator *a) {
  pthread_mutex_lock(&a->lock);
  a->closed = true;
  free_kept(a);
  a->stats.bytes_kept = 0;
  pthread_mutex_unlock(&a->lock);
}

void mf_allocator_stats(mf_allocator *a, mf_memory_stats *out) {
  pthread_mutex_lock(&a->lock);
  *out = a->stats;
  pthread_mutex_unlock(&a->lock);
}
