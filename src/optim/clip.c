/* Gradient clipping, like torch.nn.utils.clip_grad_norm_ / clip_grad_value_, written with ops
 * (vector_norm, div, clip, mul) so that a traced training step records it: each clipped
 * gradient is a new tensor that replaces .grad. Norms are summed over fixed blocks in double
 * (vector_norm), so they do not depend on the thread count. Eagerly, clip_grad_norm leaves
 * the gradients untouched when no scaling is needed, as before; traced, the scale is
 * min(coef, 1) at every run. */
#include "optim/optim.h"

#include <math.h>
#include <stdlib.h>

static oar_status check_grads(const char *who, oar_tensor *const *params, int n) {
    if (n < 0 || (n > 0 && !params))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a list of n >= 0 tensors, got %s", who,
                         n < 0 ? "n < 0" : "NULL");
    if (oar_check_handles(who, "tensor", params, n) != OAR_OK) return oar_last_status();
    for (int i = 0; i < n; i++) {
        if (!params[i]) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected tensor %d, got NULL", who, i);
        const oar_tensor *g = params[i]->grad;
        if (!g) continue;
        bool symbolic_ok = !g->storage && oar_active_trace && g->trace_id == oar_active_trace;
        if (!g->storage && !symbolic_ok) /* on any device: the clipping is made of ops */
            return oar_error(OAR_ERR_UNSUPPORTED, "%s: expected the gradient of tensor %d to hold data, got a "
                                                  "symbolic one of another trace", who, i);
        if (g->dtype != OAR_F32 && g->dtype != OAR_F64)
            return oar_error(OAR_ERR_DTYPE, "%s: expected the gradient of tensor %d to be f32 or f64, got %s", who, i,
                             oar_dtype_name(g->dtype));
    }
    return OAR_OK;
}

/* Hands t (a result tracked in the current scope) to params[i] as its gradient. */
static void set_grad(oar_tensor *param, oar_tensor *t) {
    oar_scope_forget(t); /* the scope's reference becomes the gradient's */
    t->requires_grad = false;
    oar_tensor_unref(param->grad);
    param->grad = t;
}

/* The clipping of oar_clip_grad_norm; *total receives the total norm (f64 scalar, tracked in the
 * caller's scope; NULL when no tensor has a gradient). */
static oar_status clip_norm(oar_tensor *const *params, int n, double max_norm, double norm_type, oar_tensor **total) {
    const char *who = "clip_grad_norm";
    *total = NULL;
    oar_status st = check_grads(who, params, n);
    if (st != OAR_OK) return st;
    if (!(max_norm >= 0))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected max_norm >= 0, got %g", who, max_norm);
    if (!(norm_type > 0))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected norm_type > 0 (or INFINITY), got %g", who, norm_type);
    int n_grads = 0;
    for (int i = 0; i < n; i++) n_grads += params[i]->grad != NULL;
    if (!n_grads) return OAR_OK;
    oar_tensor **norms = oar_malloc(sizeof(oar_tensor *) * (size_t)n_grads);
    if (!norms) return oar_last_status();
    bool traced = oar_active_trace != 0;
    oar_no_grad_begin();
    oar_scope_begin();
    /* the norm of the per-tensor norms: the same sums in the same order as one pass */
    int k = 0;
    for (int i = 0; i < n && st == OAR_OK; i++)
        if (params[i]->grad && !(norms[k++] = oar_optim_vector_norm(params[i]->grad, norm_type))) st = oar_last_status();
    oar_tensor *sum = NULL, *coef = NULL;
    if (st == OAR_OK) sum = oar_optim_vector_norm(oar_stack(norms, n_grads, 0), norm_type);
    /* torch: coef = max_norm / (total + 1e-6), gradients scaled by min(coef, 1) */
    if (sum) coef = oar_div(oar_scalar(max_norm, OAR_F64), oar_add_scalar(sum, 1e-6));
    double c = 0;
    bool scale = coef != NULL;
    if (coef && !traced) { /* eagerly, a scale of 1 changes nothing: skip it */
        st = oar_item(coef, &c);
        scale = st == OAR_OK && !(c >= 1);
    }
    if (scale) coef = oar_clip(coef, -INFINITY, 1.0);
    if (!sum || (scale && !coef)) st = st != OAR_OK ? st : oar_last_status();
    for (int i = 0; i < n && scale && st == OAR_OK; i++) {
        oar_tensor *g = params[i]->grad;
        if (!g) continue;
        oar_tensor *scaled = oar_mul(g, g->dtype == OAR_F64 ? coef : oar_cast(coef, g->dtype));
        if (!scaled) st = oar_last_status();
        else set_grad(params[i], scaled);
    }
    if (st == OAR_OK) *total = oar_keep(sum);
    oar_scope_end();
    oar_no_grad_end();
    free(norms);
    return st;
}

oar_status oar_clip_grad_norm(oar_tensor *const *params, int n, double max_norm, double norm_type,
                              double *total_norm) {
    if (total_norm) *total_norm = oar_active_trace ? NAN : 0;
    oar_scope_begin();
    oar_tensor *total = NULL;
    oar_status st = clip_norm(params, n, max_norm, norm_type, &total);
    if (st == OAR_OK && total && total_norm && !oar_active_trace) st = oar_item(total, total_norm);
    oar_scope_end();
    return st;
}

oar_tensor *oar_clip_grad_norm_total(oar_tensor *const *params, int n, double max_norm, double norm_type) {
    oar_tensor *total = NULL;
    if (clip_norm(params, n, max_norm, norm_type, &total) != OAR_OK) return NULL;
    return total ? total : oar_scalar(0, OAR_F64);
}

oar_status oar_clip_grad_value(oar_tensor *const *params, int n, double clip) {
    const char *who = "clip_grad_value";
    oar_status st = check_grads(who, params, n);
    if (st != OAR_OK) return st;
    if (!(clip >= 0)) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected clip >= 0, got %g", who, clip);
    oar_no_grad_begin();
    oar_scope_begin();
    for (int i = 0; i < n && st == OAR_OK; i++) {
        if (!params[i]->grad) continue;
        oar_tensor *c = oar_clip(params[i]->grad, -clip, clip);
        if (!c) st = oar_last_status();
        else set_grad(params[i], c);
    }
    oar_scope_end();
    oar_no_grad_end();
    return st;
}
