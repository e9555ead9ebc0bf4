/* tfrecord.c — TFRecord files: records framed with their lengths and masked
 * CRC-32Cs (io/crc32c.h), the whole file optionally gzip-compressed (zlib).
 * Files are written crash-safely (io/file.h) through zlib's gzFile, which
 * writes plain bytes ("T" mode) when there is no compression; reading plain
 * files goes through stdio, gzip files through gzFile. */
#define _DEFAULT_SOURCE 1 /* fileno */
#include "io/file.h"
#include "io/crc32c.h"
#include "core/memory.h"
#include "core/status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { HEADER = 12, FOOTER = 4 };

/* Whether compression names gzip; false for ""; INVALID_ARGUMENT for others. */
static mf_code parse_compression(const char *compression, bool *gzip, mf_status *s) {
  *gzip = compression && strcmp(compression, "GZIP") == 0;
  if (*gzip || !compression || !compression[0]) return MF_OK;
  return mf_status_set(s, MF_INVALID_ARGUMENT,
                       "compression_type must be \"\" or \"GZIP\", got \"%s\"%s", compression,
                       strcmp(compression, "ZLIB") == 0 ? " (ZLIB streams are not supported yet)" : "");
}

static void put_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i); }
static void put_u32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i); }
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* ---------- writing ---------- */

struct mf_record_writer {
  int fd;          /* the locked temporary file, kept open until the rename */
  gzFile gz;       /* over a duplicate of fd */
  char *path;
  char tmp[MF_PATH_MAX];
};

mf_record_writer *mf_record_writer_open(const char *path, const char *compression, mf_status *s) {
  bool gzip;
  mf_status_clear(s);
  if (parse_compression(compression, &gzip, s)) return NULL;
  mf_record_writer *w = mf_calloc(1, sizeof *w);
  if (!w || !(w->path = mf_strdup(path))) {
    mf_free(w);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory opening %s", path);
    return NULL;
  }
  w->fd = mf_temp_file_open(path, w->tmp, s);
  if (w->fd < 0) {
    mf_free(w->path);
    mf_free(w);
    return NULL;
  }
  int dup_fd = dup(w->fd);
  w->gz = dup_fd >= 0 ? gzdopen(dup_fd, gzip ? "wb" : "wbT") : NULL;
  if (!w->gz) {
    if (dup_fd >= 0) close(dup_fd);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "cannot start writing %s (%s)", path, strerror(errno));
    mf_record_writer_abandon(w);
    return NULL;
  }
  return w;
}

/* The status of a failed zlib write: errno's reason when the system gave one. */
static mf_code gz_failed(mf_record_writer *w, const char *what, mf_status *s) {
  int zerr;
  const char *why = gzerror(w->gz, &zerr);
  if (zerr == Z_ERRNO) why = strerror(errno);
  bool full = zerr == Z_ERRNO && (errno == ENOSPC || errno == EFBIG);
  return mf_status_set(s, full ? MF_RESOURCE_EXHAUSTED : MF_UNKNOWN, "%s %s failed (%s)", what, w->path, why);
}

mf_code mf_record_writer_write(mf_record_writer *w, const void *data, size_t n, mf_status *s) {
  mf_status_clear(s);
  unsigned char header[HEADER], footer[FOOTER];
  put_u64(header, n);
  put_u32(header + 8, mf_crc32c_mask(mf_crc32c_extend(0, header, 8)));
  put_u32(footer, mf_crc32c_mask(mf_crc32c_extend(0, data, n)));
  /* gzwrite takes unsigned counts: big records go in pieces. */
  const char *p = data;
  bool ok = gzwrite(w->gz, header, HEADER) == HEADER;
  for (size_t left = n; ok && left > 0;) {
    unsigned piece = left > (1u << 30) ? (1u << 30) : (unsigned)left;
    ok = gzwrite(w->gz, p, piece) == (int)piece;
    p += piece;
    left -= piece;
  }
  if (ok) ok = gzwrite(w->gz, footer, FOOTER) == FOOTER;
  return ok ? MF_OK : gz_failed(w, "writing a record to", s);
}

mf_code mf_record_writer_flush(mf_record_writer *w, mf_status *s) {
  mf_status_clear(s);
  return gzflush(w->gz, Z_SYNC_FLUSH) == Z_OK ? MF_OK : gz_failed(w, "flushing", s);
}

static void free_writer(mf_record_writer *w) {
  mf_free(w->path);
  mf_free(w);
}

mf_code mf_record_writer_close(mf_record_writer *w, mf_status *s) {
  mf_status_clear(s);
  int rc = gzclose(w->gz);  /* finishes the gzip stream and closes the duplicate fd */
  w->gz = NULL;
  if (rc != Z_OK) {
    mf_status_set(s, MF_UNKNOWN, "finishing %s failed (%s); the previous file is unchanged", w->path,
                  rc == Z_ERRNO ? strerror(errno) : "zlib error");
    mf_temp_file_abandon(w->fd, w->tmp);
  } else {
    mf_temp_file_commit(w->fd, w->tmp, w->path, s);
  }
  free_writer(w);
  return s->code;
}

void mf_record_writer_abandon(mf_record_writer *w) {
  if (!w) return;
  if (w->gz) gzclose(w->gz);
  mf_temp_file_abandon(w->fd, w->tmp);
  free_writer(w);
}

/* ---------- reading ---------- */

