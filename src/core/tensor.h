/* tensor.h — the value object behind mf_tensor (tensor.c). */
#ifndef MF_CORE_TENSOR_H
#define MF_CORE_TENSOR_H

#include "core/base.h"
#include "core/shape.h"

#include <stdatomic.h>

struct mf_tensor {
  atomic_int refcount;
  mf_dtype dtype;
  mf_device_type device;
  int device_index;      /* which device of that type: 0 for host memory (CPU:0) */
  int rank;
  int64_t dims[MF_MAX_RANK];
  int64_t size;          /* number of elements */
  void *data;
  size_t capacity;       /* bytes at data when owned; an arena view's room (exec/pool.c) */
  size_t string_bytes;   /* MF_STRING: bytes of its strings, after the elements (core/tstring.h) */
  bool owned;            /* data came from mf_aligned_alloc (not a view, not wrapped) */
  mf_tensor *base;       /* a view keeps its base alive */
  bool handle;           /* stands for a host object (a loop's stash), which it names by identity:
                            it crosses devices as it is, never copied */
  void (*release)(void *data, void *arg);
  void *release_arg;
  /* When set, a dying tensor goes here whole (header and buffer) instead of
   * being freed: its allocator keeps it for reuse (device/allocator.c). */
  void (*recycle)(mf_tensor *t);
  void *recycle_arg;
};
/* Like mf_tensor_new but leaves the data uninitialized: for kernel outputs,
 * which write every element anyway. */
mf_tensor *mf_tensor_new_uninit(mf_dtype dtype, int rank, const int64_t *dims, mf_status *s);
/* The same with `extra` bytes of room after the elements (a string value's
 * bytes); the elements of strings come zeroed (empty strings). */
mf_tensor *mf_tensor_new_sized(mf_dtype dtype, int rank, const int64_t *dims, size_t extra, mf_status *s);
/* A new header sharing t's data with another shape of the same size. */
mf_tensor *mf_tensor_view(mf_tensor *t, int rank, const int64_t *dims, mf_status *s);
/* A new header for the bytes of base from `offset` on, as a dtype value of
 * this shape (the caller checks they fit); it holds a reference to base. */
mf_tensor *mf_tensor_view_at(mf_tensor *base, size_t offset, mf_dtype dtype, int rank, const int64_t *dims,
                             mf_status *s);
/* Reshapes a buffer the caller owns alone (refcount 1) in place; false when
 * its capacity is too small for the new shape, or dtype is MF_STRING (string
 * values are built whole, core/tstring.h). Used for buffer reuse. */
bool mf_tensor_reshape_owned(mf_tensor *t, mf_dtype dtype, int rank, const int64_t *dims);

#endif
