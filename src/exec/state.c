/* state.c — per-session op state: slots that never move (steps keep pointers
 * to them while later plans add slots), the striped locks that guard
 * variables' values, state made once on first use, and per-run scratch. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/status.h"

#include <string.h>

mf_code mf_states_grow(mf_graph_states *states, mf_status *s) {
  int n = states->graph->num_ops;
  while (states->num < n) {
    int c = states->num / MF_STATE_CHUNK;
    mf_state_slot **chunks = mf_realloc(states->chunks, (size_t)(c + 1) * sizeof *chunks);
    if (!chunks) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
    states->chunks = chunks;
    if (!(chunks[c] = mf_calloc(MF_STATE_CHUNK, sizeof **chunks)))
      return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
    states->num += MF_STATE_CHUNK;
  }
  return MF_OK;
}

void mf_states_clear(mf_graph_states *states) {
  for (int i = 0; i < states->num; i++) {
    mf_state_slot *slot = mf_state_at(states, i);
    void *ptr = atomic_load(&slot->ptr);
    if (ptr && slot->free) slot->free(ptr);
  }
  for (int c = 0; c < states->num / MF_STATE_CHUNK; c++) mf_free(states->chunks[c]);
  mf_free(states->chunks);
  states->chunks = NULL;
  states->num = 0;
}

pthread_mutex_t *mf_state_lock(mf_session *sess, const mf_state_slot *slot) {
  return &sess->state_locks[((uintptr_t)slot / sizeof *slot) % MF_STATE_LOCKS];
}

void *mf_kernel_state(mf_kernel_ctx *ctx, void *(*make)(mf_kernel_ctx *ctx), void (*free_fn)(void *)) {
  mf_state_slot *slot = ctx->state;
  void *ptr = atomic_load_explicit(&slot->ptr, memory_order_acquire);
  if (ptr) return ptr;
  pthread_mutex_lock(&ctx->session->lock);
  ptr = atomic_load_explicit(&slot->ptr, memory_order_relaxed);
  if (!ptr && (ptr = make(ctx))) {
    slot->free = free_fn;
    atomic_store_explicit(&slot->ptr, ptr, memory_order_release);
  }
  pthread_mutex_unlock(&ctx->session->lock);
  if (!ptr && mf_ok(ctx->status))
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  return ptr;
}

void *mf_kernel_scratch(mf_kernel_ctx *ctx, size_t bytes) {
  mf_run *r = ctx->run;
  if (r->scratch_bytes >= bytes) return r->scratch;
  mf_aligned_free(r->scratch);
  r->scratch = mf_aligned_alloc(bytes);
  r->scratch_bytes = r->scratch ? bytes : 0;
  if (!r->scratch)
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory for %zu bytes of scratch", ctx->op->name,
                  bytes);
  return r->scratch;
}
