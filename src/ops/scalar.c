/* Scalar forms of the binary ops (torch's x + 2, 2 - x, x / 2, x > 0 ...): the scalar becomes a
 * 0-d tensor of the tensor's dtype and the ordinary op runs, so gradients, tracing and
 * broadcasting are the binary ops' own. An integer or bool tensor takes only a scalar its dtype
 * holds exactly: torch would promote (i64 == 0.5 is false there), and rounding the scalar
 * silently would give another answer. */
#include "ops/dispatch.h"

#include <math.h>

typedef oar_tensor *(*binary_fn)(oar_tensor *, oar_tensor *);

static oar_tensor *scalar_like(const char *who, oar_tensor *a, double s) {
    if (!a) return NULL;
    if (!OAR_HANDLE_OK(a)) {
        oar_handle_error(who, "the tensor", -1, a);
        return NULL;
    }
    const oar_dtype_traits *tr = &oar_dtypes[a->dtype];
    unsigned char held[16]; /* the scalar as the dtype stores it, checked on the host */
    tr->store(held, s);
    if (!tr->is_float && !(tr->load(held) == s)) {
        oar_error(OAR_ERR_DTYPE, "%s: expected a scalar that %s holds exactly, got %g; cast the tensor to a float "
                                 "dtype first (oar_cast)", who, tr->name, s);
        return NULL;
    }
    oar_tensor *b = oar_tensor_new_on(a->device, a->dtype, NULL, 0); /* on a's device */
    if (b && oar_tensor_fill(b, s) != OAR_OK) {
        oar_tensor_unref(b);
        return NULL;
    }
    return b;
}

static oar_tensor *scalar_op(const char *who, binary_fn op, oar_tensor *a, double s, bool scalar_first) {
    oar_tensor *b = scalar_like(who, a, s);
    if (!b) return NULL;
    oar_tensor *r = scalar_first ? op(b, a) : op(a, b);
    oar_tensor_unref(b);
    return r;
}

oar_tensor *oar_add_scalar(oar_tensor *a, double s) { return scalar_op("add_scalar", oar_add, a, s, false); }
oar_tensor *oar_sub_scalar(oar_tensor *a, double s) { return scalar_op("sub_scalar", oar_sub, a, s, false); }
oar_tensor *oar_rsub_scalar(oar_tensor *a, double s) { return scalar_op("rsub_scalar", oar_sub, a, s, true); }
oar_tensor *oar_mul_scalar(oar_tensor *a, double s) { return scalar_op("mul_scalar", oar_mul, a, s, false); }
oar_tensor *oar_div_scalar(oar_tensor *a, double s) { return scalar_op("div_scalar", oar_div, a, s, false); }
oar_tensor *oar_rdiv_scalar(oar_tensor *a, double s) { return scalar_op("rdiv_scalar", oar_div, a, s, true); }
oar_tensor *oar_pow_scalar(oar_tensor *a, double s) { return scalar_op("pow_scalar", oar_pow, a, s, false); }
oar_tensor *oar_rpow_scalar(oar_tensor *a, double s) { return scalar_op("rpow_scalar", oar_pow, a, s, true); }
oar_tensor *oar_maximum_scalar(oar_tensor *a, double s) { return scalar_op("maximum_scalar", oar_maximum, a, s, false); }
oar_tensor *oar_minimum_scalar(oar_tensor *a, double s) { return scalar_op("minimum_scalar", oar_minimum, a, s, false); }
oar_tensor *oar_eq_scalar(oar_tensor *a, double s) { return scalar_op("eq_scalar", oar_eq, a, s, false); }
oar_tensor *oar_ne_scalar(oar_tensor *a, double s) { return scalar_op("ne_scalar", oar_ne, a, s, false); }
oar_tensor *oar_lt_scalar(oar_tensor *a, double s) { return scalar_op("lt_scalar", oar_lt, a, s, false); }
oar_tensor *oar_le_scalar(oar_tensor *a, double s) { return scalar_op("le_scalar", oar_le, a, s, false); }
oar_tensor *oar_gt_scalar(oar_tensor *a, double s) { return scalar_op("gt_scalar", oar_gt, a, s, false); }
oar_tensor *oar_ge_scalar(oar_tensor *a, double s) { return scalar_op("ge_scalar", oar_ge, a, s, false); }
