/* A loss scaler's check-and-skip as ops, so a compiled step holds it (src/amp/scaler.c traces
 * them; eagerly the scaler does the same on the host):
 *   amp_begin_unscale  scale -> inv_scale = 1/scale (in double, rounded once to f32, as torch),
 *                      found = 0: the step's record starts clean before amp_unscale fills it;
 *   amp_unscale_grads  amp_unscale's fused pass (gradients times inv_scale, found set on any
 *                      inf/nan) writing new gradients: a traced step's gradients are values of
 *                      the program, which it may not write in place;
 *   amp_skip_step      after the unscale: when found is set, counts a skipped step and sets the
 *                      skip flag of every optimizer hyper tensor passed, so the optimizer_update
 *                      ops after it change nothing (and clear the flag). No host round trip;
 *   amp_sync_param     O2: an f16/bf16 parameter <- its f32 master, rounded as oar_copy_ rounds
 *                      (a skipped step leaves the master, so the parameter keeps its bits). */
#include "ops/amp_common.h"
#include "optim/optim.h"

#include <math.h>
#include <string.h>

#define BEGIN "amp_begin_unscale"
#define SKIP "amp_skip_step"
#define UNSCALE "amp_unscale_grads"
#define SKIP_MAX_HYPERS 30 /* inputs written in place fit a 32-bit mask: skipped and 30 hypers */

static oar_status begin_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in, (void)a, (void)out;
    oar_status st;
    if ((st = oar_amp_check_scalar(BEGIN, in[0], OAR_F32, "scale", 0)) != OAR_OK ||
        (st = oar_amp_check_scalar(BEGIN, in[1], OAR_F32, "inv_scale", 1)) != OAR_OK ||
        (st = oar_amp_check_scalar(BEGIN, in[2], OAR_F32, "found", 2)) != OAR_OK)
        return st;
    *n_out = 0;
    return OAR_OK;
}

static oar_status begin_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx, (void)n_in, (void)out, (void)n_out, (void)a;
    float scale = *(const float *)(const void *)oar_tensor_ptr(in[0]);
    *(float *)(void *)oar_tensor_ptr(in[1]) = (float)(1.0 / (double)scale);
    *(float *)(void *)oar_tensor_ptr(in[2]) = 0.0f;
    in[1]->storage->version++;
    in[2]->storage->version++;
    return OAR_OK;
}

const oar_op_def oar_opdef_amp_begin_unscale = {
    .name = BEGIN, .n_inputs = 3, .n_outputs = 0, .key_input = 0,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .mutated_inputs = (1u << 1) | (1u << 2),
    .infer = begin_infer, .reference = begin_ref,
};

static oar_status unscale_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)a;
    oar_status st = oar_amp_check_unscale(UNSCALE, in, n_in);
    if (st != OAR_OK) return st;
    for (int i = 2; i < n_in; i++) {
        out[i - 2].dtype = in[i]->dtype;
        out[i - 2].ndim = in[i]->ndim;
        for (int d = 0; d < in[i]->ndim; d++) out[i - 2].shape[d] = in[i]->shape[d];
    }
    *n_out = n_in - 2;
    return OAR_OK;
}

