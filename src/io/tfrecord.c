/* tfrecord.c — TFRecord files: records framed with their lengths and masked
 * CRC-32Cs (io/crc32c.h), the whole file optionally one gzip or zlib stream.
 * Files are written crash-safely (io/file.h) through zlib's gzFile, which
 * writes plain bytes ("T" mode) when there is no gzip compression; a ZLIB
 * file's bytes come from a deflate stream of ours. Reading plain files goes
 * through stdio, gzip files through gzFile, ZLIB files through stdio and an
 * inflate stream. */
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

typedef enum stream_kind { NONE, GZIP, ZLIB } stream_kind;
enum { ZLIB_CHUNK = 1 << 16 };

/* The compression that a compression_type names ("" or NULL: none);
 * INVALID_ARGUMENT for others. */
static mf_code parse_compression(const char *name, stream_kind *c, mf_status *s) {
  *c = !name || !name[0] ? NONE : strcmp(name, "GZIP") == 0 ? GZIP : ZLIB;
  if (*c != ZLIB || strcmp(name, "ZLIB") == 0) return MF_OK;
  return mf_status_set(s, MF_INVALID_ARGUMENT, "compression_type must be \"\", \"GZIP\" or \"ZLIB\", got \"%s\"", name);
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
  z_stream *z;     /* ZLIB: the deflate stream whose output goes to gz */
  char *path;
  char tmp[MF_PATH_MAX];
};

mf_record_writer *mf_record_writer_open(const char *path, const char *compression, mf_status *s) {
  stream_kind c;
  mf_status_clear(s);
  if (parse_compression(compression, &c, s)) return NULL;
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
  w->gz = dup_fd >= 0 ? gzdopen(dup_fd, c == GZIP ? "wb" : "wbT") : NULL;
  if (!w->gz) {
    if (dup_fd >= 0) close(dup_fd);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "cannot start writing %s (%s)", path, strerror(errno));
    mf_record_writer_abandon(w);
    return NULL;
  }
  if (c == ZLIB && (!(w->z = mf_calloc(1, sizeof *w->z)) || deflateInit(w->z, Z_DEFAULT_COMPRESSION) != Z_OK)) {
    mf_free(w->z);
    w->z = NULL;
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "cannot start compressing %s (out of memory)", path);
    mf_record_writer_abandon(w);
    return NULL;
  }
  return w;
}

/* Writes n bytes to the file: through deflate with flush (Z_NO_FLUSH,
 * Z_SYNC_FLUSH, Z_FINISH) for ZLIB, else as they are. gzwrite takes unsigned
 * counts: big pieces go in parts. False when a write failed. */
static bool put_bytes(mf_record_writer *w, const void *data, size_t n, int flush) {
  const unsigned char *p = data;
  if (!w->z) {
    for (size_t left = n; left > 0;) {
      unsigned piece = left > (1u << 30) ? (1u << 30) : (unsigned)left;
      if (gzwrite(w->gz, p, piece) != (int)piece) return false;
      p += piece;
      left -= piece;
    }
    return true;
  }
  unsigned char out[ZLIB_CHUNK];
  size_t left = n;
  int rc;
  do {
    unsigned piece = left > (1u << 30) ? (1u << 30) : (unsigned)left;
    w->z->next_in = (unsigned char *)p, w->z->avail_in = piece;
    int f = left > piece ? Z_NO_FLUSH : flush;
    do {  /* until deflate has taken the piece and, flushing, has no more to give */
      w->z->next_out = out, w->z->avail_out = sizeof out;
      rc = deflate(w->z, f);
      unsigned made = (unsigned)(sizeof out - w->z->avail_out);
      if (rc == Z_STREAM_ERROR || (made && gzwrite(w->gz, out, made) != (int)made)) return false;
    } while (w->z->avail_out == 0 || (f == Z_FINISH && rc != Z_STREAM_END));
    p += piece;
    left -= piece;
  } while (left > 0);
  return true;
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
  bool ok = put_bytes(w, header, HEADER, Z_NO_FLUSH) && put_bytes(w, data, n, Z_NO_FLUSH) &&
            put_bytes(w, footer, FOOTER, Z_NO_FLUSH);
  return ok ? MF_OK : gz_failed(w, "writing a record to", s);
}

