/* Checked tensor handles. A handle is the struct's address, so a dangling one can only be
 * recognised by what the struct's memory still says. Every struct therefore starts with a
 * magic word: live, or dead with how it died. A freed struct is not handed back to malloc at
 * once: it waits, poisoned, in a per-thread quarantine of QUARANTINE structs (no lock: the
 * free path stays as cheap as it was), so a dangling handle used soon after the free - the
 * common mistakes: a second release, `loss` kept past oar_scope_end - finds the dead word
 * instead of freed memory or a new tensor. With OAR_DEBUG_HANDLES=1 freed structs are never
 * reused (any later use is caught), live tensors are counted and those alive at exit are
 * reported.
 *
 * Under AddressSanitizer the quarantined struct is poisoned except its first words, so the
 * check itself reads valid memory while any other read of a freed tensor is still reported. */
#include "tensor/tensor.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define OAR_HANDLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OAR_HANDLE_ASAN 1
#endif
#endif
#ifdef OAR_HANDLE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON_BODY(t) ASAN_POISON_MEMORY_REGION((char *)(t) + BODY, sizeof(oar_tensor) - BODY)
#define UNPOISON_BODY(t) ASAN_UNPOISON_MEMORY_REGION((char *)(t) + BODY, sizeof(oar_tensor) - BODY)
#else
#define POISON_BODY(t) ((void)(t))
#define UNPOISON_BODY(t) ((void)(t))
#endif

/* The words a check may read after the free: magic, freed_how, next_dead. */
#define BODY offsetof(oar_tensor, refcount)
/* Frees a thread makes before a struct goes back to malloc. Reuse is delayed by this many
 * frees, so the structs malloc hands out are that much colder: 8192 (2.3 MB per thread) made
 * the tiny model's eager step 12% slower, 1024 (288 KB, within L2) costs nothing measurable,
 * and still covers a handle used right after the oar_scope_end or oar_release that freed it.
 * OAR_DEBUG_HANDLES=1 has no limit. */
#define QUARANTINE 1024

static _Thread_local oar_freed_how tl_how;
static _Thread_local oar_tensor **tl_ring;
static _Thread_local int tl_next;
static pthread_key_t g_ring_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static bool g_debug;
static int64_t g_live;            /* debug mode: live tensors */
static oar_tensor *g_dead;        /* debug mode: every freed struct */
static pthread_mutex_t g_dead_mu = PTHREAD_MUTEX_INITIALIZER;

/* Thread exit (runs on the exiting thread): frees the quarantine. A tensor freed later by
 * another destructor on this thread starts a new one rather than writing into this one. */
static void ring_drain(void *ring) {
    oar_tensor **r = ring;
    if (r == tl_ring) {
        tl_ring = NULL;
        tl_next = 0;
    }
    for (int i = 0; i < QUARANTINE; i++)
        if (r[i]) {
            UNPOISON_BODY(r[i]);
            free(r[i]);
        }
    free(r);
}

static void report_live_at_exit(void) {
    int64_t n = __atomic_load_n(&g_live, __ATOMIC_RELAXED);
    if (n > 0)
        oar_warn("%lld tensor%s still alive at exit (OAR_DEBUG_HANDLES=1): release them with oar_release, end the "
                 "scopes that own them, and free the modules, optimizers and compiled functions that hold them",
                 (long long)n, n == 1 ? " is" : "s are");
}

static void init_once(void) {
    pthread_key_create(&g_ring_key, ring_drain);
    const char *e = getenv("OAR_DEBUG_HANDLES");
    g_debug = e && *e && strcmp(e, "0") != 0;
    if (g_debug) atexit(report_live_at_exit);
}

static int g_ready; /* set once init_once ran: the hot path reads it instead of calling pthread_once */

static inline void ensure_init(void) {
    if (OAR_LIKELY(__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE))) return;
    pthread_once(&g_once, init_once);
    __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

bool oar_debug_handles(void) {
    ensure_init();
    return g_debug;
}

int64_t oar_live_tensors(void) {
    ensure_init();
    return g_debug ? __atomic_load_n(&g_live, __ATOMIC_RELAXED) : -1;
}

oar_tensor *oar_tensor_struct_new(void) {
    ensure_init();
    oar_tensor *t = OAR_NEW(oar_tensor);
    if (!t) return NULL;
    t->magic = OAR_TENSOR_LIVE;
    if (g_debug) __atomic_add_fetch(&g_live, 1, __ATOMIC_RELAXED);
    return t;
}

void oar_tensor_struct_free(oar_tensor *t) {
    if (!t) return;
    t->magic = OAR_TENSOR_DEAD;
    t->freed_how = (uint32_t)tl_how;
    if (g_debug) {
        __atomic_sub_fetch(&g_live, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&g_dead_mu);
        t->next_dead = g_dead;
        g_dead = t;
        pthread_mutex_unlock(&g_dead_mu);
        POISON_BODY(t);
        return;
    }
    if (OAR_UNLIKELY(!tl_ring)) {
        tl_ring = calloc(QUARANTINE, sizeof *tl_ring);
        if (!tl_ring) { /* no quarantine without memory: the check is then best effort */
            free(t);
            return;
        }
        pthread_setspecific(g_ring_key, tl_ring);
    }
    oar_tensor *oldest = tl_ring[tl_next];
    tl_ring[tl_next] = t;
    tl_next = tl_next + 1 == QUARANTINE ? 0 : tl_next + 1;
    POISON_BODY(t);
    if (oldest) {
        UNPOISON_BODY(oldest);
        free(oldest);
    }
}

oar_freed_how oar_release_how_begin(oar_freed_how how) {
    oar_freed_how prev = tl_how;
    tl_how = how;
    return prev;
}

void oar_release_how_end(oar_freed_how previous) { tl_how = previous; }

oar_status oar_handle_error(const char *who, const char *what, int index, const oar_tensor *t) {
    char arg[48];
    if (index >= 0) snprintf(arg, sizeof arg, "%s %d", what, index);
    else snprintf(arg, sizeof arg, "%s", what);
    if (t->magic != OAR_TENSOR_DEAD)
        return oar_error(OAR_ERR_STATE, "%s: %s is not a live tensor handle (a pointer to something else, or to a "
                                        "tensor freed long before%s); pass tensors oar returned and still owns",
                         who, arg, g_debug ? "" : ": run with OAR_DEBUG_HANDLES=1 to catch every late use");
    switch ((oar_freed_how)t->freed_how) {
    case OAR_FREED_SCOPE:
        return oar_error(OAR_ERR_STATE, "%s: %s was released when the scope that owned it ended (oar_scope_end): "
                                        "use after scope end; call oar_keep(t) before oar_scope_end to keep it "
                                        "(then oar_release it when done)", who, arg);
    case OAR_FREED_RELEASE:
        return oar_error(OAR_ERR_STATE, "%s: %s was already released by oar_release: use after release, or a "
                                        "double release; take another reference with oar_retain to use it "
                                        "longer", who, arg);
    case OAR_FREED_INTERNAL: break;
    }
    return oar_error(OAR_ERR_STATE, "%s: %s was freed when its last reference was dropped (by oar_release or "
                                    "oar_scope_end of a tensor it belonged to, or by freeing the module, "
                                    "optimizer or dictionary that held it): use after free; oar_retain it to "
                                    "use it longer", who, arg);
}

oar_status oar_check_handles(const char *who, const char *what, oar_tensor *const *ts, int n) {
    for (int i = 0; ts && i < n; i++)
        if (!OAR_HANDLE_OK(ts[i])) return oar_handle_error(who, what, i, ts[i]);
    return OAR_OK;
}
