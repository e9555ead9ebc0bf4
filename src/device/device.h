/* device.h — device strings and placement (placement.c). */
#ifndef MF_DEVICE_DEVICE_H
#define MF_DEVICE_DEVICE_H

#include "core/base.h"

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
/* Where an op runs. */
typedef struct mf_placement {
  mf_device_type type;
  int index;
  bool soft;             /* the requested device was unavailable: soft placement chose CPU:0 */
  char requested[MF_DEVICE_NAME_MAX]; /* the op's device in normal form; "" when it names none */
} mf_placement;
/* Places op by its device string: the named device when present with a kernel
 * for the op, else CPU:0 when allow_soft, else an error in TensorFlow's words. */
mf_code mf_device_place(const mf_op *op, bool allow_soft, mf_placement *out, mf_status *s);
/* "/device:CPU:0" for a placement. */
void mf_device_placement_name(const mf_placement *p, char *buf, size_t cap);

#endif
