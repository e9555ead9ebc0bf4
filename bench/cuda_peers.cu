/* cuda_peers.cu — the bare CUDA side of the GPU benchmarks: cuBLAS's
 * cublasSgemm, the device's copy bandwidth (cudaMemcpyAsync device to device)
 * and y = x * 2 + 1 as one hand-written kernel, each on buffers of its own
 * on device 0. bench/harness.lua compiles it with nvcc when nvcc is found and
 * loads it through the FFI; a peer is made once (buffers filled, one warm-up
 * call), run in batches timed with CUDA events, and freed. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PEER_API extern "C" __attribute__((visibility("default")))

enum peer_kind { PEER_SGEMM, PEER_COPY, PEER_AXPB };

struct cuda_peer {
  peer_kind kind;
  int64_t n;            /* the matrices' side (sgemm), else the count of float32 values */
  float *a, *b, *c;     /* device buffers: sgemm c = a b (row-major); copy and axpb a -> c */
  cudaStream_t stream;  /* the peer's own stream (non-blocking: no implicit sync with moonflow's) */
  cublasHandle_t blas;  /* sgemm only */
  cudaEvent_t start, stop;
};

static bool cuda_failed(cudaError_t e, const char *what, char *why, size_t why_size) {
  if (e == cudaSuccess) return false;
  snprintf(why, why_size, "%s: %s", what, cudaGetErrorString(e));
  return true;
}

static bool blas_failed(cublasStatus_t s, const char *what, char *why, size_t why_size) {
  if (s == CUBLAS_STATUS_SUCCESS) return false;
  snprintf(why, why_size, "%s: %s", what, cublasGetStatusString(s));
  return true;
}

/* p[i] = (i % period) * scale: the CPU benches' data, exact in float32. */
__global__ void fill_pattern(float *p, int64_t n, int period, float scale) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i] = (float)(i % period) * scale;
}

/* y = x * 2 + 1, one element per thread: the kernel a CUDA programmer writes first. */
__global__ void axpb(const float *__restrict__ x, float *__restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f + 1.0f;
}

static const int THREADS = 256;

static unsigned blocks_for(int64_t n) { return (unsigned)((n + THREADS - 1) / THREADS); }

static bool fill(cuda_peer *p, float *buf, int64_t n, int period, float scale, char *why, size_t why_size) {
  fill_pattern<<<1024, THREADS, 0, p->stream>>>(buf, n, period, scale);
  return cuda_failed(cudaGetLastError(), "fill_pattern", why, why_size);
}

/* One call of the peer's work, queued on its stream. */
static bool enqueue(cuda_peer *p, char *why, size_t why_size) {
  switch (p->kind) {
    case PEER_SGEMM: {
      /* cuBLAS is column-major: the row-major c = a b is, read column-major, c' = b' a'. */
      const float one = 1.0f, zero = 0.0f;
      int n = (int)p->n;
      return blas_failed(cublasSgemm(p->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, p->b, n, p->a, n, &zero,
                                     p->c, n),
                         "cublasSgemm", why, why_size);
    }
    case PEER_COPY:
      return cuda_failed(cudaMemcpyAsync(p->c, p->a, (size_t)p->n * sizeof(float), cudaMemcpyDeviceToDevice,
                                         p->stream),
                         "cudaMemcpyAsync", why, why_size);
    case PEER_AXPB:
      axpb<<<blocks_for(p->n), THREADS, 0, p->stream>>>(p->a, p->c, p->n);
      return cuda_failed(cudaGetLastError(), "axpb kernel", why, why_size);
  }
  snprintf(why, why_size, "unknown peer kind %d", (int)p->kind);
  return true;
}

PEER_API void cuda_peer_free(cuda_peer *p) {
  if (!p) return;
  cudaFree(p->a);
  cudaFree(p->b);
  cudaFree(p->c);
  if (p->blas) cublasDestroy(p->blas);
  if (p->start) cudaEventDestroy(p->start);
  if (p->stop) cudaEventDestroy(p->stop);
  if (p->stream) cudaStreamDestroy(p->stream);
  free(p);
}

/* A peer of `kind` over n (a side or a count), its buffers filled and one
 * call run (handles made, kernels loaded); NULL with why set on failure. */
