/* The converted dy kept between the two backward convs of a layer (conv_dnnl_memo.h). */
#include "kernels/cpu/conv_dnnl_memo.h"

#ifdef OAR_HAVE_ONEDNN
#include "base/base.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static oar_dy_key g_key;
static void *g_buf;
static uint64_t g_call;
static int64_t g_taken;

static bool same(const oar_dy_key *a, const oar_dy_key *b) {
    return a->src == b->src && a->uid == b->uid && a->version == b->version && a->offset == b->offset &&
           a->bytes == b->bytes && a->kind != b->kind && dnnl_memory_desc_equal(&a->want[0], &b->want[0]) &&
           dnnl_memory_desc_equal(&a->want[1], &b->want[1]);
}

void *oar_dy_memo_take(const oar_dy_key *k, uint64_t call) {
    pthread_mutex_lock(&g_mu);
    void *buf = g_buf, *drop = NULL;
    size_t drop_bytes = g_key.bytes;
    if (buf && g_call + 1 == call && same(&g_key, k)) g_taken++;
    else drop = buf, buf = NULL;
    g_buf = NULL;
    pthread_mutex_unlock(&g_mu);
    oar_free(drop, drop_bytes);
    return buf;
}

void oar_dy_memo_keep(const oar_dy_key *k, uint64_t call, void *buf) {
    pthread_mutex_lock(&g_mu);
    void *drop = g_buf;
    size_t drop_bytes = g_key.bytes;
    g_key = *k, g_buf = buf, g_call = call;
    pthread_mutex_unlock(&g_mu);
    oar_free(drop, drop_bytes);
}

int64_t oar_dy_memo_taken(void) {
    pthread_mutex_lock(&g_mu);
    int64_t n = g_taken;
    pthread_mutex_unlock(&g_mu);
    return n;
}
#endif
