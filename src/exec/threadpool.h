/* threadpool.h — the threads kernels share (threadpool.c): a parallel loop
 * over a range, split into chunks that the pool's threads and the calling
 * thread take in turn. Several threads may run loops on one pool at once. */
#ifndef MF_EXEC_THREADPOOL_H
#define MF_EXEC_THREADPOOL_H

#include "core/base.h"

typedef struct mf_threadpool mf_threadpool;
/* A pool for loops on n threads (the caller's included: n - 1 are started);
 * NULL when out of memory or threads. */
mf_threadpool *mf_threadpool_new(int n);
void mf_threadpool_free(mf_threadpool *tp); /* waits for its threads; NULL is fine */
int mf_threadpool_size(const mf_threadpool *tp);
/* Runs fn(arg, begin, end) over [0, n) in chunks of at least `grain`, on the
 * pool and the calling thread, and returns when every chunk is done. */
void mf_threadpool_for(mf_threadpool *tp, int64_t n, int64_t grain, void (*fn)(void *arg, int64_t begin, int64_t end),
                       void *arg);

#endif