static cuda_peer *peer_new(peer_kind kind, int64_t n, char *why, size_t why_size) {
  cuda_peer *p = (cuda_peer *)calloc(1, sizeof *p);
  if (!p) {
    snprintf(why, why_size, "out of host memory");
    return NULL;
  }
  p->kind = kind;
  p->n = n;
  int64_t count = kind == PEER_SGEMM ? n * n : n;
  size_t bytes = (size_t)count * sizeof(float);
  bool bad = cuda_failed(cudaSetDevice(0), "cudaSetDevice(0)", why, why_size) ||
             cuda_failed(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), "cudaStreamCreate", why,
                         why_size) ||
             cuda_failed(cudaEventCreate(&p->start), "cudaEventCreate", why, why_size) ||
             cuda_failed(cudaEventCreate(&p->stop), "cudaEventCreate", why, why_size) ||
             cuda_failed(cudaMalloc(&p->a, bytes), "cudaMalloc", why, why_size) ||
             cuda_failed(cudaMalloc(&p->c, bytes), "cudaMalloc", why, why_size) ||
             fill(p, p->a, count, kind == PEER_SGEMM ? 7 : 1000, kind == PEER_SGEMM ? 0.25f : 1.0f, why, why_size) ||
             cuda_failed(cudaMemsetAsync(p->c, 0xff, bytes, p->stream), "cudaMemsetAsync", why, why_size);
  if (!bad && kind == PEER_SGEMM)
    bad = cuda_failed(cudaMalloc(&p->b, bytes), "cudaMalloc", why, why_size) ||
          fill(p, p->b, count, 5, 0.5f, why, why_size) ||
          blas_failed(cublasCreate(&p->blas), "cublasCreate", why, why_size) ||
          blas_failed(cublasSetStream(p->blas, p->stream), "cublasSetStream", why, why_size);
  bad = bad || enqueue(p, why, why_size) ||
        cuda_failed(cudaStreamSynchronize(p->stream), "cudaStreamSynchronize", why, why_size);
  if (bad) {
    cuda_peer_free(p);
    return NULL;
  }
  return p;
}

/* c = a b, n x n float32, a[i] = (i % 7) * 0.25 and b[i] = (i % 5) * 0.5 row-major. */
PEER_API cuda_peer *cuda_peer_sgemm_new(int n, char *why, size_t why_size) {
  return peer_new(PEER_SGEMM, n, why, why_size);
}

/* A copy of n float32 values from one device buffer to another. */
PEER_API cuda_peer *cuda_peer_copy_new(int64_t n, char *why, size_t why_size) {
  return peer_new(PEER_COPY, n, why, why_size);
}

/* y = x * 2 + 1 over n float32 values, x[i] = i % 1000. */
PEER_API cuda_peer *cuda_peer_axpb_new(int64_t n, char *why, size_t why_size) {
  return peer_new(PEER_AXPB, n, why, why_size);
}

/* Runs `calls` calls back to back between two CUDA events and returns the
 * seconds per call, or -1 with why set. */
PEER_API double cuda_peer_run(cuda_peer *p, int calls, char *why, size_t why_size) {
  if (calls < 1) {
    snprintf(why, why_size, "cuda_peer_run: %d calls", calls);
    return -1;
  }
  if (cuda_failed(cudaEventRecord(p->start, p->stream), "cudaEventRecord", why, why_size)) return -1;
  for (int i = 0; i < calls; i++)
    if (enqueue(p, why, why_size)) return -1;
  float ms = 0;
  if (cuda_failed(cudaEventRecord(p->stop, p->stream), "cudaEventRecord", why, why_size) ||
      cuda_failed(cudaEventSynchronize(p->stop), "cudaEventSynchronize", why, why_size) ||
      cuda_failed(cudaEventElapsedTime(&ms, p->start, p->stop), "cudaEventElapsedTime", why, why_size))
    return -1;
  return ms * 1e-3 / calls;
}

/* Copies the output's values [first, first + count) to host memory: 0, or -1
 * with why set. */
PEER_API int cuda_peer_output(cuda_peer *p, int64_t first, int64_t count, float *host, char *why, size_t why_size) {
  int64_t total = p->kind == PEER_SGEMM ? p->n * p->n : p->n;
  if (first < 0 || count < 0 || first + count > total) {
    snprintf(why, why_size, "cuda_peer_output: values [%lld, %lld) outside the output's %lld", (long long)first,
             (long long)(first + count), (long long)total);
    return -1;
  }
  if (cuda_failed(cudaMemcpyAsync(host, p->c + first, (size_t)count * sizeof(float), cudaMemcpyDeviceToHost,
                                  p->stream),
                  "cudaMemcpyAsync", why, why_size) ||
      cuda_failed(cudaStreamSynchronize(p->stream), "cudaStreamSynchronize", why, why_size))
    return -1;
  return 0;
}

/* Waits for all work queued on device 0 by this process, on every stream
 * (moonflow's backend shares the device's primary context): 0, or -1 with why. */
PEER_API int cuda_peer_sync(char *why, size_t why_size) {
  return cuda_failed(cudaDeviceSynchronize(), "cudaDeviceSynchronize", why, why_size) ? -1 : 0;
}

/* Device 0's name: 0, or -1 with why set. */
PEER_API int cuda_peer_device_name(char *name, size_t name_size, char *why, size_t why_size) {
  cudaDeviceProp prop;
  if (cuda_failed(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties", why, why_size)) return -1;
  snprintf(name, name_size, "%s", prop.name);
  return 0;
}
