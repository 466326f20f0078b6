/* The loss-scaling ops' shared checks and unscale loop (amp_common.h). */
#include "ops/amp_common.h"

#include <math.h>

oar_status oar_amp_check_scalar(const char *op, const oar_tensor *t, oar_dtype dt, const char *what, int i) {
    if (t->ndim == 0 && t->dtype == dt) return OAR_OK;
    char s[96];
    oar_format_shape(t->shape, t->ndim, s, sizeof s);
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input %d (%s) to be a 0-d %s tensor, got %s %s", op, i, what,
                     oar_dtype_name(dt), oar_dtype_name(t->dtype), s);
}

oar_status oar_amp_check_unscale(const char *op, oar_tensor *const *in, int n_in) {
    if (n_in < 3 || n_in > OAR_AMP_UNSCALE_MAX_GRADS + 2)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected found, inv_scale and 1 to %d gradients, got %d inputs; "
                         "split longer lists over several calls", op, OAR_AMP_UNSCALE_MAX_GRADS, n_in);
    oar_status st;
    if ((st = oar_amp_check_scalar(op, in[0], OAR_F32, "found", 0)) != OAR_OK ||
        (st = oar_amp_check_scalar(op, in[1], OAR_F32, "inv_scale", 1)) != OAR_OK)
        return st;
    for (int i = 2; i < n_in; i++)
        if (!oar_dtypes[in[i]->dtype].is_float)
            return oar_error(OAR_ERR_DTYPE, "%s: expected gradient %d (input %d) to be a float tensor, got %s", op,
                             i - 2, i, oar_dtype_name(in[i]->dtype));
    return OAR_OK;
}

/* f32, the common case: a loop the compiler vectorizes. A non-finite element makes the product
 * non-finite too, so the check is one sum of (v - v) over the products: 0, or NaN. */
static bool unscale_f32(const float *x, float *y, int64_t n, float inv) {
    float bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * inv;
        y[i] = v;
        bad += v - v;
    }
    return bad != 0 || isnan(bad);
}

bool oar_amp_unscale(oar_dtype dt, const void *x, void *y, int64_t n, float inv) {
    if (dt == OAR_F32) return unscale_f32(x, y, n, inv);
    const oar_dtype_traits *t = &oar_dtypes[dt];
    const char *src = x;
    char *dst = y;
    bool bad = false;
    for (int64_t k = 0; k < n; k++, src += t->size, dst += t->size) {
        t->store(dst, t->load(src) * (double)inv);
        bad |= !isfinite(t->load(dst));
    }
    return bad;
}
