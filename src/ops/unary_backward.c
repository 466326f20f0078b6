/* Backward ops of unary activations whose gradient, written with generic ops, costs several
 * passes over memory and temporaries:
 *   gelu_backward(grad, x; approximate) -> grad * gelu'(x), one pass instead of about fourteen
 *   elementwise ops (tanh form);
 *   relu_backward(grad, x) -> x > 0 ? grad : 0, one pass instead of two zero tensors, a
 *   comparison and a select.
 * Listed in unary.def; the rules of gelu and relu use them. Reference kernels compute in
 * double through the dtype traits. */
#include "ops/op.h"

#include <math.h>
#include <string.h>

#define GELU_K 0.7978845608028654   /* sqrt(2/pi) */
#define GELU_C 0.044715
#define INV_SQRT_2PI 0.3989422804014327

/* gelu'(x). tanh form, y = x/2 (1 + t), t = tanh(k (x + c x^3)):
 *   y' = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2)
 * erf form, y = x Phi(x): y' = Phi(x) + x phi(x). */
static double gelu_prime(double x, bool tanh_form) {
    if (tanh_form) {
        double t = tanh(GELU_K * (x + GELU_C * x * x * x)), sech2 = 1.0 - t * t;
        return 0.5 * (1.0 + t) + (sech2 == 0.0 ? 0.0 : 0.5 * x * sech2 * GELU_K * (1.0 + 3.0 * GELU_C * x * x));
    }
    return 0.5 * erfc(-x * M_SQRT1_2) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
}

/* (grad, x) of one float dtype and one shape; the output is like grad. */
static oar_status backward_infer(const char *name, oar_tensor *const *in, oar_meta *out, int *n_out) {
    oar_status st = oar_check_float(name, in[0], "the gradient");
    if (st == OAR_OK) st = oar_check_same_dtype(name, in, 2);
    if (st != OAR_OK) return st;
    if (in[0]->ndim != in[1]->ndim || memcmp(in[0]->shape, in[1]->shape, sizeof(int64_t) * (size_t)in[0]->ndim)) {
        char s0[128], s1[128];
        oar_format_shape(in[0]->shape, in[0]->ndim, s0, sizeof s0);
        oar_format_shape(in[1]->shape, in[1]->ndim, s1, sizeof s1);
        return oar_error(OAR_ERR_SHAPE, "%s: expected the gradient and the input to have one shape, got %s and %s",
                         name, s0, s1);
    }
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status gelu_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                      int *n_out) {
    (void)n_in;
    oar_status st = backward_infer("gelu_backward", in, out, n_out);
    if (st == OAR_OK && a[0].i != 0 && a[0].i != 1)
        return oar_error(OAR_ERR_INVALID_ARG, "gelu_backward: expected approximate 0 (exact, erf) or 1 (tanh), "
                                              "got %lld", (long long)a[0].i);
    return st;
}

static oar_status gelu_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *dx = out[0];
    const oar_dtype_traits *tr = &oar_dtypes[dx->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *gp = oar_tensor_ptr(in[0]), *xp = oar_tensor_ptr(in[1]);
    char *dp = oar_tensor_ptr(dx);
    for (int64_t i = 0; i < dx->numel; i++)
        tr->store(dp + i * es, tr->load(gp + i * es) * gelu_prime(tr->load(xp + i * es), a[0].i != 0));
    return OAR_OK;
}

/* dx = g * gelu'(x); for an incoming gradient u of dx:
 *   d/dg = u * gelu'(x) = gelu_backward(u, x)
 *   d/dx = u * g * gelu''(x), with
 *     tanh: gelu'' = k (1 - t^2) (w - k x t w^2 + 3 c x^2), w = 1 + 3 c x^2
 *     erf:  gelu'' = phi(x) (2 - x^2) */
static oar_status gelu_backward_grad(oar_grad_ctx *g) {
    oar_tensor *u = g->gout[0], *gy = g->in[0], *x = g->in[1];
    if (!u) return OAR_OK;
    if (g->needs[0]) {
        oar_tensor *in[2] = {u, x};
        if (!(g->gin[0] = oar_op_call1(OAR_OP_gelu_backward, in, 2, g->attrs))) return oar_last_status();
    }
    if (g->needs[1]) {
        oar_tensor *x2 = oar_square(x), *second;
        if (g->attrs[0].i) {
            oar_tensor *w = oar_add_scalar(oar_mul_scalar(x2, 3.0 * GELU_C), 1.0);
            oar_tensor *t = oar_tanh(oar_mul_scalar(oar_add(x, oar_mul_scalar(oar_mul(x2, x), GELU_C)), GELU_K));
            oar_tensor *sech2 = oar_add_scalar(oar_neg(oar_square(t)), 1.0);
            oar_tensor *xtw2 = oar_mul_scalar(oar_mul(oar_mul(x, t), oar_square(w)), GELU_K);
            oar_tensor *bracket = oar_add(oar_sub(w, xtw2), oar_mul_scalar(x2, 3.0 * GELU_C));
            second = oar_mul_scalar(oar_mul(sech2, bracket), GELU_K);
        } else {
            oar_tensor *pdf = oar_mul_scalar(oar_exp(oar_mul_scalar(x2, -0.5)), INV_SQRT_2PI);
            second = oar_mul(pdf, oar_add_scalar(oar_neg(x2), 2.0));
        }
        if (!(g->gin[1] = oar_mul(oar_mul(u, gy), second))) return oar_last_status();
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_gelu_backward = {
    .name = "gelu_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 1, .attrs = {{"approximate", OAR_ATTR_INT}},
    .flags = OAR_OPF_ELEMENTWISE, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = gelu_backward_infer, .reference = gelu_backward_ref, .grad = gelu_backward_grad,
};

/* ---- relu_backward(grad, x) -> x > 0 ? grad : 0 (0 for x NaN or -0, as relu's rule had it).
 * Piecewise constant in x: only grad has a gradient, relu_backward(u, x). */
static oar_status relu_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                      int *n_out) {
    (void)n_in; (void)a;
    return backward_infer("relu_backward", in, out, n_out);
}

static oar_status relu_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    oar_tensor *dx = out[0];
    const oar_dtype_traits *tr = &oar_dtypes[dx->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *gp = oar_tensor_ptr(in[0]), *xp = oar_tensor_ptr(in[1]);
    char *dp = oar_tensor_ptr(dx);
    for (int64_t i = 0; i < dx->numel; i++)
        tr->store(dp + i * es, tr->load(xp + i * es) > 0 ? tr->load(gp + i * es) : 0.0);
    return OAR_OK;
}

static oar_status relu_backward_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    oar_tensor *in[2] = {g->gout[0], g->in[1]};
    g->gin[0] = oar_op_call1(OAR_OP_relu_backward, in, 2, NULL);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_relu_backward = {
    .name = "relu_backward", .n_inputs = 2, .n_outputs = 1,
    .flags = OAR_OPF_ELEMENTWISE, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = relu_backward_infer, .reference = relu_backward_ref, .grad = relu_backward_grad,
};
