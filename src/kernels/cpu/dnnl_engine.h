/* What every oneDNN kernel (conv_dnnl.c, pool_dnnl.c) shares: the process's CPU engine and
 * the rule that oneDNN runs one OpenMP thread per call while oar's pool does the threading. */
#ifndef OAR_DNNL_ENGINE_H
#define OAR_DNNL_ENGINE_H

#ifdef OAR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

/* The CPU engine, made on first use; NULL when oneDNN could not make one (callers decline). */
dnnl_engine_t oar_dnnl_engine(void);

/* Keeps this thread's OpenMP team at one thread (call on every thread that runs oneDNN, and
 * before creating a primitive: oneDNN sizes its work split at creation). */
void oar_dnnl_one_omp_thread(void);
#endif

#endif
