/* Loss-scaling ops (src/amp/scaler.c uses them): one pass over several gradients that divides
 * them by the scale and notes any inf/nan, and the scale's update. Both write their inputs in
 * place, so an eager step and a traced one run the same code with no host round trip. */
#include "ops/amp_common.h"

#include <math.h>

#define UNSCALE "amp_unscale"
#define UPDATE "amp_update_scale"
/* found, inv_scale, then gradients: every input but inv_scale is written */

static oar_status unscale_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)a, (void)out;
    oar_status st = oar_amp_check_unscale(UNSCALE, in, n_in);
    if (st != OAR_OK) return st;
    for (int i = 2; i < n_in; i++)
        if (!in[i]->contiguous)
            return OAR_FAIL(OAR_ERR_INVALID_ARG, UNSCALE, "expected gradient %d (input %d) to be contiguous: it is "
                            "written in place; pass oar_contiguous of it", i - 2, i);
    *n_out = 0;
    return OAR_OK;
}

static oar_status unscale_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    (void)ctx, (void)out, (void)n_out, (void)a;
    float *found = (void *)oar_tensor_ptr(in[0]);
    float inv = *(const float *)(void *)oar_tensor_ptr(in[1]);
    bool bad = false;
    for (int i = 2; i < n_in; i++) {
        oar_tensor *g = in[i];
        bad |= oar_amp_unscale(g->dtype, oar_tensor_ptr(g), (void *)oar_tensor_ptr(g), g->numel, inv);
        g->storage->version++;
    }
    if (bad) *found = 1.0f;
    in[0]->storage->version++;
    return OAR_OK;
}

const oar_op_def oar_opdef_amp_unscale = {
    .name = UNSCALE, .n_inputs = -1, .n_outputs = 0, .key_input = 0,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .mutated_inputs = ~(1u << 1),
    .infer = unscale_infer, .reference = unscale_ref,
};

static oar_status update_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in, (void)out;
    oar_status st;
    if ((st = oar_amp_check_scalar(UPDATE, in[0], OAR_F32, "scale", 0)) != OAR_OK ||
        (st = oar_amp_check_scalar(UPDATE, in[1], OAR_I64, "growth_tracker", 1)) != OAR_OK ||
        (st = oar_amp_check_scalar(UPDATE, in[2], OAR_F32, "found", 2)) != OAR_OK)
        return st;
    if (!(a[0].f >= 1.0) || !(a[1].f > 0.0 && a[1].f <= 1.0) || a[2].i < 1 || !(a[3].f > 0.0))
        return OAR_FAIL(OAR_ERR_INVALID_ARG, UPDATE, "expected growth_factor >= 1, 0 < backoff_factor <= 1, "
                        "growth_interval >= 1 and min_scale > 0, got %g, %g, %lld, %g", a[0].f, a[1].f,
                        (long long)a[2].i, a[3].f);
    *n_out = 0;
    return OAR_OK;
}

/* torch's _amp_update_scale_ (backoff on inf/nan, growth after growth_interval good steps,
 * never to an infinite scale), with a floor: the scale never backs off below min_scale. */
static oar_status update_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                             const oar_attr *a) {
    (void)ctx, (void)n_in, (void)out, (void)n_out;
    float *scale = (void *)oar_tensor_ptr(in[0]);
    int64_t *tracker = (void *)oar_tensor_ptr(in[1]);
    float found = *(const float *)(void *)oar_tensor_ptr(in[2]);
    if (found != 0.0f) {
        float s = *scale * (float)a[1].f, floor = (float)a[3].f;
        if (s < floor) s = *scale < floor ? *scale : floor; /* a scale set below the floor stays */
        *scale = s;
        *tracker = 0;
    } else if (*tracker + 1 >= a[2].i) {
        float s = *scale * (float)a[0].f;
        if (isfinite(s)) *scale = s;
        *tracker = 0;
    } else {
        *tracker += 1;
    }
    in[0]->storage->version++;
    in[1]->storage->version++;
    return OAR_OK;
}

const oar_op_def oar_opdef_amp_update_scale = {
    .name = UPDATE, .n_inputs = 3, .n_outputs = 0, .key_input = 0,
    .n_attrs = 4,
    .attrs = {{"growth_factor", OAR_ATTR_FLOAT}, {"backoff_factor", OAR_ATTR_FLOAT}, {"growth_interval", OAR_ATTR_INT},
              {"min_scale", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .mutated_inputs = 0x3,
    .infer = update_infer, .reference = update_ref,
};
