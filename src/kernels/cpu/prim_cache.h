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

#endif