mf_code mf_record_writer_flush(mf_record_writer *w, mf_status *s) {
  mf_status_clear(s);
  bool ok = !w->z || put_bytes(w, NULL, 0, Z_SYNC_FLUSH);
  return ok && gzflush(w->gz, Z_SYNC_FLUSH) == Z_OK ? MF_OK : gz_failed(w, "flushing", s);
}

static void free_writer(mf_record_writer *w) {
  if (w->z) deflateEnd(w->z);
  mf_free(w->z);
  mf_free(w->path);
  mf_free(w);
}

mf_code mf_record_writer_close(mf_record_writer *w, mf_status *s) {
  mf_status_clear(s);
  if (w->z && !put_bytes(w, NULL, 0, Z_FINISH)) {
    gz_failed(w, "finishing the zlib stream of", s);
    mf_record_writer_abandon(w);
    return s->code;
  }
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
  z_stream *z;       /* ZLIB: inflating what plain reads into zin */
  unsigned char *zin;
  bool z_ended;      /* the zlib stream's end was read */
  const char *z_error; /* why the zlib stream could not be read */
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
  stream_kind c;
  mf_status_clear(s);
  if (parse_compression(compression, &c, s)) return NULL;
  mf_record_reader *r = mf_calloc(1, sizeof *r);
  if (!r || !(r->path = mf_strdup(path))) {
    mf_free(r);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory opening %s", path);
    return NULL;
  }
  r->skip_corrupt = skip_corrupt;
  if (c == GZIP) r->gz = gzopen(path, "rb");
  else r->plain = fopen(path, "rb");
  if (!r->gz && !r->plain) {
    mf_status_set(s, MF_NOT_FOUND, "%s: %s", path, strerror(errno ? errno : ENOENT));
    mf_record_reader_free(r);
    return NULL;
  }
  if (c == ZLIB && (!(r->z = mf_calloc(1, sizeof *r->z)) || !(r->zin = mf_malloc(ZLIB_CHUNK)) ||
                    inflateInit(r->z) != Z_OK)) {
    mf_free(r->z);
    r->z = NULL;
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory opening %s", path);
    mf_record_reader_free(r);
    return NULL;
  }
  return r;
}

/* Inflates up to n bytes of a ZLIB file into p, as read_some. */
static int64_t inflate_some(mf_record_reader *r, void *p, size_t n) {
  size_t got = 0;
  while (got < n && !r->z_ended) {
    if (r->z->avail_in == 0) {
      size_t k = fread(r->zin, 1, ZLIB_CHUNK, r->plain);
      if (k == 0) {
        r->z_error = ferror(r->plain) ? NULL : "the zlib stream is truncated";
        return -1;
      }
      r->z->next_in = r->zin, r->z->avail_in = (unsigned)k;
    }
    size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
    r->z->next_out = (unsigned char *)p + got, r->z->avail_out = (unsigned)want;
    int rc = inflate(r->z, Z_NO_FLUSH);
    got += want - r->z->avail_out;
    if (rc == Z_STREAM_END) r->z_ended = true;
    else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      r->z_error = r->z->msg ? r->z->msg : "not a zlib stream";
      return -1;
    }
  }
  return (int64_t)got;
}

/* Reads up to n bytes; the count read (short only at the end), or -1 on a read error. */
static int64_t read_some(mf_record_reader *r, void *p, size_t n) {
  if (r->z) return inflate_some(r, p, n);
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
  if (r->z_error) why = r->z_error, zerr = Z_DATA_ERROR;
  else if (zerr == Z_ERRNO) why = strerror(errno);
  return mf_status_set(s, zerr != Z_ERRNO ? MF_DATA_LOSS : MF_UNKNOWN,
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
  if (r->z) inflateEnd(r->z);
  mf_free(r->z);
  mf_free(r->zin);
  mf_free(r->buf);
  mf_free(r->path);
  mf_free(r);
}
