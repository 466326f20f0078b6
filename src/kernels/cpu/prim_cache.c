/* The primitive cache of prim_cache.h. */
#include "kernels/cpu/prim_cache.h"

#include "base/base.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static oar_prim_entry *hdr(void *entry) { return entry; }

/* FNV-1a over the key's bytes, 8 at a time (keys are a few hundred bytes; with a cache of
 * a hundred-odd convolutions, comparing every key each call cost more than hashing one). */
static uint64_t key_hash(const oar_prim_cache *c, const void *key) {
    const unsigned char *b = key;
    uint64_t h = 1469598103934665603ull;
    size_t i = 0;
    for (; i + 8 <= c->key_size; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; i < c->key_size; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static bool holds(const oar_prim_cache *c, void *entry, const void *key, uint64_t h) {
    return hdr(entry)->hash == h && !memcmp((const char *)entry + c->key_offset, key, c->key_size);
}

void *oar_prim_cache_get(oar_prim_cache *c, const void *key) {
    uint64_t h = key_hash(c, key);
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (holds(c, c->e[i], key, h)) {
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
    hdr(p)->hash = h;
    for (int i = 0; i < c->n && !drop; i++)
        if (holds(c, c->e[i], key, h)) drop = p, p = c->e[i]; /* another thread built it meanwhile */
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

oar_packed *oar_packed_find(oar_prim_cache *c, oar_packed *const *slots, int n, uint64_t uid, uint32_t version,
                            int64_t offset) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < n; i++) {
        oar_packed *k = slots[i];
        if (k && k->uid == uid && k->version == version && k->offset == offset) {
            __atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
            k->used = ++c->clock;
            pthread_mutex_unlock(&c->mu);
            return k;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

oar_packed *oar_packed_new(size_t bytes, uint64_t uid, uint32_t version, int64_t offset) {
    oar_packed *k = calloc(1, sizeof *k); /* metadata, not tensor storage */
    if (!k || !(k->data = oar_alloc(bytes))) {
        free(k);
        return NULL;
    }
    k->refs = 1, k->uid = uid, k->version = version, k->offset = offset, k->bytes = bytes;
    return k;
}

void oar_packed_keep(oar_prim_cache *c, oar_packed **slots, int n, oar_packed *k) {
    pthread_mutex_lock(&c->mu);
    int slot = 0;
    for (int i = 0; i < n; i++) {
        oar_packed *o = slots[i];
        if (!o || (o->uid == k->uid && o->offset == k->offset)) {
            slot = i;
            break;
        }
        if (o->used < slots[slot]->used) slot = i;
    }
    oar_packed *old = slots[slot];
    slots[slot] = k;
    k->used = ++c->clock;
    __atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&c->mu);
    oar_packed_put(old);
}

void oar_packed_put(oar_packed *k) {
    if (!k || __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    oar_free(k->data, k->bytes);
    free(k);
}

void oar_prim_cache_put(oar_prim_cache *c, void *entry) {
    pthread_mutex_lock(&c->mu);
    bool last = --hdr(entry)->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last) c->destroy(entry);
}
