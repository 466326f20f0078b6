/* Warnings: misuse that is not an error of the call at hand (an unbalanced oar_scope_end,
 * tensors alive at exit in debug mode) goes to stderr, or to the handler the user installs. */
#include "base.h"

#include <stdio.h>

static oar_warning_fn g_handler;
static void *g_user;

void oar_set_warning_handler(oar_warning_fn fn, void *user) {
    __atomic_store_n(&g_user, user, __ATOMIC_RELAXED);
    __atomic_store_n(&g_handler, fn, __ATOMIC_RELEASE);
}

void oar_warn(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    oar_warning_fn fn = __atomic_load_n(&g_handler, __ATOMIC_ACQUIRE);
    if (fn) fn(msg, __atomic_load_n(&g_user, __ATOMIC_RELAXED));
    else fprintf(stderr, "oar warning: %s\n", msg);
}
