/* What every oneDNN kernel (conv_dnnl.c, pool_dnnl.c) shares: the process's CPU engine, the
 * rule that oneDNN runs one OpenMP thread per call while oar's pool splits the batch, and how
 * a failure is reported. */
#ifndef OAR_DNNL_ENGINE_H
#define OAR_DNNL_ENGINE_H

#ifdef OAR_HAVE_ONEDNN
#include "oar.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>

/* The CPU engine, made on first use; NULL when oneDNN could not make one (callers decline).
 * Its first use also fixes oneDNN's ISA cap to oar's (see oar_dnnl_usable). */
dnnl_engine_t oar_dnnl_engine(void);

/* Whether oar may call oneDNN now: the engine exists and oar's cap (oar_get_cpu_isa) is at
 * least the level oneDNN was fixed at. oneDNN takes its cap once, before its first primitive
 * (dnnl_set_max_cpu_isa): the first call here passes oar's cap at that moment, unless
 * ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA are set, which oneDNN then reads itself. A cap lowered
 * below that level later cannot reach oneDNN, so its kernels decline and oar's run instead;
 * raised later, oneDNN stays at the lower level (it never runs above the cap either way). */
bool oar_dnnl_usable(void);
/* The level oneDNN's code runs at, as an oar ISA (its effective ISA, rounded down); fixes it
 * as oar_dnnl_usable does. */
oar_cpu_isa oar_dnnl_isa(void);

/* Keeps this thread's OpenMP team at one thread (call on every thread that runs oneDNN, and
 * before creating a primitive: oneDNN sizes its work split at creation). */
void oar_dnnl_one_omp_thread(void);

/* A batch of n images split over oar's threads: parts of q or q + 1 images, the first r parts
 * being the longer ones. At most max_parts parts, and one without OpenMP (oneDNN's own threads
 * could not be kept out). */
typedef struct oar_dnnl_split {
    int64_t parts, q, r;
} oar_dnnl_split;
oar_dnnl_split oar_dnnl_split_batch(int64_t n, int64_t max_parts);
/* The first image of part i. */
static inline int64_t oar_dnnl_part_start(const oar_dnnl_split *s, int64_t i) {
    return i * s->q + (i < s->r ? i : s->r);
}

/* OAR_ERR_INTERNAL naming op and oneDNN's status. */
oar_status oar_dnnl_fail(const char *op, dnnl_status_t st);
#endif

#endif
