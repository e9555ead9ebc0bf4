/* event_writer.c — TensorBoard event files: TFRecord-framed Event messages
 * (proto/event.proto) appended to "events.out.tfevents.<seconds>.<host>"
 * in a log directory, the first event holding file_version "brain.Event:2".
 *
 * TensorBoard reads event files while they grow, so they are not written
 * through a temporary file: events are framed in memory (header, data,
 * footer, as tfrecord.c frames them) and reach the file on flush, whole
 * records in one write() each, so a reader sees a torn record only at the
 * end of a file whose writer died in a write; TensorBoard and
 * tf.train.summary_iterator stop quietly at such a truncated tail. */
#define _DEFAULT_SOURCE 1 /* gethostname, O_CLOEXEC */
#include "io/file.h"
#include "io/crc32c.h"
#include "core/memory.h"
#include "core/status.h"
#include "proto/event.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

struct mf_event_writer {
  int fd;
  char *path;
  unsigned char *pending;  /* framed records not yet written */
  size_t used, cap;
};

double mf_wall_time(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* mkdir -p: creates dir and its missing parents. */
static mf_code make_dirs(const char *dir, mf_status *s) {
  char p[MF_PATH_MAX];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "log directory name too long: %.80s...", dir);
  for (char *c = p + 1;; c++) {
    bool end = !*c;
    if (*c == '/' || end) {
      *c = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST)
        return mf_status_set(s, MF_NOT_FOUND, "cannot create log directory %s (%s)", p, strerror(errno));
      if (end) break;
      *c = '/';
    }
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return mf_status_set(s, MF_FAILED_PRECONDITION, "log directory %s is not a directory", dir);
  return MF_OK;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> 8 * i);
}

/* Frames an Event into the pending bytes. */
static mf_code add_event(mf_event_writer *w, const Tensorflow__Event *ev, mf_status *s) {
  size_t n = tensorflow__event__get_packed_size(ev);
  size_t need = w->used + 12 + n + 4;
  if (need > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < need) cap *= 2;
    unsigned char *p = mf_realloc(w->pending, cap);
    if (!p) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory adding an event of %zu bytes", n);
    w->pending = p;
    w->cap = cap;
  }
  unsigned char *r = w->pending + w->used;
  put_le(r, n, 8);
  put_le(r + 8, mf_crc32c_mask(mf_crc32c_extend(0, r, 8)), 4);
  tensorflow__event__pack(ev, r + 12);
  put_le(r + 12 + n, mf_crc32c_mask(mf_crc32c_extend(0, r + 12, n)), 4);
  w->used = need;
  return MF_OK;
}

mf_code mf_event_writer_flush(mf_event_writer *w, mf_status *s) {
  mf_status_clear(s);
  if (w->used && !mf_write_all(w->fd, w->pending, w->used))
    return mf_status_set(s, errno == ENOSPC || errno == EFBIG ? MF_RESOURCE_EXHAUSTED : MF_UNKNOWN,
                         "writing events to %s failed (%s)", w->path, strerror(errno));
  w->used = 0;
  if (fdatasync(w->fd) != 0)
    return mf_status_set(s, MF_UNKNOWN, "flushing %s failed (%s)", w->path, strerror(errno));
  return MF_OK;
}

void mf_event_writer_free(mf_event_writer *w) {
  if (!w) return;
  if (w->fd >= 0) close(w->fd);
  mf_free(w->pending);
  mf_free(w->path);
  mf_free(w);
}

mf_code mf_event_writer_close(mf_event_writer *w, mf_status *s) {
  mf_event_writer_flush(w, s);
  mf_event_writer_free(w);
  return s->code;
}

mf_event_writer *mf_event_writer_open(const char *logdir, const char *suffix, mf_status *s) {
  mf_status_clear(s);
  if (make_dirs(logdir, s)) return NULL;
  char host[256] = "localhost", path[MF_PATH_MAX];
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
  double now = mf_wall_time();
  int fd = -1;
  /* TensorFlow's name; a second writer of the same second and host gets ".1", ".2"... after it. */
  for (int k = 0; fd < 0 && k < 1000; k++) {
    int len = snprintf(path, sizeof path, "%s/events.out.tfevents.%010lld.%s%s", logdir, (long long)now, host,
                       suffix ? suffix : "");
    if (k) len += snprintf(path + len, sizeof path - (size_t)len, ".%d", k);
    if (len >= (int)sizeof path) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "event file name too long in %.80s...", logdir);
      return NULL;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    mf_status_set(s, MF_NOT_FOUND, "cannot create event file %s (%s)", path, strerror(errno));
    return NULL;
  }
  mf_event_writer *w = mf_calloc(1, sizeof *w);
  if (!w || !(w->path = mf_strdup(path))) {
    close(fd);
    unlink(path);
    mf_free(w);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory opening %s", path);
    return NULL;
  }
  w->fd = fd;
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  ev.wall_time = now;
  ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
  ev.file_version = "brain.Event:2";
  if (add_event(w, &ev, s) || mf_event_writer_flush(w, s)) {
    mf_event_writer_free(w);
    unlink(path);
    return NULL;
  }
  return w;
}

const char *mf_event_writer_path(const mf_event_writer *w) { return w->path; }

mf_code mf_event_writer_add_event(mf_event_writer *w, const void *event, size_t n, mf_status *s) {
  mf_status_clear(s);
  Tensorflow__Event *ev = tensorflow__event__unpack(NULL, n, event);
  if (!ev) return mf_status_set(s, MF_INVALID_ARGUMENT, "add_event: %zu bytes that are no Event", n);
  add_event(w, ev, s);
  tensorflow__event__free_unpacked(ev, NULL);
  return s->code;
}

mf_code mf_event_writer_add_summary(mf_event_writer *w, const void *summary, size_t n, int64_t step,
                                    double wall_time, mf_status *s) {
  mf_status_clear(s);
  Tensorflow__Summary *sum = tensorflow__summary__unpack(NULL, n, summary);
  if (!sum) return mf_status_set(s, MF_INVALID_ARGUMENT, "add_summary: %zu bytes that are no Summary", n);
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  ev.wall_time = wall_time;
  ev.step = step;
  ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
  ev.summary = sum;
  add_event(w, &ev, s);
  tensorflow__summary__free_unpacked(sum, NULL);
  return s->code;
}

mf_code mf_event_writer_add_graph(mf_event_writer *w, const void *graph_def, size_t n, double wall_time,
                                  mf_status *s) {
  mf_status_clear(s);
  Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
  ev.wall_time = wall_time;
  ev.what_case = TENSORFLOW__EVENT__WHAT_GRAPH_DEF;
  ev.graph_def = (ProtobufCBinaryData){.len = n, .data = (uint8_t *)graph_def};
  return add_event(w, &ev, s);
}
