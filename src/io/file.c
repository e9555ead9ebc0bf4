/* file.c — crash-safe file writes (checkpoints, graph files).
 *
 * A write goes to a temporary file beside the destination, is flushed to
 * disk, renamed over the destination and the directory is flushed, so a
 * crash at any point leaves the old file or the new one. The writer holds an
 * exclusive flock on its temporary file until the rename: a temporary file
 * of the destination that nobody holds locked belongs to a writer that died,
 * and the next write to that destination removes it (locks die with their
 * process, so no pid is ever guessed at). */
#define _DEFAULT_SOURCE 1 /* flock, O_CLOEXEC, O_DIRECTORY */
#include "io/file.h"
#include "core/status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporary files are named "<destination>.tmp-<pid>-<k>". */
#define TMP_TAG ".tmp-"

/* Splits path into its directory ("." when it has none) and base name. */
static void split_path(const char *path, char *dir, size_t dir_cap, const char **base) {
  const char *slash = strrchr(path, '/');
  *base = slash ? slash + 1 : path;
  if (!slash) snprintf(dir, dir_cap, ".");
  else if (slash == path) snprintf(dir, dir_cap, "/");
  else snprintf(dir, dir_cap, "%.*s", (int)(slash - path), path);
}

/* Whether name is "<base>.tmp-<digits>-<digits>". */
static bool is_temp_of(const char *name, const char *base) {
  size_t n = strlen(base);
  if (strncmp(name, base, n) != 0 || strncmp(name + n, TMP_TAG, strlen(TMP_TAG)) != 0) return false;
  const char *p = name + n + strlen(TMP_TAG);
  for (int part = 0; part < 2; part++) {
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    if (part == 0 && *p++ != '-') return false;
  }
  return *p == '\0';
}

/* Removes the temporary files of base in dir whose writers died. */
static void remove_stale_temps(const char *dir, const char *base) {
  DIR *d = opendir(dir);
  if (!d) return;  /* creating the temporary file reports why */
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!is_temp_of(e->d_name, base)) continue;
    char full[4096];
    if (snprintf(full, sizeof full, "%s/%s", dir, e->d_name) >= (int)sizeof full) continue;
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) unlink(full);
    close(fd);
  }
  closedir(d);
}

/* Creates and locks a new temporary file for path; -1 with s set on failure. */
static int create_temp(const char *path, const char *dir, char *tmp, size_t cap, mf_status *s) {
  for (unsigned k = 0;; k++) {
    if (snprintf(tmp, cap, "%s" TMP_TAG "%ld-%u", path, (long)getpid(), k) >= (int)cap) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "cannot write %s: the path is too long", path);
      return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;  /* another thread of this process writes path */
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == EROFS)
        mf_status_set(s, MF_NOT_FOUND, "cannot write %s: the directory %s does not exist or is not writable",
                      path, dir);
      else
        mf_status_set(s, MF_UNKNOWN, "cannot create a temporary file beside %s (%s)", path, strerror(errno));
      return -1;
    }
    struct stat st;
    if (flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 && st.st_nlink > 0) return fd;
    close(fd);  /* a cleaner took it for stale between open and flock: it is gone, try another name */
  }
}

bool mf_write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

int mf_temp_file_open(const char *path, char tmp[MF_PATH_MAX], mf_status *s) {
  mf_status_clear(s);
  char dir[MF_PATH_MAX];
  const char *base;
  split_path(path, dir, sizeof dir, &base);
  if (!*base) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "cannot write %s: it names a directory", path);
    return -1;
  }
  remove_stale_temps(dir, base);
  return create_temp(path, dir, tmp, MF_PATH_MAX, s);
}

/* The status of a failed write of path (errno err): a full disk, or another I/O error. */
static mf_code write_failed(const char *path, int err, mf_status *s) {
  bool full = err == ENOSPC || err == EFBIG || err == EDQUOT;
  return mf_status_set(s, full ? MF_RESOURCE_EXHAUSTED : MF_UNKNOWN,
                       "writing %s failed (%s); the previous file is unchanged", path, strerror(err));
}

void mf_temp_file_abandon(int fd, const char *tmp) {
  unlink(tmp);
  close(fd);
}

mf_code mf_temp_file_commit(int fd, const char *tmp, const char *path, mf_status *s) {
  if (fsync(fd) != 0) {
    int err = errno;
    mf_temp_file_abandon(fd, tmp);
    return write_failed(path, err, s);
  }
  if (rename(tmp, path) != 0) {
    int err = errno;
    mf_temp_file_abandon(fd, tmp);
    return mf_status_set(s, MF_UNKNOWN, "cannot rename %s to %s: %s", tmp, path, strerror(err));
  }
  close(fd);  /* only now: a locked temporary file is never taken for stale */
  /* The rename is durable once the directory is flushed; file systems that
   * cannot flush a directory say EINVAL, and there the rename is as durable
   * as they make it. */
  char dir[MF_PATH_MAX];
  const char *base;
  split_path(path, dir, sizeof dir, &base);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    int rc = fsync(dfd), err = errno;
    close(dfd);
    if (rc != 0 && err != EINVAL)
      return mf_status_set(s, MF_UNKNOWN, "wrote %s, but flushing its directory failed (%s): a crash now may "
                           "lose the new file", path, strerror(err));
  }
  return MF_OK;
}

mf_code mf_file_write_atomic(const char *path, const void *const *data, const size_t *sizes, int n,
                             mf_status *s) {
  char tmp[MF_PATH_MAX];
  int fd = mf_temp_file_open(path, tmp, s);
  if (fd < 0) return s->code;
  for (int i = 0; i < n; i++)
    if (!mf_write_all(fd, data[i], sizes[i])) {
      int err = errno;
      mf_temp_file_abandon(fd, tmp);
      return write_failed(path, err, s);
    }
  return mf_temp_file_commit(fd, tmp, path, s);
}
