/* Autocast in the call path: under a policy (set by src/amp), an op's float inputs are cast per
 * its class before the op runs. The casts are ordinary cast ops, so autograd records them (the
 * gradient returns to each input in its own dtype) and the tracer puts them in the program. */
#include "ops/dispatch.h"

_Thread_local const oar_amp_policy *oar_amp_active;

const oar_amp_policy *oar_dispatch_set_amp(const oar_amp_policy *p) {
    const oar_amp_policy *prev = oar_amp_active;
    oar_amp_active = p;
    return prev;
}

uint8_t oar_op_amp_class(oar_op_id op, oar_dtype low) {
    unsigned f = oar_op_table[op]->flags;
    if (f & OAR_OPF_AMP_ALLOW) return OAR_AMP_LOW;
    if ((f & OAR_OPF_AMP_DENY) || ((f & OAR_OPF_AMP_DENY_F16) && low == OAR_F16)) return OAR_AMP_FP32;
    if (f & OAR_OPF_AMP_PROMOTE) return OAR_AMP_PROMOTE;
    return OAR_AMP_FOLLOW;
}

/* Width order for promotion; f16 and bf16 together widen to f32. */
static int width(oar_dtype dt) { return dt == OAR_F64 ? 3 : dt == OAR_F32 ? 2 : 1; }

static oar_dtype widest(oar_tensor *const *in, int n_in, bool dims_only, bool *any) {
    oar_dtype w = OAR_F16;
    *any = false;
    for (int i = 0; i < n_in; i++) {
        if (!in[i] || !oar_dtype_is_float(in[i]->dtype) || (dims_only && in[i]->ndim == 0)) continue;
        oar_dtype dt = in[i]->dtype;
        if (!*any) w = dt;
        else if (width(dt) > width(w)) w = dt;
        else if (width(dt) == 1 && width(w) == 1 && dt != w) w = OAR_F32;
        *any = true;
    }
    return w;
}

/* The dtype input i is cast to, or -1 for none. */
static int target(uint8_t cls, oar_dtype low, oar_dtype wide, oar_dtype dt) {
    switch (cls) {
    case OAR_AMP_LOW: return dt == OAR_F32 ? (int)low : -1;
    case OAR_AMP_FP32: return dt == OAR_F16 || dt == OAR_BF16 ? (int)OAR_F32 : -1;
    case OAR_AMP_PROMOTE: return oar_dtype_is_float(dt) && dt != wide ? (int)wide : -1;
    default: return -1;
    }
}

oar_status oar_amp_op_call(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                           oar_tensor **out, int *n_out) {
    const oar_amp_policy *p = oar_amp_active;
    const oar_op_def *d = oar_op_table[op];
    uint8_t cls = p->cls[op];
    /* ops that take a low input with f32 parameters do so on the CPU only (for now) */
    if (cls == OAR_AMP_FOLLOW && (d->flags & OAR_OPF_AMP_MIXED) && n_in > 0 && in[0] && in[0]->device != OAR_CPU)
        cls = OAR_AMP_FP32;
    /* low ops the CPU would only run through conversions stay f32, unless an input is low already */
    if (cls == OAR_AMP_LOW && p->cpu_f32[op] && n_in > 0 && in[0] && in[0]->device == OAR_CPU) {
        bool any_low = false;
        for (int i = 0; i < n_in; i++) any_low |= in[i] && in[i]->dtype == p->low;
        if (!any_low) cls = OAR_AMP_FOLLOW;
    }
    oar_dtype wide = OAR_F32;
    if (cls == OAR_AMP_PROMOTE) {
        bool any;
        wide = widest(in, n_in, true, &any); /* 0-d tensors follow the others, as in torch */
        if (!any) wide = widest(in, n_in, false, &any);
    }
    oar_tensor *cast[OAR_MAX_INPUTS] = {0}, *args[OAR_MAX_INPUTS];
    oar_status st = OAR_OK;
    int n = n_in < OAR_MAX_INPUTS ? n_in : OAR_MAX_INPUTS;
    for (int i = 0; i < n && st == OAR_OK; i++) {
        args[i] = in[i];
        if (!in[i] || (i < 32 && ((d->mutated_inputs >> i) & 1u))) continue; /* written in place: never a copy */
        int dt = target(cls, p->low, wide, in[i]->dtype);
        if (dt < 0) continue;
        oar_attr a = oar_attr_dtype((oar_dtype)dt);
        int one = 1;
        st = oar_op_call(OAR_OP_cast, &in[i], 1, &a, &cast[i], &one);
        if (st == OAR_OK) args[i] = cast[i];
    }
    if (st == OAR_OK) {
        /* the op itself, and anything it calls, runs without the policy */
        oar_amp_active = NULL;
        st = oar_op_call_plain(op, n_in <= OAR_MAX_INPUTS ? args : in, n_in, attrs, out, n_out);
        oar_amp_active = p;
    }
    for (int i = 0; i < n; i++) oar_tensor_unref(cast[i]);
    return st;
}
