/* The readable text form of a program, one node a line:
 *   %0: f32[?64, 1, 28, 28] = input "x"
 *   %1: f32[6, 1, 5, 5] = param "conv1.weight"
 *   %7: f32[?64, 6, 24, 24] = conv2d(%0, %1, %2) stride=1,1 padding=0,0 ...
 * A "?" marks a dynamic dim (shown at its traced size). */
#include "graph/ir.h"

#include <stdio.h>
#include <string.h>

void oar_meta_format(const oar_meta *m, uint32_t dyn_dims, char *buf, size_t size) {
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, __VA_ARGS__)
    PUT("%s[", oar_dtype_name(m->dtype));
    for (int d = 0; d < m->ndim; d++)
        PUT("%s%s%lld", d ? ", " : "", (dyn_dims >> d) & 1u ? "?" : "", (long long)m->shape[d]);
    PUT("]");
#undef PUT
}

typedef struct out_buf {
    char *buf;
    size_t size, n;
} out_buf;

static void put(out_buf *o, const char *fmt, ...) OAR_PRINTF(2, 3);
static void put(out_buf *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->n < o->size ? o->buf + o->n : NULL, o->n < o->size ? o->size - o->n : 0, fmt, ap);
    va_end(ap);
    if (k > 0) o->n += (size_t)k;
}

static void put_value_type(out_buf *o, const oar_program *p, int v) {
    char meta[256];
    oar_meta_format(&p->values[v].meta, p->values[v].dyn_dims, meta, sizeof meta);
    put(o, "%%%d: %s", v, meta);
}

static void dump_block(out_buf *o, const oar_program *p, int b, int depth) {
    const oar_block *bl = &p->blocks[b];
    char indent[64];
    int w = 2 * depth < 62 ? 2 * depth : 62;
    memset(indent, ' ', (size_t)w);
    indent[w] = '\0';
    for (int i = 0; i < bl->n_in; i++) {
        int v = bl->in[i];
        put(o, "%s", indent);
        put_value_type(o, p, v);
        put(o, " = input \"%s\"\n", p->values[v].name ? p->values[v].name : "");
    }
    for (int i = 0; i < bl->n_nodes; i++) {
        const oar_node *n = &p->nodes[bl->nodes[i]];
        const oar_op_def *d = oar_op_table[n->op];
        put(o, "%s", indent);
        if (n->n_out == 0) put(o, "()");
        for (int k = 0; k < n->n_out; k++) {
            if (k) put(o, ", ");
            put_value_type(o, p, n->out[k]);
        }
        put(o, " = %s%s(", d->name, n->inplace ? "[inplace]" : "");
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] < 0) put(o, "%sNone", k ? ", " : "");
            else put(o, "%s%%%d", k ? ", " : "", n->in[k]);
        }
        put(o, ")");
        if (d->n_attrs) {
            char attrs[1024];
            oar_attrs_format(d, n->attrs, attrs, sizeof attrs);
            put(o, " %s", attrs);
        }
        put(o, "\n");
        for (int k = 0; k < n->n_blocks; k++) {
            put(o, "%s  block %d {\n", indent, k);
            dump_block(o, p, n->blocks[k], depth + 2);
            put(o, "%s  }\n", indent);
        }
    }
    if (bl->n_out) {
        put(o, "%s%s ", indent, b == OAR_MAIN_BLOCK ? "return" : "yield");
        for (int k = 0; k < bl->n_out; k++) put(o, "%s%%%d", k ? ", " : "", bl->out[k]);
        put(o, "\n");
    }
}

int oar_program_dump(const oar_program *p, char *buf, size_t size) {
    out_buf o = {buf, size, 0};
    if (size) buf[0] = '\0';
    int n_params = 0, n_consts = 0;
    for (int v = 0; v < p->n_values; v++) {
        n_params += p->values[v].kind == OAR_VAL_PARAM;
        n_consts += p->values[v].kind == OAR_VAL_CONST;
    }
    int n_live = 0;
    for (int i = 0; i < p->n_nodes; i++) n_live += !p->nodes[i].dead;
    put(&o, "program: %d inputs, %d params, %d constants, %d nodes\n", p->blocks[0].n_in, n_params, n_consts,
        n_live);
    for (int v = 0; v < p->n_values; v++) {
        const oar_value *val = &p->values[v];
        if (val->kind != OAR_VAL_PARAM && val->kind != OAR_VAL_CONST) continue;
        put(&o, "  ");
        put_value_type(&o, p, v);
        put(&o, " = %s \"%s\"\n", val->kind == OAR_VAL_PARAM ? "param" : "const", val->name ? val->name : "");
    }
    dump_block(&o, p, OAR_MAIN_BLOCK, 1);
    for (int k = 0; k < p->n_grad_writes; k++) {
        int param = -1;
        for (int v = 0; v < p->n_values && param < 0; v++)
            if (p->values[v].tensor == p->grad_writes[k].param) param = v;
        put(&o, "  grad(%%%d) <- %%%d\n", param, p->grad_writes[k].value);
    }
    return (int)o.n;
}
