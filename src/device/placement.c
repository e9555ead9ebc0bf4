/* placement.c — TensorFlow device strings, and where an op runs among a
 * session's devices (its placement, decided once per plan by exec/plan.c).
 *
 * A device string names any of job, replica, task and device (type and
 * index), e.g. "/job:localhost/replica:0/task:0/device:GPU:1". TensorFlow's
 * legacy forms are accepted too: "/cpu:0", "/gpu:1", "CPU:0", "/device:GPU"
 * (any GPU), "/gpu:*". The normal form, written by mf_device_merge, lists the
 * fields that are set in that order, e.g. "/device:CPU:0".
 *
 * An op asking for a device the session lacks (a GPU in this build, CPU:1 in
 * a session with one CPU) is an error unless the session allows soft
 * placement. */
#include "core/dtype.h"
#include "core/status.h"
#include "graph/graph.h"
#include "device/device.h"
#include "device/cuda/cuda_api.h"

#include <stdarg.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---------- parsing ---------- */

/* A nonnegative decimal number or "*" (-1: unset) filling the rest of [p, end). */
static bool parse_index(const char *p, const char *end, int *out) {
  if (end - p == 1 && *p == '*') {
    *out = -1;
    return true;
  }
  if (p == end) return false;
  long v = 0;
  for (; p < end; p++) {
    if (!isdigit((unsigned char)*p)) return false;
    v = v * 10 + (*p - '0');
    if (v > INT_MAX) return false;
  }
  *out = (int)v;
  return true;
}

/* A name: a letter, then letters, digits and '_' (job names and device types). */
static bool parse_name(const char *p, const char *end, char *out, size_t cap, bool upper) {
  size_t n = (size_t)(end - p);
  if (n == 0 || n >= cap || !isalpha((unsigned char)*p)) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if (!isalnum(c) && c != '_') return false;
    out[i] = upper ? (char)toupper(c) : (char)c;
  }
  out[n] = '\0';
  return true;
}

static bool has_prefix(const char *p, const char *end, const char *prefix) {
  size_t n = strlen(prefix);
  return (size_t)(end - p) > n && strncmp(p, prefix, n) == 0;
}

/* Parses one '/'-separated field into d. */
static bool parse_field(const char *p, const char *end, mf_device_spec *d) {
  if (has_prefix(p, end, "job:")) {
    if (!parse_name(p + 4, end, d->job, sizeof d->job, false)) return false;
    return true;
  }
  if (has_prefix(p, end, "replica:")) return parse_index(p + 8, end, &d->replica);
  if (has_prefix(p, end, "task:")) return parse_index(p + 5, end, &d->task);
  if (has_prefix(p, end, "device:")) p += 7;  /* device:TYPE[:INDEX]; else the legacy TYPE:INDEX */
  else if (!memchr(p, ':', (size_t)(end - p))) return false;
  const char *colon = memchr(p, ':', (size_t)(end - p));
  if (!parse_name(p, colon ? colon : end, d->type, sizeof d->type, true)) return false;
  d->index = -1;
  return colon ? parse_index(colon + 1, end, &d->index) : true;
}

mf_code mf_device_spec_parse(const char *str, mf_device_spec *d, mf_status *s) {
  memset(d, 0, sizeof *d);
  d->replica = d->task = d->index = -1;
  if (!str || !*str) return MF_OK;
  const char *p = str;
  if (*p == '/') p++;
  for (;;) {
    const char *end = strchr(p, '/');
    if (!end) end = p + strlen(p);
    if (!parse_field(p, end, d))
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "Malformed device specification '%s': expected a TensorFlow device string such as "
                           "'/cpu:0', '/device:GPU:1' or '/job:localhost/replica:0/task:0/device:CPU:0'",
                           str);
    if (!*end) return MF_OK;
    p = end + 1;
  }
}

