/* Autocast regions: a per-thread stack of class tables. The innermost region's table is handed to
 * dispatch (oar_dispatch_set_amp), which inserts the casts; a disabled region hands it none. */
#include "kernels/cpu/bf16_native.h"
#include "ops/dispatch.h"

#include <string.h>

#define MAX_DEPTH 32

typedef struct region {
    bool enabled;
    oar_amp_level level;
    oar_amp_policy policy;
} region;

static _Thread_local region tl_stack[MAX_DEPTH];
static _Thread_local int tl_depth;

oar_autocast_opts oar_autocast_defaults(void) {
    return (oar_autocast_opts){.enabled = true, .level = OAR_AMP_O1, .dtype = OAR_BF16};
}

const char *oar_amp_class_name(oar_amp_class c) {
    switch (c) {
    case OAR_AMP_FOLLOW: return "follow";
    case OAR_AMP_LOW: return "low";
    case OAR_AMP_FP32: return "fp32";
    case OAR_AMP_PROMOTE: return "promote";
    }
    return "unknown";
}

static oar_status apply_list(oar_amp_policy *p, const char *const *names, int n, oar_amp_class c, const char *list) {
    if (n < 0 || (n > 0 && !names))
        return oar_error(OAR_ERR_INVALID_ARG, "oar_autocast_begin: expected %s to hold n_%s names, got %s with %d",
                         list, list, names ? "a list" : "NULL", n);
    for (int i = 0; i < n; i++) {
        int op = names[i] ? oar_op_find(names[i]) : -1;
        if (op < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "oar_autocast_begin: %s[%d] is %s%s%s, not an op; `oar ops` lists them",
                             list, i, names[i] ? "'" : "", names[i] ? names[i] : "NULL", names[i] ? "'" : "");
        p->cls[op] = (uint8_t)c;
        p->cpu_f32[op] = 0; /* a list names the class the user wants, on any CPU */
    }
    return OAR_OK;
}

oar_status oar_autocast_begin(const oar_autocast_opts *opts) {
    oar_init();
    oar_autocast_opts o = opts ? *opts : oar_autocast_defaults();
    if (tl_depth >= MAX_DEPTH)
        return oar_error(OAR_ERR_STATE, "oar_autocast_begin: expected at most %d nested regions, got one more; "
                                        "is an oar_autocast_end missing?", MAX_DEPTH);
    if (o.enabled && o.dtype != OAR_F16 && o.dtype != OAR_BF16)
        return oar_error(OAR_ERR_DTYPE, "oar_autocast_begin: expected dtype f16 or bf16, got %s",
                         oar_dtype_name(o.dtype));
    if (o.level < OAR_AMP_O0 || o.level > OAR_AMP_O2)
        return oar_error(OAR_ERR_INVALID_ARG, "oar_autocast_begin: expected level O0, O1 or O2, got %d", (int)o.level);
    if (o.cpu_policy != OAR_AMP_CPU_AUTO && o.cpu_policy != OAR_AMP_CPU_TABLE)
        return oar_error(OAR_ERR_INVALID_ARG,
                         "oar_autocast_begin: expected cpu_policy OAR_AMP_CPU_AUTO or OAR_AMP_CPU_TABLE, got %d",
                         (int)o.cpu_policy);
    region *r = &tl_stack[tl_depth];
    r->enabled = o.enabled && o.level != OAR_AMP_O0;
    r->level = o.level;
    r->policy.low = o.dtype;
    if (r->enabled) {
        /* the CPU's cost: bf16 where it is not dearer than f32 (amp.h, oar_amp_cpu_policy) */
        bool table = o.cpu_policy == OAR_AMP_CPU_TABLE || o.dtype != OAR_BF16;
        for (int op = 0; op < OAR_OP_COUNT; op++) {
            r->policy.cls[op] = oar_op_amp_class((oar_op_id)op, o.dtype);
            r->policy.cpu_f32[op] = !table && r->policy.cls[op] == OAR_AMP_LOW && !oar_cpu_bf16_pays((oar_op_id)op);
        }
        oar_status st;
        if ((st = apply_list(&r->policy, o.custom_low, o.n_custom_low, OAR_AMP_LOW, "custom_low")) != OAR_OK ||
            (st = apply_list(&r->policy, o.custom_fp32, o.n_custom_fp32, OAR_AMP_FP32, "custom_fp32")) != OAR_OK ||
            (st = apply_list(&r->policy, o.custom_follow, o.n_custom_follow, OAR_AMP_FOLLOW, "custom_follow")) != OAR_OK)
            return st;
        /* a cast is never itself cast */
        r->policy.cls[OAR_OP_cast] = OAR_AMP_FOLLOW;
    }
    tl_depth++;
    oar_dispatch_set_amp(r->enabled ? &r->policy : NULL);
    return OAR_OK;
}

void oar_autocast_end(void) {
    if (tl_depth == 0) {
        oar_warn("oar_autocast_end: no autocast region is open; the call is ignored");
        return;
    }
    tl_depth--;
    const region *r = tl_depth ? &tl_stack[tl_depth - 1] : NULL;
    oar_dispatch_set_amp(r && r->enabled ? &r->policy : NULL);
}

bool oar_autocast_enabled(void) { return tl_depth > 0 && tl_stack[tl_depth - 1].enabled; }

oar_dtype oar_autocast_dtype(void) { return oar_autocast_enabled() ? tl_stack[tl_depth - 1].policy.low : OAR_F32; }

int oar_amp_op_class(const char *op, oar_dtype dtype) {
    oar_init();
    int id = op ? oar_op_find(op) : -1;
    if (id < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_amp_op_class: expected an op name, got %s%s%s; `oar ops` lists them",
                  op ? "'" : "", op ? op : "NULL", op ? "'" : "");
        return -1;
    }
    if (dtype != OAR_F16 && dtype != OAR_BF16) {
        oar_error(OAR_ERR_DTYPE, "oar_amp_op_class: expected dtype f16 or bf16, got %s", oar_dtype_name(dtype));
        return -1;
    }
    if (oar_autocast_enabled() && oar_autocast_dtype() == dtype) return tl_stack[tl_depth - 1].policy.cls[id];
    return oar_op_amp_class((oar_op_id)id, dtype);
}
