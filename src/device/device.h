/* device.h — device strings and placement (placement.c), and the device
 * objects a session owns (device.c). */
#ifndef MF_DEVICE_DEVICE_H
#define MF_DEVICE_DEVICE_H

#include "core/base.h"
#include "device/allocator.h"
#include "graph/op_def.h"

#include <stdatomic.h>

enum { MF_DEVICE_NAME_MAX = 256 };
/* A parsed device string: "" or -1 for fields it does not name. */
typedef struct mf_device_spec {
  char job[64];
  int replica, task;
  char type[32];         /* upper case: "CPU", "GPU" */
  int index;
} mf_device_spec;
/* Parses a TensorFlow device string (NULL or "": names nothing). */
mf_code mf_device_spec_parse(const char *str, mf_device_spec *d, mf_status *s);
/* Sets in outer every field that inner names. */
void mf_device_spec_merge(mf_device_spec *outer, const mf_device_spec *inner);
/* The normal form ("/job:localhost/device:GPU:1") into buf; returns its length. */
size_t mf_device_spec_str(const mf_device_spec *d, char *buf, size_t cap);
/* ---------- devices (device.c) ---------- */

typedef struct mf_device mf_device;
/* What one kind of device does, shared by its devices: the CPU's lives in
 * device.c; a CUDA backend brings its own. Kernels come from the op
 * registry (mf_op_def.kernel[type]): there is no second registration site. */
typedef struct mf_device_class {
  mf_device_type type;
  const char *type_name;   /* TensorFlow's: "CPU", "GPU" */
  /* Copies all of src's bytes into dst, which has src's dtype and size:
   * host memory into the device's (which may finish later, in order with
   * the device's kernels), and the device's into host memory (finished when
   * it returns). */
  mf_code (*copy_from_host)(mf_device *d, mf_tensor *dst, const mf_tensor *src, mf_status *s);
  mf_code (*copy_to_host)(mf_device *d, mf_tensor *dst, const mf_tensor *src, mf_status *s);
  /* Returns once the work queued on the device is done (the CPU queues none). */
  mf_code (*sync)(mf_device *d, mf_status *s);
} mf_device_class;

/* One device of a session: made and owned by the session, freed with it.
 * Only the host device (CPU:0) holds memory the engine reads directly: feeds
 * arrive there, fetches leave from there, and host-memory inputs
 * (mf_def_host_input) are read there. Every other device, CPU:1 included, is
 * treated as a GPU would be: values reach it and leave it by copies. */
struct mf_device {
  const mf_device_class *cls;
  mf_device_type type;
  int index;
  bool host;               /* CPU:0 */
  char name[64];           /* "/job:localhost/replica:0/task:0/device:CPU:1" */
  char short_name[32];     /* "/device:CPU:1" */
  mf_allocator *allocator; /* owned (one reference): the buffers of values on this device */
  void *backend;           /* a GPU's: the CUDA backend's mf_cuda_device (device/cuda/cuda_api.h),
                              owned; NULL for CPUs */
  /* Values copied onto and off this device by runs, and their bytes. */
  _Atomic uint64_t copies_to, copies_from, bytes_to, bytes_from;
};
/* New device `index` of `type`, with an allocator of its own; NULL with s set. */
mf_device *mf_device_new(mf_device_type type, int index, mf_status *s);
/* Releases the allocator's reference (tensors still alive keep it) and frees d; NULL is fine. */
void mf_device_free(mf_device *d);
/* The kernel of def for d's device type, NULL when the op has none there. */
mf_kernel_fn mf_device_kernel(const mf_device *d, const mf_op_def *def);
/* Copies src (on device `from`) into dst (on device `to`, same dtype and
 * size), through host memory when neither is the host, and counts the copy
 * on both devices. */
mf_code mf_device_copy(mf_device *from, const mf_tensor *src, mf_device *to, mf_tensor *dst, mf_status *s);

/* ---------- GPUs (cuda.c) ---------- */

/* The GPUs the CUDA backend sees (0 without one), and GPU index's name and memory. */
int mf_cuda_device_count(void);
const char *mf_cuda_device_name(int index);
int64_t mf_cuda_device_memory(int index);
/* Opens GPU d->index for d: sets d->cls and d->backend and fills *mem with
 * the hooks of its memory, whose close closes d->backend (the allocator
 * made with them owns it). */
mf_code mf_cuda_device_open(mf_device *d, mf_device_memory *mem, mf_status *s);

/* ---------- placement (placement.c) ---------- */

/* Where an op runs. */
typedef struct mf_placement {
  mf_device *device;
  bool soft;             /* the requested device was unavailable: soft placement chose CPU:0 */
  char requested[MF_DEVICE_NAME_MAX]; /* the op's device in normal form; "" when it names none */
} mf_placement;
/* Whether op can run on d: d has a kernel for it and, on a GPU, every dtype
 * it takes (host-memory inputs excepted) and makes is in the def's
 * cuda_dtypes (strings and complex values never are); if not, why into why. */
bool mf_device_fits(const mf_device *d, const mf_op *op, char *why, size_t cap);
/* Places op by its device string among devices[0..n) (devices[0] is CPU:0):
 * the named device when present and the op fits there (mf_device_fits),
 * else CPU:0 when allow_soft, else an error in TensorFlow's words. An op
 * naming no device goes to GPU:0 when the session has one and the op fits
 * there, else to CPU:0. */
mf_code mf_device_place(mf_device *const *devices, int n, const mf_op *op, bool allow_soft, mf_placement *out,
                        mf_status *s);

#endif
