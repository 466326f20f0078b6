/* Loss-scaling ops (src/amp/scaler.c uses them): one pass over several gradients that divides
 * them by the scale and notes any inf/nan, and the scale's update. Both write their inputs in
 * place, so an eager step and a traced one run the same code with no host round trip. */
#include "ops/op.h"

#include <math.h>

#define UNSCALE "amp_unscale"
#define UPDATE "amp_update_scale"
/* found, inv_scale, then gradients: every input but inv_scale is written */
#define UNSCALE_MAX_GRADS 30

static oar_status check_scalar(const char *op, const oar_tensor *t, oar_dtype dt, const char *what, int i) {
    if (t->ndim == 0 && t->dtype == dt) return OAR_OK;
    char s[96];
    oar_format_shape(t->shape, t->ndim, s, sizeof s);
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input %d (%s) to be a 0-d %s tensor, got %s %s", op, i, what,
                     oar_dtype_name(dt), oar_dtype_name(t->dtype), s);
}

static oar_status unscale_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)a, (void)out;
    if (n_in < 3 || n_in > UNSCALE_MAX_GRADS + 2)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, UNSCALE, "expected found, inv_scale and 1 to %d gradients, got %d inputs; "
                        "split longer lists over several calls", UNSCALE_MAX_GRADS, n_in);
    oar_status st;
    if ((st = check_scalar(UNSCALE, in[0], OAR_F32, "found", 0)) != OAR_OK ||
        (st = check_scalar(UNSCALE, in[1], OAR_F32, "inv_scale", 1)) != OAR_OK)
        return st;
    for (int i = 2; i < n_in; i++)
        if (!oar_dtypes[in[i]->dtype].is_float)
            return OAR_FAIL(OAR_ERR_DTYPE, UNSCALE, "expected gradient %d (input %d) to be a float tensor, got %s", i - 2, i,
                            oar_dtype_name(in[i]->dtype));
        else if (!in[i]->contiguous)
            return OAR_FAIL(OAR_ERR_INVALID_ARG, UNSCALE, "expected gradient %d (input %d) to be contiguous: it is "
                            "written in place; pass oar_contiguous of it", i - 2, i);
    *n_out = 0;
    return OAR_OK;
}

/* f32 gradients, the common case: a loop the compiler vectorizes. A non-finite element makes
 * the product non-finite too, so the check is one reduction over the products. */
static bool unscale_f32(float *g, int64_t n, float inv) {
    float bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = g[i] * inv;
        g[i] = v;
        bad += v - v; /* 0 for finite v, NaN otherwise */
    }
    return bad != 0 || isnan(bad);
}

static oar_status unscale_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    (void)ctx, (void)out, (void)n_out, (void)a;
    float *found = (void *)oar_tensor_ptr(in[0]);
    float inv = *(const float *)(void *)oar_tensor_ptr(in[1]);
    bool bad = false;
    for (int i = 2; i < n_in; i++) {
        oar_tensor *g = in[i];
        if (g->dtype == OAR_F32) {
            bad |= unscale_f32((void *)oar_tensor_ptr(g), g->numel, inv);
        } else {
            const oar_dtype_traits *t = &oar_dtypes[g->dtype];
            char *p = (void *)oar_tensor_ptr(g);
            for (int64_t k = 0; k < g->numel; k++, p += t->size) {
                double v = t->load(p) * (double)inv;
                t->store(p, v);
                bad |= !isfinite(t->load(p));
            }
        }
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
    if ((st = check_scalar(UPDATE, in[0], OAR_F32, "scale", 0)) != OAR_OK ||
        (st = check_scalar(UPDATE, in[1], OAR_I64, "growth_tracker", 1)) != OAR_OK ||
        (st = check_scalar(UPDATE, in[2], OAR_F32, "found", 2)) != OAR_OK)
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
