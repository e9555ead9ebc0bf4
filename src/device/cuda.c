/* cuda.c — the CUDA backend, loaded once at first use: libmoonflow_cuda.so
 * (src/cuda/), found by MOONFLOW_CUDA_LIB or beside the loaded
 * libmoonflow.so, and used only when it was built as this core's version.
 * A program that links the core statically finds it only by
 * MOONFLOW_CUDA_LIB (the backend links no part of the core, so this is
 * safe). MOONFLOW_CUDA=0 never loads it (the sanitizer and valgrind runs
 * set it: the CUDA runtime is not built for them). Without a backend, a
 * driver or a GPU the process has 0 GPUs and mf_cuda_status says why. */
#define _GNU_SOURCE 1 /* dladdr */
#include "device/cuda/cuda_api.h"
#include "device/cuda/runtime_api.h"
#include "device/device.h"
#include "core/status.h"
#include "core/tensor.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *backend;          /* the dlopen handle; NULL when not loaded */
static const mf_cuda_runtime_api *runtime;
static char status_msg[768];   /* why there is no GPU; "" when there are GPUs */
enum { MAX_GPUS = 64 };
static int gpu_count;
static struct { char name[128]; int64_t memory; } gpus[MAX_GPUS];

/* The backend's path into buf: MOONFLOW_CUDA_LIB, else beside the shared
 * core; false with status_msg set when there is none to try. */
static bool backend_path(char *buf, size_t cap) {
  const char *env = getenv("MOONFLOW_CUDA_LIB");
  if (env && *env) {
    snprintf(buf, cap, "%s", env);
    return true;
  }
  Dl_info info;
  const char *base = NULL;
  if (dladdr((void *)mf_version, &info) && info.dli_fname) {
    base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
  }
  if (!base || strncmp(base, "libmoonflow", 11) != 0 || !strstr(base, ".so")) {
    snprintf(status_msg, sizeof status_msg,
             "moonflow is linked statically into this program: set MOONFLOW_CUDA_LIB to the path of "
             "libmoonflow_cuda.so to use GPUs");
    return false;
  }
  int dir_len = (int)(base - info.dli_fname);
  snprintf(buf, cap, "%.*slibmoonflow_cuda.so", dir_len, info.dli_fname);
  if (access(buf, F_OK) != 0) {
    snprintf(status_msg, sizeof status_msg, "no CUDA backend (%s): moonflow was built without nvcc", buf);
    return false;
  }
  return true;
}

/* The backend's runtime table, checked for this core's version; NULL with status_msg set. */
static const mf_cuda_runtime_api *open_backend(void) {
  const char *enabled = getenv("MOONFLOW_CUDA");
  if (enabled && strcmp(enabled, "0") == 0) {
    snprintf(status_msg, sizeof status_msg, "the CUDA backend is disabled (MOONFLOW_CUDA=0)");
    return NULL;
  }
  char path[512];
  if (!backend_path(path, sizeof path)) return NULL;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *err = dlerror();
    snprintf(status_msg, sizeof status_msg, "cannot load the CUDA backend: %s", err ? err : path);
    return NULL;
  }
  const mf_cuda_runtime_api *rt = dlsym(h, "mf_cuda_runtime_v1");
  if (!rt || !rt->version || strcmp(rt->version, MF_VERSION) != 0) {
    snprintf(status_msg, sizeof status_msg, "the CUDA backend %s is version %s, not moonflow's %s", path,
             rt && rt->version ? rt->version : "(unknown)", MF_VERSION);
    dlclose(h);
    return NULL;
  }
  backend = h;
  return rt;
}

static void load(void) {
  if (!(runtime = open_backend())) return;
  int count = 0;
  mf_cuda_error e = {{0}};
  if (runtime->device_count(&count, &e)) {
    snprintf(status_msg, sizeof status_msg, "no usable GPU (%s)", e.msg);
    return;
  }
  if (count == 0) snprintf(status_msg, sizeof status_msg, "no GPU visible to the CUDA runtime");
  for (int i = 0; i < count && i < MAX_GPUS; i++, gpu_count++) {
    if (runtime->device_info(i, gpus[i].name, sizeof gpus[i].name, &gpus[i].memory, &e)) {
      snprintf(status_msg, sizeof status_msg, "GPU %d is unusable (%s)", i, e.msg);
      break;
    }
  }
}

