/* tensor.c — refcounted, 64-byte-aligned values that carry a device. */
#include "core/tensor.h"
#include "core/status.h"
#include "core/memory.h"

#include <string.h>

static mf_code check_shape(mf_dtype dtype, int rank, const int64_t *dims, mf_status *s) {
  if (mf_dtype_size(dtype) == 0)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
  if (rank < 0 || rank > MF_MAX_RANK)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "rank %d is out of range [0, %d]", rank, MF_MAX_RANK);
  int64_t bytes = (int64_t)mf_dtype_size(dtype);
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "a value needs a fully defined shape, but dimension %d is %lld", i,
                           (long long)dims[i]);
    if (!mf_size_mul(bytes, dims[i], &bytes) || bytes > ((int64_t)1 << 48)) {
      char buf[200];
      mf_shape shape = mf_shape_make(rank, dims);
      return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "a %s value of shape %s is too large to allocate",
                           mf_dtype_name(dtype), mf_shape_str(&shape, buf, sizeof buf));
    }
  }
  return MF_OK;
}

static mf_tensor *header(mf_dtype dtype, int rank, const int64_t *dims) {
  mf_tensor *t = mf_calloc(1, sizeof *t);
  if (!t) return NULL;
  atomic_init(&t->refcount, 1);
  t->dtype = dtype;
  t->device = MF_CPU;
  t->rank = rank;
  if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  t->size = mf_shape_num_elements(rank, dims);
  return t;
}

mf_tensor *mf_tensor_new(mf_dtype dtype, int rank, const int64_t *dims, mf_status *s) {
  mf_tensor *t = mf_tensor_new_uninit(dtype, rank, dims, s);
  if (t) memset(t->data, 0, t->capacity);
  return t;
}

mf_tensor *mf_tensor_new_uninit(mf_dtype dtype, int rank, const int64_t *dims, mf_status *s) {
  return mf_tensor_new_sized(dtype, rank, dims, 0, s);
}

mf_tensor *mf_tensor_new_sized(mf_dtype dtype, int rank, const int64_t *dims, size_t extra, mf_status *s) {
  if (check_shape(dtype, rank, dims, s)) return NULL;
  mf_tensor *t = header(dtype, rank, dims);
  if (t) {
    t->capacity = (size_t)t->size * mf_dtype_size(dtype) + extra;
    t->data = mf_aligned_alloc(t->capacity);
    t->owned = true;
    if (!t->data) { mf_free(t); t = NULL; }
    /* Elements of strings are never left uninitialized: they hold offsets. */
    else if (dtype == MF_STRING) memset(t->data, 0, (size_t)t->size * sizeof(mf_tstring));
  }
  if (!t) {
    char buf[200];
    mf_shape shape = mf_shape_make(rank, dims);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory allocating a %s value of shape %s (%zu bytes)",
                  mf_dtype_name(dtype), mf_shape_str(&shape, buf, sizeof buf),
                  (size_t)mf_shape_num_elements(rank, dims) * mf_dtype_size(dtype) + extra);
  }
  return t;
}

mf_tensor *mf_tensor_wrap(mf_dtype dtype, int rank, const int64_t *dims, void *data,
                          void (*release)(void *, void *), void *arg, mf_status *s) {
  if (check_shape(dtype, rank, dims, s)) return NULL;
  if (dtype == MF_STRING) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "mf_tensor_wrap: string values are not wrapped; use mf_tensor_new_strings");
    return NULL;
  }
  if (!data && mf_shape_num_elements(rank, dims) > 0) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "mf_tensor_wrap: data is NULL");
    return NULL;
  }
  if ((uintptr_t)data % mf_dtype_size(dtype)) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "mf_tensor_wrap: data is not aligned for %s", mf_dtype_name(dtype));
    return NULL;
  }
  mf_tensor *t = header(dtype, rank, dims);
  if (!t) { mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory"); return NULL; }
  t->data = data;
  t->release = release;
  t->release_arg = arg;
  return t;
}

mf_tensor *mf_tensor_view(mf_tensor *base, int rank, const int64_t *dims, mf_status *s) {
  return mf_tensor_view_at(base, 0, base->dtype, rank, dims, s);
}

mf_tensor *mf_tensor_view_at(mf_tensor *base, size_t offset, mf_dtype dtype, int rank, const int64_t *dims,
                             mf_status *s) {
  if (check_shape(dtype, rank, dims, s)) return NULL;
  mf_tensor *t = header(dtype, rank, dims);
  if (!t) { mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory"); return NULL; }
  t->device = base->device;
  t->device_index = base->device_index;
  t->data = (char *)base->data + offset;
  /* A reshaping view of strings reaches all of their bytes. */
  if (dtype == MF_STRING && base->dtype == MF_STRING && offset == 0) t->string_bytes = base->string_bytes;
  t->base = mf_tensor_retain(base);
  return t;
}

bool mf_tensor_reshape_owned(mf_tensor *t, mf_dtype dtype, int rank, const int64_t *dims) {
  int64_t n = mf_shape_num_elements(rank, dims);
  if (!t->owned || n < 0 || dtype == MF_STRING || (size_t)n * mf_dtype_size(dtype) > t->capacity) return false;
  t->dtype = dtype;
  t->string_bytes = 0;
  t->rank = rank;
  if (rank) memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  t->size = n;
  return true;
}

mf_tensor *mf_tensor_retain(mf_tensor *t) {
  atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
  return t;
}

void mf_tensor_release(mf_tensor *t) {
  if (!t || atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1) return;
  if (t->recycle) {
    t->recycle(t);
    return;
  }
  if (t->base) mf_tensor_release(t->base);
  else if (t->owned) mf_aligned_free(t->data);
  else if (t->release) t->release(t->data, t->release_arg);
  mf_free(t);
}

int mf_tensor_refcount(const mf_tensor *t) { return atomic_load(&t->refcount); }
mf_dtype mf_tensor_dtype(const mf_tensor *t) { return t->dtype; }
int mf_tensor_rank(const mf_tensor *t) { return t->rank; }
const int64_t *mf_tensor_dims(const mf_tensor *t) { return t->dims; }
int64_t mf_tensor_size(const mf_tensor *t) { return t->size; }
size_t mf_tensor_nbytes(const mf_tensor *t) {
  return (size_t)t->size * mf_dtype_size(t->dtype) + t->string_bytes;
}
void *mf_tensor_data(mf_tensor *t) { return t->data; }
mf_device_type mf_tensor_device(const mf_tensor *t) { return t->device; }
