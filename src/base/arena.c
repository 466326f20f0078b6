/* Chunked arena for transient metadata: allocation is a pointer bump, growth adds a chunk,
 * and everything is released at once. It never runs "out of space". */
#include "base.h"

#include <stdlib.h>
#include <string.h>

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} chunk;

struct oar_arena {
    chunk *head;
    size_t chunk_bytes;
};

oar_arena *oar_arena_create(size_t chunk_bytes) {
    oar_arena *a = OAR_NEW(oar_arena);
    if (a) a->chunk_bytes = chunk_bytes ? chunk_bytes : 64 * 1024;
    return a;
}

void *oar_arena_alloc(oar_arena *a, size_t nbytes) {
    nbytes = (nbytes + 15) & ~(size_t)15;
    chunk *c = a->head;
    if (!c || c->used + nbytes > c->cap) {
        size_t cap = nbytes > a->chunk_bytes ? nbytes : a->chunk_bytes;
        c = malloc(sizeof(chunk) + cap);
        if (!c) {
            oar_error(OAR_ERR_OOM, "out of memory: arena could not grow by %zu bytes", cap);
            return NULL;
        }
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += nbytes;
    memset(p, 0, nbytes);
    return p;
}

void oar_arena_reset(oar_arena *a) {
    chunk *c = a->head;
    while (c) {
        chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}

void oar_arena_destroy(oar_arena *a) {
    if (!a) return;
    oar_arena_reset(a);
    free(a);
}
