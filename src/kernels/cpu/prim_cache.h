/* A small cache of built library primitives (oneDNN's convolutions and matmuls), shared by
 * threads. An entry is found by its key's bytes and built outside the lock (building is slow);
 * refs counts the cache's reference and each running call's, so evicting the least recently
 * used entry never frees one in use: its last user does. Entries begin with oar_prim_entry. */
#ifndef OAR_KERNELS_CPU_PRIM_CACHE_H
#define OAR_KERNELS_CPU_PRIM_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct oar_prim_entry {
    int refs;
    uint64_t used; /* the cache's clock at the last use */
    uint64_t hash; /* of the key: a lookup compares whole keys only where hashes match */
} oar_prim_entry;

typedef struct oar_prim_cache {
    pthread_mutex_t mu; /* also guards what the owner keeps beside the entries (packed weights) */
    uint64_t clock;
    int n, cap;
    void **e;                         /* cap slots */
    size_t key_offset, key_size;      /* where each entry holds its key */
    void *(*build)(const void *key);  /* a new entry (refs 0), NULL on OOM */
    void (*destroy)(void *entry);
} oar_prim_cache;

/* A cache over the array slots of entries of type T whose key is T's field KEY. */
#define OAR_PRIM_CACHE_INIT(slots, T, KEY, build_fn, destroy_fn)                                          \
    {.mu = PTHREAD_MUTEX_INITIALIZER, .cap = (int)(sizeof(slots) / sizeof((slots)[0])), .e = (void **)(slots), \
     .key_offset = offsetof(T, KEY), .key_size = sizeof(((T *)0)->KEY), .build = (build_fn),                 \
     .destroy = (destroy_fn)}

/* The entry for key with a reference for the caller (oar_prim_cache_put); NULL on OOM. */
void *oar_prim_cache_get(oar_prim_cache *c, const void *key);
void oar_prim_cache_put(oar_prim_cache *c, void *entry);

/* Weights already in the layout a primitive wants, for the data they were made from: the
 * storage's uid and version (tensor.h) and the weight's byte offset in it. Immutable once made;
 * refs counts the owning primitive's reference and each running call's. A primitive keeps a few
 * in slots (convs of one shape share a primitive: six in ResNet-20's first stage), guarded by
 * its cache's lock and ordered by its clock. */
typedef struct oar_packed {
    int refs;
    uint64_t uid;
    uint32_t version;
    int64_t offset;
    uint64_t used;  /* the cache clock at its last use */
    void *data;     /* oar_alloc'ed */
    size_t bytes;
    uint32_t flags; /* the owner's */
} oar_packed;

/* The packing among the n slots of the weights (uid, version, offset) with a reference for the
 * caller (oar_packed_put); NULL when there is none. */
oar_packed *oar_packed_find(oar_prim_cache *c, oar_packed *const *slots, int n, uint64_t uid, uint32_t version,
                            int64_t offset);
/* A new packing of bytes for those weights (refs 1, data uninitialized); NULL on OOM. */
oar_packed *oar_packed_new(size_t bytes, uint64_t uid, uint32_t version, int64_t offset);
/* Keeps k (the caller keeps its reference too) in place of an older packing of the same weights,
 * else of an empty slot or the least recently used one. */
void oar_packed_keep(oar_prim_cache *c, oar_packed **slots, int n, oar_packed *k);
void oar_packed_put(oar_packed *k); /* NULL is ignored */

#endif
