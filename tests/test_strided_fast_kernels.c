/* Fast kernels on strided inputs, which used to fall to the reference kernels: the AVX2 unary
 * kernels on inputs whose rows are contiguous but spaced apart (gate slices of a recurrent cell,
 * column blocks), and the f32 add_layer_norm on transposed activations (attention's residual
 * branch with batch_first). The same bits as on contiguous copies, from the AVX2 kernel wherever
 * the ISA cap has AVX2 (the reference otherwise), at every cap CTest runs. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/dispatch.h"
#include "test_util.h"

#include <string.h>

typedef oar_tensor *(*unary_fn)(oar_tensor *);

static oar_tensor *leaky(oar_tensor *x) { return oar_leaky_relu(x, 0.125); }
static oar_tensor *clip(oar_tensor *x) { return oar_clip(x, 0.7, 1.6); }
static oar_tensor *gelu_erf(oar_tensor *x) { return oar_gelu(x, false); }
static oar_tensor *gelu_tanh(oar_tensor *x) { return oar_gelu(x, true); }

static const struct {
    const char *name;
    unary_fn fn;
    oar_op_id op;
} OPS[] = {
    {"relu", oar_relu, OAR_OP_relu},       {"neg", oar_neg, OAR_OP_neg},         {"abs", oar_abs, OAR_OP_abs},
    {"square", oar_square, OAR_OP_square}, {"sqrt", oar_sqrt, OAR_OP_sqrt},      {"exp", oar_exp, OAR_OP_exp},
    {"log", oar_log, OAR_OP_log},          {"tanh", oar_tanh, OAR_OP_tanh},      {"sigmoid", oar_sigmoid, OAR_OP_sigmoid},
    {"silu", oar_silu, OAR_OP_silu},       {"gelu", gelu_erf, OAR_OP_gelu},      {"gelu tanh", gelu_tanh, OAR_OP_gelu},
    {"leaky_relu", leaky, OAR_OP_leaky_relu}, {"clip", clip, OAR_OP_clip},    {"round", oar_round, OAR_OP_round},
    {"floor", oar_floor, OAR_OP_floor},    {"ceil", oar_ceil, OAR_OP_ceil},
};

/* the kernel the dispatcher picks for op on x (attributes as the public call passes them) */
static const char *kernel_of(oar_op_id op, oar_tensor *x) {
    oar_tensor *y = oar_empty(x->shape, x->ndim, OAR_F32);
    oar_attr a[2] = {{.f = 0.125}, {.f = 1.6}};
    const oar_kernel_entry *k = oar_select_kernel(op, (oar_tensor *[]){x}, 1, (oar_tensor *[]){y}, 1, a);
    oar_clear_error();
    oar_release(y);
    return k ? k->impl : "none";
}

static void check_view(oar_tensor *view, const char *what) {
    oar_tensor *dense = oar_contiguous(view);
    CHECK(!view->contiguous && dense->contiguous);
    const char *want = oar_cpu_has_avx2() ? "avx2" : "reference";
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        oar_tensor *a = OPS[i].fn(view), *b = OPS[i].fn(dense);
        CHECK(a && b && a->numel == b->numel);
        if (!a || !b) continue;
        bool same = !memcmp(oar_data(a), oar_data(b), sizeof(float) * (size_t)a->numel);
        const char *impl = kernel_of(OPS[i].op, view);
        CHECK(same && !strcmp(impl, want));
        if (!same || strcmp(impl, want))
            fprintf(stderr, "  %s on %s: %s, kernel %s (expected %s)\n", OPS[i].name, what,
                    same ? "same bits" : "DIFFERENT bits", impl, want);
    }
}

/* LayerNorm's two-input form (op add_layer_norm) on a transposed view of a and a dense b */
static void check_add_layer_norm(void) {
    oar_tensor *t = oar_randn((int64_t[]){16, 8, 32}, 3, OAR_F32);
    oar_tensor *a = oar_transpose(t, 0, 1), *b = oar_randn((int64_t[]){8, 16, 32}, 3, OAR_F32);
    oar_module *ln = oar_nn_layer_norm((int64_t[]){32}, 1, 1e-5, true);
    oar_tensor *ys[2] = {NULL, NULL}, *yd[2] = {NULL, NULL};
    CHECK(!a->contiguous);
    CHECK(oar_forward_n(ln, (oar_tensor *[]){a, b}, 2, ys, 2) == OAR_OK);
    CHECK(oar_forward_n(ln, (oar_tensor *[]){oar_contiguous(a), b}, 2, yd, 2) == OAR_OK);
    for (int o = 0; o < 2; o++)
        CHECK(ys[o] && yd[o] && !memcmp(oar_data(ys[o]), oar_data(yd[o]), sizeof(float) * (size_t)ys[o]->numel));
    oar_tensor *out[4] = {oar_empty(a->shape, 3, OAR_F32), oar_empty(a->shape, 3, OAR_F32),
                          oar_empty((int64_t[]){8, 16}, 2, OAR_F32), oar_empty((int64_t[]){8, 16}, 2, OAR_F32)};
    oar_tensor *w = oar_ones((int64_t[]){32}, 1, OAR_F32), *bias = oar_zeros((int64_t[]){32}, 1, OAR_F32);
    oar_attr at[2] = {{.i = 1}, {.f = 1e-5}};
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_add_layer_norm, (oar_tensor *[]){a, b, w, bias}, 4, out, 4, at);
    oar_clear_error();
    const char *want = oar_cpu_has_avx2() ? "avx2" : "reference";
    CHECK(k && !strcmp(k->impl, want));
    if (k && strcmp(k->impl, want)) fprintf(stderr, "  add_layer_norm on a transposed view: %s\n", k->impl);
    oar_module_free(ln);
}

int main(void) {
    oar_scope_begin();
    oar_manual_seed(7);
    /* positive values around 1 (sqrt and log defined), with halves for round's ties */
    oar_tensor *base = oar_add(oar_rand((int64_t[]){5, 3, 40}, 3, OAR_F32), oar_scalar(0.5, OAR_F32));
    check_view(oar_slice(base, 2, 4, 36, 1), "[5,3,32] of rows 40 apart");
    oar_tensor *wide = oar_add(oar_rand((int64_t[]){6, 50}, 2, OAR_F32), oar_scalar(0.25, OAR_F32));
    check_view(oar_slice(wide, 1, 7, 27, 1), "a [6,20] column block (a masked tail per row)");
    check_view(oar_slice(oar_slice(base, 0, 1, 5, 2), 2, 0, 16, 1), "rows strided in two outer dims");
    /* rows shorter than a vector, or last-dim strides, stay with the reference */
    oar_tensor *narrow = oar_slice(wide, 1, 0, 5, 1), *cols = oar_slice(wide, 1, 0, 50, 2);
    CHECK(!strcmp(kernel_of(OAR_OP_tanh, narrow), "reference") && !strcmp(kernel_of(OAR_OP_tanh, cols), "reference"));
    check_add_layer_norm();
    oar_scope_end();
    return test_summary("test_strided_fast_kernels");
}
