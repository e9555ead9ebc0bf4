/* file.h — crash-safe writes (file.c): a locked temporary file beside the
 * destination, flushed and renamed over it when done. Writers that stream
 * (TFRecord files, event files) use these; mf_file_write_atomic (moonflow.h)
 * writes a file from memory in one call. */
#ifndef MF_IO_FILE_H
#define MF_IO_FILE_H

#include "core/base.h"

enum { MF_PATH_MAX = 4096 };
/* Opens a new temporary file for path (its name into tmp), after removing
 * path's temporary files that writers who died left; the fd, or -1 with s set. */
int mf_temp_file_open(const char *path, char tmp[MF_PATH_MAX], mf_status *s);
/* Flushes fd to disk, renames tmp over path, closes fd and flushes the
 * directory. On error the temporary file is removed and path is unchanged. */
mf_code mf_temp_file_commit(int fd, const char *tmp, const char *path, mf_status *s);
/* Removes the temporary file and closes fd: path stays as it was. */
void mf_temp_file_abandon(int fd, const char *tmp);
/* Writes all n bytes to fd; false with errno set on failure. */
bool mf_write_all(int fd, const void *p, size_t n);

#endif
