/* The primitive cache of prim_cache.h. */
#include "kernels/cpu/prim_cache.h"

#include <stdbool.h>
#include <string.h>

static oar_prim_entry *hdr(void *entry) { return entry; }

static bool holds(const oar_prim_cache *c, void *entry, const void *key) {
    return !memcmp((const char *)entry + c->key_offset, key, c->key_size);
}

void *oar_prim_cache_get(oar_prim_cache *c, const void *key) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (holds(c, c->e[i], key)) {
            void *p = c->e[i];
            hdr(p)->refs++;
            hdr(p)->used = ++c->clock;
            pthread_mutex_unlock(&c->mu);
            return p;
        }
    pthread_mutex_unlock(&c->mu);
    void *p = c->build(key), *drop = NULL; /* slow: outside the lock */
    if (!p) return NULL;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n && !drop; i++)
        if (holds(c, c->e[i], key)) drop = p, p = c->e[i]; /* another thread built it meanwhile */
    if (!drop) {
        int slot = c->n;
        if (c->n == c->cap) {
            slot = 0;
            for (int i = 1; i < c->n; i++)
                if (hdr(c->e[i])->used < hdr(c->e[slot])->used) slot = i;
            drop = c->e[slot];
            if (--hdr(drop)->refs > 0) drop = NULL; /* still running: its last user frees it */
        } else {
            c->n++;
        }
        c->e[slot] = p;
        hdr(p)->refs = 1;
    }
    hdr(p)->refs++;
    hdr(p)->used = ++c->clock;
    pthread_mutex_unlock(&c->mu);
    if (drop) c->destroy(drop);
    return p;
}

void oar_prim_cache_put(oar_prim_cache *c, void *entry) {
    pthread_mutex_lock(&c->mu);
    bool last = --hdr(entry)->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last) c->destroy(entry);
}
