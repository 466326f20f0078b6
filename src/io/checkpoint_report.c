/* The problem list of a checkpoint load: every problem is collected, then reported in one
 * message that gives the counts first and as many details as the error slot holds. */
#include "io/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>

void oar_ckpt_problem(oar_ckpt_problems *p, oar_ckpt_problem_kind kind, const char *fmt, ...) {
    p->count[kind]++;
    if (p->oom) return;
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 16;
        char **items = realloc(p->items, sizeof(char *) * (size_t)cap);
        if (!items) {
            p->oom = true;
            return;
        }
        p->items = items;
        p->cap = cap;
    }
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *item = malloc(strlen(buf) + 1);
    if (!item) {
        p->oom = true;
        return;
    }
    strcpy(item, buf);
    p->items[p->n++] = item;
}

void oar_ckpt_problems_free(oar_ckpt_problems *p) {
    for (int i = 0; i < p->n; i++) free(p->items[i]);
    free(p->items);
    memset(p, 0, sizeof *p);
}

oar_status oar_ckpt_problems_report(const oar_ckpt_problems *p, const char *path) {
    enum { CAP = 1000 }; /* the error slot holds 1024 bytes */
    char msg[CAP + 1];
    int total = p->count[0] + p->count[1] + p->count[2] + p->count[3];
    int len = snprintf(msg, sizeof msg, "checkpoint_load: '%.200s' does not fit (%d problem%s: %d missing, %d "
                                        "unexpected, %d mismatched, %d other); nothing was loaded:",
                       path, total, total == 1 ? "" : "s", p->count[0], p->count[1], p->count[2], p->count[3]);
    int shown = 0;
    for (; shown < p->n; shown++) {
        const char *item = p->items[shown];
        int need = (int)strlen(item) + 2;
        int tail = shown + 1 < total ? 16 : 0; /* room for " (+N more)" */
        if (len + need + tail > CAP) break;
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s %s", shown ? ";" : "", item);
    }
    if (shown < total) snprintf(msg + len, sizeof msg - (size_t)len, " (+%d more)", total - shown);
    return oar_error(OAR_ERR_INVALID_ARG, "%s", msg);
}

bool oar_ckpt_parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

bool oar_ckpt_parse_i64(const char *s, int64_t *out) {
    if (!s) return false;
    bool neg = *s == '-';
    uint64_t v;
    if (!oar_ckpt_parse_u64(s + neg, &v)) return false;
    if (v > (uint64_t)INT64_MAX + neg) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

const char *oar_ckpt_optim_name(oar_optim_kind kind) {
    switch (kind) {
    case OAR_OPTIM_SGD: return "sgd";
    case OAR_OPTIM_ADAM: return "adam";
    case OAR_OPTIM_ADAMW: return "adamw";
    case OAR_OPTIM_RMSPROP: return "rmsprop";
    case OAR_OPTIM_ADAGRAD: return "adagrad";
    case OAR_OPTIM_LAMB: return "lamb";
    case OAR_OPTIM_ADADELTA: return "adadelta";
    case OAR_OPTIM_ADAMAX: return "adamax";
    case OAR_OPTIM_NADAM: return "nadam";
    case OAR_OPTIM_RADAM: return "radam";
    case OAR_OPTIM_ASGD: return "asgd";
    case OAR_OPTIM_RPROP: return "rprop";
    }
    return "unknown";
}