void mf_device_spec_merge(mf_device_spec *outer, const mf_device_spec *inner) {
  if (inner->job[0]) memcpy(outer->job, inner->job, sizeof outer->job);
  if (inner->replica >= 0) outer->replica = inner->replica;
  if (inner->task >= 0) outer->task = inner->task;
  if (inner->type[0]) memcpy(outer->type, inner->type, sizeof outer->type);
  if (inner->index >= 0) outer->index = inner->index;
}

/* Appends to buf[0..cap) at *len, truncating. */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) MF_PRINTF(4, 5);
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (n > 0) *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

size_t mf_device_spec_str(const mf_device_spec *d, char *buf, size_t cap) {
  size_t len = 0;
  if (cap) buf[0] = '\0';
  if (d->job[0]) put(buf, cap, &len, "/job:%s", d->job);
  if (d->replica >= 0) put(buf, cap, &len, "/replica:%d", d->replica);
  if (d->task >= 0) put(buf, cap, &len, "/task:%d", d->task);
  if (d->type[0]) {
    if (d->index >= 0) put(buf, cap, &len, "/device:%s:%d", d->type, d->index);
    else put(buf, cap, &len, "/device:%s:*", d->type);
  } else if (d->index >= 0) {
    put(buf, cap, &len, "/device:*:%d", d->index);
  }
  return len;
}

mf_code mf_device_merge(const char *outer, const char *spec, char *out, size_t cap, mf_status *s) {
  mf_status_clear(s);
  mf_device_spec a, b;
  if (mf_device_spec_parse(outer, &a, s) || mf_device_spec_parse(spec, &b, s)) return s->code;
  mf_device_spec_merge(&a, &b);
  char buf[MF_DEVICE_NAME_MAX];
  size_t n = mf_device_spec_str(&a, buf, sizeof buf);
  if (n + 1 > cap)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "the normal form of device specification '%s' needs %zu bytes, "
                         "more than the %zu given", spec ? spec : "", n + 1, cap);
  memcpy(out, buf, n + 1);
  return MF_OK;
}

/* ---------- placement ---------- */

/* The device type a parsed type name stands for; false for types this engine
 * does not know (TPU, ...), which no device of this process matches. */
static bool device_type_of(const char *type, mf_device_type *out) {
  if (strcmp(type, "CPU") == 0) *out = MF_CPU;
  else if (strcmp(type, "GPU") == 0) *out = MF_CUDA;
  else return false;
  return true;
}

/* Lists the devices: "/device:CPU:0, /device:CPU:1". */
static void list_devices(mf_device *const *devices, int n, char *buf, size_t cap) {
  size_t len = 0;
  if (cap) buf[0] = '\0';
  for (int i = 0; i < n; i++) put(buf, cap, &len, "%s%s", len ? ", " : "", devices[i]->short_name);
}

/* The device of devices[0..n) that spec d names: the first of its type when
 * it names no index; NULL when none matches. */
static mf_device *find_device(mf_device *const *devices, int n, const mf_device_spec *d) {
  mf_device_type type = MF_CPU;
  if (d->type[0] && !device_type_of(d->type, &type)) return NULL;
  if ((d->job[0] && strcmp(d->job, "localhost") != 0) || d->replica > 0 || d->task > 0) return NULL;
  for (int i = 0; i < n; i++)
    if (devices[i]->type == type && (d->index < 0 || devices[i]->index == d->index)) return devices[i];
  return NULL;
}

/* Whether d's dtypes mask takes dtype t: a GPU never takes strings or
 * complex values (no kernel of this first step does), and otherwise what the
 * op's cuda_dtypes lists (0: any). */
static bool gpu_takes(const mf_op_def *def, mf_dtype t) {
  if (t == MF_STRING || t == MF_COMPLEX64 || t == MF_COMPLEX128) return false;
  return !def->cuda_dtypes || (def->cuda_dtypes >> t & 1u);
}