/* amp_unscale's loop (amp_common.c), writing new gradients. */
static oar_status unscale_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    (void)ctx, (void)n_out, (void)a;
    float inv = *(const float *)(const void *)oar_tensor_ptr(in[1]);
    bool bad = false;
    for (int i = 2; i < n_in; i++)
        bad |= oar_amp_unscale(in[i]->dtype, oar_tensor_ptr(in[i]), (void *)oar_tensor_ptr(out[i - 2]), in[i]->numel,
                               inv);
    if (bad) {
        *(float *)(void *)oar_tensor_ptr(in[0]) = 1.0f;
        in[0]->storage->version++;
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_amp_unscale_grads = {
    .name = UNSCALE, .n_inputs = -1, .n_outputs = -1, .key_input = 0,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .mutated_inputs = 1u,
    .infer = unscale_infer, .reference = unscale_ref,
};

static oar_status skip_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)a, (void)out;
    if (n_in < 3 || n_in > SKIP_MAX_HYPERS + 2)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, SKIP, "expected found, skipped and 1 to %d optimizer hyper tensors, got %d "
                        "inputs; split longer lists over several calls", SKIP_MAX_HYPERS, n_in);
    oar_status st;
    if ((st = oar_amp_check_scalar(SKIP, in[0], OAR_F32, "found", 0)) != OAR_OK ||
        (st = oar_amp_check_scalar(SKIP, in[1], OAR_I64, "skipped", 1)) != OAR_OK)
        return st;
    for (int i = 2; i < n_in; i++) {
        const oar_tensor *h = in[i];
        if (h->dtype != OAR_F64 || h->ndim != 1 || h->shape[0] != OAR_HYPER_COUNT || !h->contiguous) {
            char s[96];
            oar_format_shape(h->shape, h->ndim, s, sizeof s);
            return OAR_FAIL(OAR_ERR_INVALID_ARG, SKIP, "expected input %d to be an optimizer's contiguous f64 [%d] hyper "
                            "tensor, got %s %s%s", i, OAR_HYPER_COUNT, oar_dtype_name(h->dtype), s,
                            h->contiguous ? "" : " (strided)");
        }
    }
    *n_out = 0;
    return OAR_OK;
}

static oar_status skip_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)ctx, (void)out, (void)n_out, (void)a;
    if (*(const float *)(const void *)oar_tensor_ptr(in[0]) == 0.0f) return OAR_OK;
    *(int64_t *)(void *)oar_tensor_ptr(in[1]) += 1;
    in[1]->storage->version++;
    for (int i = 2; i < n_in; i++) {
        ((double *)(void *)oar_tensor_ptr(in[i]))[OAR_HYPER_SKIP] = 1;
        in[i]->storage->version++;
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_amp_skip_step = {
    .name = SKIP, .n_inputs = -1, .n_outputs = 0, .key_input = 0,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .mutated_inputs = ~1u,
    /* the hyper tensors live on the host whatever device the parameters are on (optimizer_update's
     * host_inputs); found and skipped are read on the host too */
    .host_inputs = ~0u,
    .infer = skip_infer, .reference = skip_ref,
};

#define SYNC "amp_sync_param"

static oar_status sync_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in, (void)a, (void)out;
    const oar_tensor *p = in[0], *m = in[1];
    char ps[96], ms[96];
    oar_format_shape(p->shape, p->ndim, ps, sizeof ps);
    oar_format_shape(m->shape, m->ndim, ms, sizeof ms);
    if (!oar_dtypes[m->dtype].is_float || !oar_dtypes[p->dtype].is_float)
        return OAR_FAIL(OAR_ERR_DTYPE, SYNC, "expected a float parameter and its float (f32) master, got %s and %s",
                        oar_dtype_name(p->dtype), oar_dtype_name(m->dtype));
    if (p->ndim != m->ndim || memcmp(p->shape, m->shape, sizeof(int64_t) * (size_t)p->ndim))
        return OAR_FAIL(OAR_ERR_SHAPE, SYNC, "expected the master to have the parameter's shape %s, got %s", ps, ms);
    *n_out = 0;
    return OAR_OK;
}

static oar_status sync_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)ctx, (void)n_in, (void)out, (void)n_out, (void)a;
    oar_status st = oar_tensor_copy_strided(in[0], in[1]);
    in[0]->storage->version++;
    return st;
}

const oar_op_def oar_opdef_amp_sync_param = {
    .name = SYNC, .n_inputs = 2, .n_outputs = 0, .key_input = 1,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_FLOAT_DTYPES,
    .mutated_inputs = 1u,
    .infer = sync_infer, .reference = sync_ref,
};