struct mf_record_reader {
  FILE *plain;       /* one of these two */
  gzFile gz;
  char *path;
  bool skip_corrupt;
  bool ended;        /* a corrupt length or a truncation ended a skipping read */
  uint64_t offset;   /* of the next record, in the uncompressed stream */
  int64_t skipped;
  unsigned char *buf;
  size_t cap;
};

mf_record_reader *mf_record_reader_open(const char *path, const char *compression, bool skip_corrupt,
                                        mf_status *s) {
  bool gzip;
  mf_status_clear(s);
  if (parse_compression(compression, &gzip, s)) return NULL;
  mf_record_reader *r = mf_calloc(1, sizeof *r);
  if (!r || !(r->path = mf_strdup(path))) {
    mf_free(r);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory opening %s", path);
    return NULL;
  }
  r->skip_corrupt = skip_corrupt;
  if (gzip) r->gz = gzopen(path, "rb");
  else r->plain = fopen(path, "rb");
  if (!r->gz && !r->plain) {
    mf_status_set(s, MF_NOT_FOUND, "%s: %s", path, strerror(errno ? errno : ENOENT));
    mf_record_reader_free(r);
    return NULL;
  }
  return r;
}

/* Reads up to n bytes; the count read (short only at the end), or -1 on a read error. */
static int64_t read_some(mf_record_reader *r, void *p, size_t n) {
  if (r->plain) {
    size_t got = fread(p, 1, n, r->plain);
    return got < n && ferror(r->plain) ? -1 : (int64_t)got;
  }
  size_t got = 0;
  while (got < n) {
    unsigned piece = n - got > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
    int k = gzread(r->gz, (char *)p + got, piece);
    if (k < 0) return -1;
    if (k == 0) break;
    got += (size_t)k;
  }
  return (int64_t)got;
}

static mf_code read_failed(mf_record_reader *r, mf_status *s) {
  int zerr = Z_ERRNO;
  const char *why = r->gz ? gzerror(r->gz, &zerr) : NULL;
  if (zerr == Z_ERRNO) why = strerror(errno);
  return mf_status_set(s, r->gz && zerr != Z_ERRNO ? MF_DATA_LOSS : MF_UNKNOWN,
                       "reading %s at offset %llu failed (%s)", r->path, (unsigned long long)r->offset, why);
}

/* A corrupt record at the current offset: DATA_LOSS, or (skipping) counted,
 * ending the file when what follows cannot be found. */
static mf_code corrupt(mf_record_reader *r, bool ends, mf_status *s, const char *what) {
  if (!r->skip_corrupt)
    return mf_status_set(s, MF_DATA_LOSS, "corrupted record at offset %llu of %s: %s", (unsigned long long)r->offset,
                         r->path, what);
  r->skipped++;
  r->ended |= ends;
  return MF_OK;
}

mf_code mf_record_reader_next(mf_record_reader *r, const char **data, size_t *n, mf_status *s) {
  mf_status_clear(s);
  for (;;) {
    if (r->ended) return mf_status_set(s, MF_OUT_OF_RANGE, "end of %s", r->path);
    unsigned char header[HEADER];
    int64_t got = read_some(r, header, HEADER);
    if (got < 0) return read_failed(r, s);
    if (got == 0) return mf_status_set(s, MF_OUT_OF_RANGE, "end of %s", r->path);
    if (got < HEADER) {
      if (corrupt(r, true, s, "truncated record header")) return s->code;
      continue;
    }
    uint64_t length = get_u64(header);
    if (get_u32(header + 8) != mf_crc32c_mask(mf_crc32c_extend(0, header, 8))) {
      if (corrupt(r, true, s, "the length's checksum does not match")) return s->code;
      continue;
    }
    if (length > SIZE_MAX / 2) {
      if (corrupt(r, true, s, "the record length is larger than memory")) return s->code;
      continue;
    }
    size_t need = (size_t)length + FOOTER, have = 0;
    /* The buffer grows as the file proves the bytes exist, never to what a
     * length claims alone (a corrupt length must not allocate a terabyte). */
    while (have < need) {
      if (have == r->cap) {
        size_t cap = r->cap < 4096 ? 4096 : r->cap * 2;
        if (cap > need) cap = need;
        unsigned char *b = mf_realloc(r->buf, cap);
        if (!b) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory reading a record of %s", r->path);
        r->buf = b;
        r->cap = cap;
      }
      size_t want = (r->cap < need ? r->cap : need) - have;
      got = read_some(r, r->buf + have, want);
      if (got < 0) return read_failed(r, s);
      have += (size_t)got;
      if ((size_t)got < want) break;
    }
    if (have < need) {
      if (corrupt(r, true, s, "truncated record")) return s->code;
      continue;
    }
    uint64_t at = r->offset;
    r->offset += HEADER + need;
    if (get_u32(r->buf + length) != mf_crc32c_mask(mf_crc32c_extend(0, r->buf, (size_t)length))) {
      r->offset = at;  /* the error names the record's own offset */
      mf_code code = corrupt(r, false, s, "the data's checksum does not match");
      r->offset += HEADER + need;
      if (code) return code;
      continue;
    }
    *data = (const char *)r->buf;
    *n = (size_t)length;
    return MF_OK;
  }
}

int64_t mf_record_reader_skipped(const mf_record_reader *r) { return r->skipped; }

void mf_record_reader_free(mf_record_reader *r) {
  if (!r) return;
  if (r->plain) fclose(r->plain);
  if (r->gz) gzclose(r->gz);
  mf_free(r->buf);
  mf_free(r->path);
  mf_free(r);
}
