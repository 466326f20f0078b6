/* One converted dy kept from a backward conv call for the next kernel call (conv_dnnl.c):
 * conv2d_grad_input and conv2d_grad_weight of a conv read the same dy and want it in the same
 * layout, and in a training step (the eager backward, a compiled program) one runs right after
 * the other, so the second takes the first's conversion instead of converting dy again. */
#ifndef OAR_CONV_DNNL_MEMO_H
#define OAR_CONV_DNNL_MEMO_H

#ifdef OAR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <stddef.h>
#include <stdint.h>

/* What the conversion was made from and into. dy's bytes are the same as when converted when
 * no kernel ran in between (kernel_calls.h) and its storage is the same: the same uid, version
 * and offset for tracked storage; uid 0 is the executor's, which only kernels write. */
typedef struct oar_dy_key {
    const void *src;
    uint64_t uid, version;
    int64_t offset;
    dnnl_memory_desc_t want[2]; /* the layouts of the call's batch parts (want[1]: zeroed for one) */
    size_t bytes;               /* of the whole converted dy */
    int kind;                   /* the op that converted it: only the other one takes it */
} oar_dy_key;

/* The buffer kept by the kernel call just before this one (whose count was call - 1) under the
 * same key from the other kind, now the caller's (oar_free(buf, k->bytes)); else NULL, and a
 * buffer kept for another key is freed. */
void *oar_dy_memo_take(const oar_dy_key *k, uint64_t call);

/* Keeps buf (k->bytes, dy converted by the call whose count is call) for the next call, freeing
 * what was kept before. */
void oar_dy_memo_keep(const oar_dy_key *k, uint64_t call, void *buf);

/* Conversions taken so far (tests). */
int64_t oar_dy_memo_taken(void);
#endif

#endif
