/* Scopes: a per-thread stack of tensor lists. Tensors handed to the user inside a scope are
 * recorded in it and released together at oar_scope_end(), so a training step written in C
 * does not need one oar_release() per temporary. Misuse that leaks or would free the wrong
 * tensors is warned about once per process: an oar_scope_end with no scope open, and scopes
 * nested so deep that a begin without its end each step is the likely cause. */
#include "tensor/tensor.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct oar_scope {
    oar_tensor **items;
    int64_t n, cap;
    struct oar_scope *parent;
    int64_t depth;
} oar_scope;

/* Nesting this deep is a loop that begins a scope at every step and never ends it. */
#define SUSPICIOUS_DEPTH 1000

static _Thread_local oar_scope *tl_top;
static _Thread_local int64_t tl_unallocated; /* scopes begun without memory for them */
static int g_warned_end, g_warned_depth, g_warned_forward, g_warned_forward_end;

/* Ended scopes kept for reuse, with their item arrays: every module forward runs in a scope,
 * so a step begins and ends dozens, and malloc + free for each showed in small models' steps. */
#define SPARE_MAX 16
static _Thread_local oar_scope *tl_spare; /* linked through parent */
static _Thread_local int tl_n_spare;
static pthread_key_t g_spare_key;
static pthread_once_t g_spare_once = PTHREAD_ONCE_INIT;

static void spare_free(void *list) { /* thread exit, on the exiting thread */
    for (oar_scope *s = list, *next; s; s = next) {
        next = s->parent;
        free(s->items);
        free(s);
    }
    tl_spare = NULL;
    tl_n_spare = 0;
}

static void spare_key_init(void) { pthread_key_create(&g_spare_key, spare_free); }

static void warn_once(int *flag, const char *msg) {
    if (!__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED)) oar_warn("%s", msg);
}

static oar_scope *push(void) {
    oar_scope *s = NULL;
    if (!tl_unallocated && tl_spare) {
        s = tl_spare;
        tl_spare = s->parent;
        tl_n_spare--;
        pthread_setspecific(g_spare_key, tl_spare);
    } else if (!tl_unallocated) {
        s = OAR_NEW(oar_scope);
    }
    if (!s) {
        /* out of memory: tensors stay with the enclosing scope (or the caller); the matching
         * end must then close nothing, so count it */
        tl_unallocated++;
        return NULL;
    }
    s->parent = tl_top;
    s->depth = tl_top ? tl_top->depth + 1 : 1;
    tl_top = s;
    if (s->depth == SUSPICIOUS_DEPTH)
        warn_once(&g_warned_depth, "scopes are nested 1000 deep: an oar_scope_begin without its oar_scope_end (at "
                                   "every step?) keeps every tensor made since; end each scope you begin");
    return s;
}

void oar_scope_begin(void) { (void)push(); }

static bool scope_add(oar_scope *s, oar_tensor *t) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 64;
        oar_tensor **items = oar_realloc(s->items, sizeof(*items) * (size_t)cap);
        if (!items) return false;
        s->items = items;
        s->cap = cap;
    }
    t->scope = s;
    t->scope_slot = s->n;
    s->items[s->n++] = t;
    return true;
}

oar_tensor *oar_track(oar_tensor *t) {
    if (t && tl_top && !t->scope) scope_add(tl_top, t);
    return t;
}

void oar_scope_forget(oar_tensor *t) {
    oar_scope *s = t->scope;
    if (!s) return;
    s->items[t->scope_slot] = NULL;
    t->scope = NULL;
    t->scope_slot = -1;
}

static void pop(void) {
    oar_scope *s = tl_top;
    tl_top = s->parent;
    oar_freed_how prev = oar_release_how_begin(OAR_FREED_SCOPE);
    for (int64_t i = 0; i < s->n; i++) {
        oar_tensor *t = s->items[i];
        if (!t) continue;
        t->scope = NULL;
        t->scope_slot = -1;
        oar_tensor_unref(t);
    }
    oar_release_how_end(prev);
    if (tl_n_spare < SPARE_MAX) {
        pthread_once(&g_spare_once, spare_key_init);
        s->n = 0;
        s->parent = tl_spare;
        tl_spare = s;
        tl_n_spare++;
        pthread_setspecific(g_spare_key, tl_spare);
        return;
    }
    free(s->items);
    free(s);
}

void oar_scope_end(void) {
    if (tl_unallocated) {
        tl_unallocated--;
        return;
    }
    if (!tl_top) {
        warn_once(&g_warned_end, "oar_scope_end without a matching oar_scope_begin (ignored): the scopes are "
                                 "unbalanced, so some scope ends earlier than its code expects");
        return;
    }
    pop();
}

oar_tensor *oar_keep(oar_tensor *t) {
    OAR_CHECK_HANDLE("keep", t, NULL);
    if (!t || !t->scope) return t;
    oar_scope *parent = t->scope->parent;
    oar_scope_forget(t);
    if (parent) scope_add(parent, t);
    return t;
}

void *oar_scope_suspend(void) {
    oar_scope *s = tl_top;
    tl_top = NULL;
    return s;
}

void oar_scope_resume(void *token) {
    if (tl_top) /* the code in between left scopes open: they end here, as oar_scope_leave does */
        while (tl_top) pop();
    tl_top = token;
}

int64_t oar_scope_enter(void) {
    oar_scope *s = push();
    return s ? s->depth : 0;
}

/* The scope is named by its depth, never by its address: code inside may have ended it with
 * an extra oar_scope_end, and then the address is freed memory. */
void oar_scope_leave(int64_t depth, oar_tensor *const *keep, int n_keep) {
    if (depth == 0) { /* begun without memory: nothing was recorded in it */
        if (tl_unallocated) tl_unallocated--;
        return;
    }
    /* scopes the code inside left open end here with it, or ours would never be popped */
    bool left_open = false;
    while (tl_top && tl_top->depth > depth) {
        left_open = true;
        pop();
    }
    if (left_open)
        warn_once(&g_warned_forward, "a module's forward left an oar_scope_begin without its oar_scope_end; oar "
                                     "ended it after the forward");
    if (!tl_top || tl_top->depth != depth) { /* ended inside: what it owned, outputs included, is gone */
        warn_once(&g_warned_forward_end, "a module's forward called oar_scope_end once more than "
                                         "oar_scope_begin, ending the scope oar runs it in (its outputs were "
                                         "released with it)");
        return;
    }
    for (int i = 0; i < n_keep; i++)
        if (keep[i] && keep[i]->scope == tl_top) oar_scope_forget(keep[i]);
    pop();
}
