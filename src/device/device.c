/* device.c — the devices of this process and the device objects a session
 * owns: each has a type and index, its name, its allocator, its kernels (the
 * registry's kernels for its type), copies to and from host memory, and sync.
 *
 * The process has CPU:0 always, and the GPUs the CUDA backend reports
 * (cuda.c; none without a backend, a driver or a GPU).
 * A session may make more CPU devices (mf_session_config.device_count, as
 * TensorFlow's ConfigProto device_count = {CPU = 2}): each has an allocator
 * and buffers of its own and is treated as a device whose memory the host
 * must not read, so placement, copies and cross-device gradients are tested
 * on any machine exactly as they will run on a GPU. */
#define _DEFAULT_SOURCE 1 /* sysconf(_SC_PHYS_PAGES) */
#include "device/device.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int mf_num_devices(mf_device_type type) {
  switch (type) {
    case MF_CPU: return 1;
    case MF_CUDA: return mf_cuda_device_count();
    case MF_NUM_DEVICE_TYPES: break;
  }
  return 0;
}

int64_t mf_device_memory_limit(mf_device_type type, int index) {
  if (index < 0 || index >= mf_num_devices(type)) return -1;
  if (type == MF_CUDA) return mf_cuda_device_memory(index);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return (int64_t)pages * (int64_t)page;
}

const char *mf_device_description(mf_device_type type, int index) {
  if (index < 0 || index >= mf_num_devices(type)) return NULL;
  return type == MF_CUDA ? mf_cuda_device_name(index) : "";
}

/* ---------- the CPU's class ---------- */

/* Every CPU device's buffers are host memory underneath, so both directions are one memcpy. */
static mf_code cpu_copy(mf_device *d, mf_tensor *dst, const mf_tensor *src, mf_status *s) {
  MF_UNUSED(d);
  MF_UNUSED(s);
  size_t n = mf_tensor_nbytes(src);
  if (n) memcpy(dst->data, src->data, n);
  return MF_OK;
}

static mf_code cpu_sync(mf_device *d, mf_status *s) {
  MF_UNUSED(d);
  MF_UNUSED(s);
  return MF_OK;  /* kernels have finished when they return */
}

static const mf_device_class cpu_class = {
    .type = MF_CPU, .type_name = "CPU", .copy_from_host = cpu_copy, .copy_to_host = cpu_copy, .sync = cpu_sync};

/* ---------- device objects ---------- */

mf_device *mf_device_new(mf_device_type type, int index, mf_status *s) {
  const char *type_name = type == MF_CUDA ? "GPU" : "CPU";
  mf_device *d = mf_calloc(1, sizeof *d);
  if (!d) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory making device %s:%d", type_name, index);
    return NULL;
  }
  d->cls = &cpu_class;
  d->type = type;
  d->index = index;
  mf_device_memory mem, *device_memory = NULL;
  if (type == MF_CUDA) {
    if (mf_cuda_device_open(d, &mem, s)) {
      mf_free(d);
      return NULL;
    }
    device_memory = &mem;
  }
  if (!(d->allocator = mf_allocator_new(type, index, device_memory))) {
    if (device_memory) mem.close(mem.ctx);
    mf_free(d);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory making device %s:%d", type_name, index);
    return NULL;
  }
  d->host = type == MF_CPU && index == 0;
  snprintf(d->short_name, sizeof d->short_name, "/device:%s:%d", d->cls->type_name, index);
  snprintf(d->name, sizeof d->name, "/job:localhost/replica:0/task:0%s", d->short_name);
  return d;
}

void mf_device_free(mf_device *d) {
  if (!d) return;
  mf_allocator_release(d->allocator);
  mf_free(d);
}

mf_kernel_fn mf_device_kernel(const mf_device *d, const mf_op_def *def) { return def->kernel[d->type]; }

/* Counts one copy of `bytes` off `from` and onto `to`. */
static void count_copy(mf_device *from, mf_device *to, uint64_t bytes) {
  atomic_fetch_add_explicit(&from->copies_from, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&from->bytes_from, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&to->copies_to, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&to->bytes_to, bytes, memory_order_relaxed);
}

mf_code mf_device_copy(mf_device *from, const mf_tensor *src, mf_device *to, mf_tensor *dst, mf_status *s) {
  if (dst->dtype != src->dtype || dst->size != src->size)
    return mf_status_set(s, MF_INTERNAL, "copy from %s to %s: a %s value of %lld elements into a %s value of %lld",
                         from->short_name, to->short_name, mf_dtype_name(src->dtype), (long long)src->size,
                         mf_dtype_name(dst->dtype), (long long)dst->size);
  if (src->dtype == MF_STRING)
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "string values stay on the host (CPU:0); a copy from %s to %s was asked for one: place "
                         "the ops that make and read strings on /cpu:0", from->short_name, to->short_name);
  if (to->host) {
    if (from->cls->copy_to_host(from, dst, src, s)) return s->code;
  } else if (from->host) {
    if (to->cls->copy_from_host(to, dst, src, s)) return s->code;
  } else {  /* between two devices: through a host buffer */
    mf_tensor *staged = mf_tensor_new_uninit(src->dtype, src->rank, src->dims, s);
    if (!staged) return s->code;
    if (!from->cls->copy_to_host(from, staged, src, s)) to->cls->copy_from_host(to, dst, staged, s);
    mf_tensor_release(staged);
    if (!mf_ok(s)) return s->code;
  }
  count_copy(from, to, mf_tensor_nbytes(src));
  return MF_OK;
}
