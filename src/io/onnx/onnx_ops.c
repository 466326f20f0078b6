/* The table of ONNX operators oar translates (onnx_ops.def), sorted by name for lookup. */
#include "io/onnx/onnx_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ox_op ox_ops[] = {
#define OX_OP(name, since, known) {#name, since, known, ox_##name},
#include "io/onnx/onnx_ops.def"
#undef OX_OP
};
#define N_OPS ((int)(sizeof ox_ops / sizeof *ox_ops))

static const ox_op ox_ms_ops[] = {
#define OX_MS_ENTRY(name) {#name, 1, 0, ox_ms_##name},
    OX_MS_OPS(OX_MS_ENTRY)
#undef OX_MS_ENTRY
};

const ox_op *ox_find_ms_op(const char *op_type) {
    for (size_t i = 0; i < sizeof ox_ms_ops / sizeof *ox_ms_ops; i++)
        if (!strcmp(ox_ms_ops[i].name, op_type)) return &ox_ms_ops[i];
    return NULL;
}

const ox_op *ox_find_op(const char *op_type) {
    for (int i = 0; i < N_OPS; i++)
        if (!strcmp(ox_ops[i].name, op_type)) return &ox_ops[i];
    return NULL;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

void ox_list_ops(char *buf, size_t size) {
    const char *names[N_OPS];
    for (int i = 0; i < N_OPS; i++) names[i] = ox_ops[i].name;
    qsort(names, N_OPS, sizeof *names, by_name);
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_OPS && n < size; i++) n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", names[i]);
}

oar_status ox_set(ox_ctx *c, int k, oar_tensor *y) {
    if (!y) return oar_last_status() != OAR_OK ? oar_last_status() : OAR_ERR_INTERNAL;
    if (k < c->n_out) c->out[k] = y;
    return OAR_OK;
}
