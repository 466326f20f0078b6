/* Thread-local error slot: every failing call records a status and a message here. */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OAR_ERRMSG_CAP 1024

static _Thread_local char tl_msg[OAR_ERRMSG_CAP];
static _Thread_local oar_status tl_status;
static _Thread_local uint64_t tl_serial; /* errors raised so far on this thread */
static _Thread_local oar_error_watch *tl_watch; /* the innermost installed watch, or NULL */

const char *oar_version(void) { return "0.1.0"; }
const char *oar_last_error(void) { return tl_msg; }
oar_status oar_last_status(void) { return tl_status; }
uint64_t oar_error_serial(void) { return tl_serial; }

void oar_clear_error(void) {
    tl_msg[0] = '\0';
    tl_status = OAR_OK;
}

const char *oar_status_name(oar_status s) {
    switch (s) {
    case OAR_OK: return "ok";
    case OAR_ERR_INVALID_ARG: return "invalid argument";
    case OAR_ERR_SHAPE: return "shape mismatch";
    case OAR_ERR_DTYPE: return "dtype mismatch";
    case OAR_ERR_OOM: return "out of memory";
    case OAR_ERR_IO: return "i/o error";
    case OAR_ERR_FORMAT: return "malformed data";
    case OAR_ERR_UNSUPPORTED: return "unsupported";
    case OAR_ERR_STATE: return "invalid state";
    case OAR_ERR_NUMERIC: return "numeric error";
    case OAR_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

oar_status oar_errorv(oar_status s, const char *fmt, va_list ap) {
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    tl_status = s;
    tl_serial++;
    if (tl_watch && tl_watch->first == OAR_OK && s != OAR_OK) {
        tl_watch->first = s;
        snprintf(tl_watch->message, sizeof tl_watch->message, "%.*s", (int)sizeof tl_watch->message - 1, tl_msg);
    }
    return s;
}

void oar_error_watch_begin(oar_error_watch *w) {
    w->first = OAR_OK;
    w->message[0] = '\0';
    w->prev = tl_watch;
    tl_watch = w;
}

void oar_error_watch_end(oar_error_watch *w) {
    if (tl_watch == w) tl_watch = w->prev;
}

oar_status oar_error(oar_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    oar_errorv(s, fmt, ap);
    va_end(ap);
    return s;
}

oar_status oar_set_error(oar_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    oar_errorv(s, fmt, ap);
    va_end(ap);
    return s;
}

void oar_error_prefix(const char *fmt, ...) {
    char prefix[256], old[OAR_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tl_msg, sizeof old);
    /* the combined message is cut at the slot's size; the prefix always survives */
    int n = snprintf(tl_msg, sizeof tl_msg, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof tl_msg) snprintf(tl_msg + n, sizeof tl_msg - (size_t)n, "%.*s",
                                                     (int)(sizeof tl_msg - (size_t)n - 1), old);
}

void oar_internal_assert_fail(const char *expr, const char *file, int line) {
    /* An invariant of oar itself is broken: continuing would corrupt memory, so report and
     * stop. User input never reaches here; it gets a status instead. */
    fprintf(stderr, "oar internal error: assertion '%s' failed at %s:%d; please report it\n",
            expr, file, line);
    abort();
}
