/* allocator.h — a device's memory (allocator.c): buffers for tensors, kept
 * for reuse when their tensors die, with statistics. A session has one per
 * device; tensors it made hold a reference to it, so it outlives the session
 * while any of them lives. Safe from several threads. */
#ifndef MF_DEVICE_ALLOCATOR_H
#define MF_DEVICE_ALLOCATOR_H

#include "core/base.h"

typedef struct mf_allocator mf_allocator;
/* New (one reference), for the memory of device `index` of `type`: its
 * tensors carry that device. NULL when out of memory. The buffers are host
 * memory (CPU devices); a CUDA backend brings its own allocation. */
mf_allocator *mf_allocator_new(mf_device_type type, int index);
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
