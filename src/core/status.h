/* status.h — the status object behind mf_status (status.c). */
#ifndef MF_CORE_STATUS_H
#define MF_CORE_STATUS_H

#include "core/base.h"

struct mf_status {
  mf_code code;
  char msg[1024];
};
/* mf_status_set (set code and a printf-formatted message) is in moonflow.h, for op libraries. */
/* Appends to the message of an error status. */
void mf_status_append(mf_status *s, const char *fmt, ...) MF_PRINTF(2, 3);
static inline bool mf_ok(const mf_status *s) { return s->code == MF_OK; }

#endif
