/* status.c — error reporting objects. */
#include "core/status.h"
#include "core/memory.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

mf_status *mf_status_new(void) { return mf_calloc(1, sizeof(mf_status)); }
void mf_status_free(mf_status *s) { mf_free(s); }
mf_code mf_status_code(const mf_status *s) { return s->code; }
const char *mf_status_message(const mf_status *s) { return s->msg; }
void mf_status_clear(mf_status *s) { s->code = MF_OK; s->msg[0] = '\0'; }

mf_code mf_status_set(mf_status *s, mf_code code, const char *fmt, ...) {
  s->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg, sizeof s->msg, fmt, ap);
  va_end(ap);
  return code;
}

void mf_status_append(mf_status *s, const char *fmt, ...) {
  size_t len = strlen(s->msg);
  if (len + 1 >= sizeof s->msg) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg + len, sizeof s->msg - len, fmt, ap);
  va_end(ap);
}
