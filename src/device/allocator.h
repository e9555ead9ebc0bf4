/* allocator.h — a device's memory (allocator.c): buffers for tensors, kept
 * for reuse when their tensors die, with statistics. A session has one per
 * device; tensors it made hold a reference to it, so it outlives the session
 * while any of them lives. Safe from several threads. */
#ifndef MF_DEVICE_ALLOCATOR_H
#define MF_DEVICE_ALLOCATOR_H

#include "core/base.h"

typedef struct mf_allocator mf_allocator;
/* Where an allocator's buffers come from when they are not host memory (a
 * GPU's): alloc returns `bytes` of the device's memory (NULL for 0 bytes;
 * false with s set on error), free gives them back, and close(ctx) runs when
 * the allocator itself is freed (its last tensor dead), so ctx lives as long
 * as any buffer. The engine never reads such buffers on the host. */
typedef struct mf_device_memory {
  bool (*alloc)(void *ctx, size_t bytes, void **out, mf_status *s);
  void (*free)(void *ctx, void *p);
  void (*close)(void *ctx);
  void *ctx;
} mf_device_memory;
/* New (one reference), for the memory of device `index` of `type`: its
 * tensors carry that device. NULL when out of memory (then mem->close is not
 * called). The buffers are host memory when mem is NULL (CPU devices), else
 * mem's (copied). */
mf_allocator *mf_allocator_new(mf_device_type type, int index, const mf_device_memory *mem);
void mf_allocator_release(mf_allocator *a); /* NULL is fine */
/* A tensor of this shape (data uninitialized) whose buffer belongs to a: a
 * dead tensor of a fitting size when one is kept, else a new one (counted).
 * When the tensor dies it comes back to a. NULL with s set on error. */
mf_tensor *mf_allocator_tensor(mf_allocator *a, mf_dtype dtype, int rank, const int64_t *dims, mf_status *s);
/* Frees the kept tensors and keeps none from now on (a closed session). */
void mf_allocator_close(mf_allocator *a);
/* The statistics (mf_memory_stats, moonflow.h). */
void mf_allocator_stats(mf_allocator *a, mf_memory_stats *out);

#endif
