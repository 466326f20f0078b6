/* The op table, kernel registration and selection, attribute constructors. */
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

#define OAR_OP(name) &oar_opdef_##name,
const oar_op_def *const oar_op_table[OAR_OP_COUNT] = {
#include "ops/ops.def"
};
#undef OAR_OP

#define MAX_KERNELS 8
static oar_kernel_entry g_kernels[OAR_OP_COUNT][MAX_KERNELS];
static int g_n_kernels[OAR_OP_COUNT];

int oar_op_find(const char *name) {
    for (int i = 0; i < OAR_OP_COUNT; i++)
        if (strcmp(oar_op_table[i]->name, name) == 0) return i;
    return -1;
}

oar_status oar_register_kernel(oar_op_id op, oar_kernel_entry e) {
    if ((unsigned)op >= OAR_OP_COUNT || !e.fn || !e.impl)
        return oar_error(OAR_ERR_INVALID_ARG, "register_kernel: expected a valid op id and kernel, got op %d",
                         (int)op);
    int n = g_n_kernels[op];
    if (n == MAX_KERNELS)
        return oar_error(OAR_ERR_INVALID_ARG, "register_kernel: %s already has %d kernels",
                         oar_op_table[op]->name, MAX_KERNELS);
    /* keep the list sorted, best first; equal priorities keep registration order */
    int pos = n;
    while (pos > 0 && g_kernels[op][pos - 1].priority < e.priority) {
        g_kernels[op][pos] = g_kernels[op][pos - 1];
        pos--;
    }
    g_kernels[op][pos] = e;
    g_n_kernels[op] = n + 1;
    return OAR_OK;
}

/* Called once from oar_init(): every op's reference kernel is an ordinary entry. */
void oar_registry_init(void) {
    for (int i = 0; i < OAR_OP_COUNT; i++) {
        const oar_op_def *d = oar_op_table[i];
        if (d->reference)
            oar_register_kernel((oar_op_id)i, (oar_kernel_entry){.device = OAR_CPU,
                                                                 .dtypes = d->ref_dtypes,
                                                                 .impl = "reference",
                                                                 .priority = 0,
                                                                 .fn = d->reference});
        if (d->reference && (d->flags & OAR_OPF_TO_DEVICE)) /* it copies through the device table */
            oar_register_kernel((oar_op_id)i, (oar_kernel_entry){.device = OAR_CUDA,
                                                                 .dtypes = d->ref_dtypes,
                                                                 .impl = "reference",
                                                                 .priority = 0,
                                                                 .fn = d->reference});
    }
}

int oar_op_kernels(oar_op_id op, const oar_kernel_entry **out) {
    oar_init();
    return oar_op_kernels_so_far(op, out);
}

int oar_op_kernels_so_far(oar_op_id op, const oar_kernel_entry **out) {
    *out = g_kernels[op];
    return g_n_kernels[op];
}

const oar_kernel_entry *oar_select_kernel(oar_op_id op, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *attrs) {
    const oar_op_def *d = oar_op_table[op];
    oar_dtype dt = in[d->key_input]->dtype;
    oar_device dev = oar_call_device(in, n_in);
    for (int k = 0; k < g_n_kernels[op]; k++) {
        const oar_kernel_entry *e = &g_kernels[op][k];
        if (e->device != dev || !(e->dtypes & OAR_DTYPE_BIT(dt))) continue;
        if (e->supports && !e->supports(in, n_in, out, n_out, attrs)) continue;
        return e;
    }
    if (dev != OAR_CPU)
        oar_error(OAR_ERR_UNSUPPORTED, "%s: no %s kernel for dtype %s; `oar ops` lists each op's kernels; "
                                       "move the inputs to the host with oar_to(t, OAR_CPU) for this op",
                  d->name, dev == OAR_CUDA ? "cuda" : "device", oar_dtype_name(dt));
    else
        oar_error(OAR_ERR_DTYPE, "%s: no kernel for dtype %s on cpu; supported dtypes of the reference "
                                 "kernel are listed by `oar ops`; cast the input with oar_cast",
                  d->name, oar_dtype_name(dt));
    return NULL;
}

oar_attr oar_attr_int(int64_t v) {
    oar_attr a = {.kind = OAR_ATTR_INT};
    a.i = v;
    return a;
}

oar_attr oar_attr_float(double v) {
    oar_attr a = {.kind = OAR_ATTR_FLOAT};
    a.f = v;
    return a;
}

oar_attr oar_attr_ints(const int64_t *v, int n) {
    oar_attr a = {.kind = OAR_ATTR_INTS};
    if (n > OAR_ATTR_MAX_INTS) n = OAR_ATTR_MAX_INTS;
    a.n = n < 0 ? 0 : n;
    for (int i = 0; i < a.n; i++) a.ints[i] = v[i];
    return a;
}

oar_attr oar_attr_dims(const int *dims, int n) {
    oar_attr a = {.kind = OAR_ATTR_INTS};
    if (!dims) n = 0;
    if (n > OAR_ATTR_MAX_INTS) n = OAR_ATTR_MAX_INTS;
    a.n = n < 0 ? 0 : n;
    for (int i = 0; i < a.n; i++) a.ints[i] = dims[i];
    return a;
}

oar_attr oar_attr_dtype(oar_dtype dt) { return (oar_attr){.kind = OAR_ATTR_DTYPE, .i = dt}; }

oar_attr oar_attr_str(const char *s) {
    oar_attr a = {.kind = OAR_ATTR_STR};
    snprintf(a.s, sizeof a.s, "%s", s ? s : "");
    return a;
}