bool mf_device_fits(const mf_device *d, const mf_op *op, char *why, size_t cap) {
  const mf_op_def *def = op->def;
  if (!mf_device_kernel(d, def)) {
    snprintf(why, cap, "no %s kernel for %s", d->cls->type_name, def->name);
    return false;
  }
  if (d->type != MF_CUDA) return true;
  for (int k = 0; k < op->num_inputs; k++) {
    mf_dtype t = mf_port_dtype(op->inputs[k]);
    if (!mf_def_host_input(def, k) && !gpu_takes(def, t)) {
      snprintf(why, cap, "no GPU kernel for dtype %s (input %d of %s)", mf_dtype_name(t), k, def->name);
      return false;
    }
  }
  for (int i = 0; i < op->num_outputs; i++) {
    if (!gpu_takes(def, op->out_dtypes[i])) {
      snprintf(why, cap, "no GPU kernel for dtype %s (output %d of %s)", mf_dtype_name(op->out_dtypes[i]), i,
               def->name);
      return false;
    }
  }
  return true;
}

/* Whether every value op makes and every input it reads from device memory
 * is floating point. Only such ops go to a GPU unasked: integers and bools
 * are shapes, counters, indices, predicates and handles (a TensorArray's),
 * which host code reads, so they stay in host memory as TensorFlow keeps
 * int32 there. */
static bool float_values_only(const mf_op *op) {
  if (op->num_outputs == 0) return false;
  for (int k = 0; k < op->num_inputs; k++)
    if (!mf_def_host_input(op->def, k) && !mf_dtype_is_float(mf_port_dtype(op->inputs[k]))) return false;
  for (int i = 0; i < op->num_outputs; i++)
    if (!mf_dtype_is_float(op->out_dtypes[i])) return false;
  return true;
}

/* The session's GPU:0, NULL when it has none. */
static mf_device *first_gpu(mf_device *const *devices, int n) {
  for (int i = 0; i < n; i++)
    if (devices[i]->type == MF_CUDA && devices[i]->index == 0) return devices[i];
  return NULL;
}

mf_code mf_device_place(mf_device *const *devices, int n, const mf_op *op, bool allow_soft, mf_placement *out,
                        mf_status *s) {
  mf_device_spec d;
  char why[160];
  out->device = devices[0];
  out->soft = false;
  out->requested[0] = '\0';
  if (!op->device[0]) {  /* TensorFlow's default: GPU:0 when the op runs there, host values on the host */
    mf_device *gpu = first_gpu(devices, n);
    if (gpu && float_values_only(op) && mf_device_fits(gpu, op, why, sizeof why)) out->device = gpu;
    return MF_OK;
  }
  if (mf_device_spec_parse(op->device, &d, s)) {
    mf_status_append(s, " on operation '%s'", op->name);
    return s->code;
  }
  mf_device_spec_str(&d, out->requested, sizeof out->requested);
  mf_device *dev = find_device(devices, n, &d);
  if (dev && mf_device_fits(dev, op, why, sizeof why)) {
    out->device = dev;
    return MF_OK;
  }
  if (allow_soft) {
    out->soft = true;
    return MF_OK;
  }
  if (!dev) {
    char avail[256];
    list_devices(devices, n, avail, sizeof avail);
    mf_device_type type;
    bool gpu = d.type[0] && device_type_of(d.type, &type) && type == MF_CUDA;
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "Cannot assign a device for operation '%s': Could not satisfy explicit device "
                         "specification '%s' because no devices matching that specification are registered "
                         "in this process; available devices: %s%s%s",
                         op->name, out->requested, avail, gpu && mf_cuda_status()[0] ? "; no GPU in this process: " : "",
                         gpu ? mf_cuda_status() : "");
  }
  return mf_status_set(s, MF_INVALID_ARGUMENT,
                       "Cannot assign a device for operation '%s': Could not satisfy explicit device "
                       "specification '%s' because no supported kernel for %s devices is available: %s",
                       op->name, out->requested, dev->cls->type_name, why);
}