const void *mf_cuda_symbol(const char *name) {
  pthread_once(&load_once, load);
  return backend ? dlsym(backend, name) : NULL;
}

const char *mf_cuda_status(void) {
  pthread_once(&load_once, load);
  return status_msg;
}

const char *mf_gpu_status(void) { return mf_cuda_status(); }

bool mf_cuda_backend_loaded(void) {
  pthread_once(&load_once, load);
  return backend != NULL;
}

int mf_cuda_device_count(void) {
  pthread_once(&load_once, load);
  return gpu_count;
}

const char *mf_cuda_device_name(int index) {
  return index >= 0 && index < mf_cuda_device_count() ? gpus[index].name : NULL;
}

int64_t mf_cuda_device_memory(int index) {
  return index >= 0 && index < mf_cuda_device_count() ? gpus[index].memory : -1;
}

/* ---------- the GPU's class and memory ---------- */

static mf_code gpu_fail(mf_device *d, const char *what, const mf_cuda_error *e, mf_status *s) {
  return mf_status_set(s, MF_INTERNAL, "%s on %s: %s", what, d->short_name, e->msg);
}

static mf_code gpu_copy_from_host(mf_device *d, mf_tensor *dst, const mf_tensor *src, mf_status *s) {
  mf_cuda_error e;
  if (runtime->copy_from_host(d->backend, dst->data, src->data, mf_tensor_nbytes(src), &e))
    return gpu_fail(d, "copy from the host", &e, s);
  return MF_OK;
}

static mf_code gpu_copy_to_host(mf_device *d, mf_tensor *dst, const mf_tensor *src, mf_status *s) {
  mf_cuda_error e;
  if (runtime->copy_to_host(d->backend, dst->data, src->data, mf_tensor_nbytes(src), &e))
    return gpu_fail(d, "copy to the host", &e, s);
  return MF_OK;
}

static mf_code gpu_sync(mf_device *d, mf_status *s) {
  mf_cuda_error e;
  if (runtime->sync(d->backend, &e)) return gpu_fail(d, "waiting for the GPU", &e, s);
  return MF_OK;
}

static const mf_device_class gpu_class = {.type = MF_CUDA, .type_name = "GPU", .copy_from_host = gpu_copy_from_host,
                                          .copy_to_host = gpu_copy_to_host, .sync = gpu_sync};

static bool gpu_alloc(void *ctx, size_t bytes, void **out, mf_status *s) {
  mf_cuda_error e;
  if (!runtime->alloc(ctx, bytes, out, &e)) return true;
  mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of GPU memory allocating %zu bytes (%s)", bytes, e.msg);
  return false;
}

static void gpu_free(void *ctx, void *p) { runtime->free(ctx, p); }
static void gpu_close(void *ctx) { runtime->close(ctx); }

mf_code mf_cuda_device_open(mf_device *d, mf_device_memory *mem, mf_status *s) {
  if (d->index < 0 || d->index >= mf_cuda_device_count())
    return mf_status_set(s, MF_INVALID_ARGUMENT, "no GPU %d in this process: %s", d->index,
                         mf_cuda_status()[0] ? mf_cuda_status() : "it has fewer");
  mf_cuda_device *dev = NULL;
  mf_cuda_error e;
  if (runtime->open(d->index, &dev, &e))
    return mf_status_set(s, MF_INTERNAL, "opening GPU %d: %s", d->index, e.msg);
  d->cls = &gpu_class;
  d->backend = dev;
  *mem = (mf_device_memory){.alloc = gpu_alloc, .free = gpu_free, .close = gpu_close, .ctx = dev};
  return MF_OK;
}
