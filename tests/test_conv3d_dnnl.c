/* The oneDNN kernels of the 3-d convolutions (conv_dnnl.c with a rank-3 key):
 *  - dispatch picks them for f32 conv3d, conv3d_grad_input, conv3d_grad_weight and
 *    conv_transpose3d, and the reference kernel for f64 (oneDNN's are f32 / bf16);
 *  - each agrees with the reference kernel on mc3_18-like layers (the 3x7x7 stem with stride
 *    (1, 2, 2), a 3x3x3 block conv, the 1x1x1 stride-2 downsample, a grouped dilated one, a
 *    transposed one with output_padding and bias) at 1 and 2 threads, on a batch of 3 (parts of
 *    two sizes at 2 threads);
 *  - forward and grad_input give the same bits at 1 and 2 threads (each image by the same code).
 * CTest runs it at every ISA cap (_avx2, _generic): oneDNN's code within each cap. */
#include "test_util.h"

#include "ops/op.h"
#include "tensor/tensor.h"

static const oar_kernel_entry *kernel(oar_op_id op, const char *impl) {
    const oar_kernel_entry *k;
    int n = oar_op_kernels(op, &k);
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].impl, impl)) return &k[i];
    return NULL;
}

/* |a - b| <= 1e-4 * (1 + |b|): f32 sums of a few hundred N(0, 1) products (magnitude ~20) in
 * oneDNN's order against the reference's double sum differ by ~1e-5; a wrong tap, pad or
 * group is off by O(1). */
static bool near_ref(oar_tensor *a, oar_tensor *b) {
    if (a->numel != b->numel) return false;
    const float *x = (const float *)oar_tensor_ptr(a), *y = (const float *)oar_tensor_ptr(b);
    for (int64_t i = 0; i < b->numel; i++)
        if (!(fabs((double)x[i] - y[i]) <= 1e-4 * (1 + fabs(y[i])))) {
            fprintf(stderr, "element %lld: onednn %g, reference %g\n", (long long)i, x[i], y[i]);
            return false;
        }
    return true;
}

static const char *chosen(oar_op_id op, oar_tensor **in, int n, oar_tensor *out, const oar_attr *a) {
    const oar_kernel_entry *k = oar_select_kernel(op, in, n, &out, 1, a);
    return k ? k->impl : "?";
}

/* Runs op's oneDNN and reference kernels; checks that dispatch picks oneDNN and that the two
 * agree. Returns the oneDNN result (in the current scope). */
static oar_tensor *both(oar_op_id op, oar_tensor **in, int n, const oar_attr *a) {
    oar_meta m;
    int no = 1;
    CHECK(oar_op_infer(op, in, n, a, &m, &no) == OAR_OK);
    oar_tensor *got = oar_empty(m.shape, m.ndim, m.dtype), *want = oar_empty(m.shape, m.ndim, m.dtype);
    const oar_kernel_entry *fast = kernel(op, "onednn"), *ref = kernel(op, "reference");
    CHECK(fast && ref);
    if (!fast || !ref) return got;
    CHECK(!strcmp(chosen(op, in, n, got, a), "onednn"));
    CHECK(oar_op_run_kernel(op, fast, in, n, &got, 1, a) == OAR_OK);
    CHECK(oar_op_run_kernel(op, ref, in, n, &want, 1, a) == OAR_OK);
    CHECK(near_ref(got, want));
    return got;
}

typedef struct layer {
    int64_t x[5], w[5];
    int64_t s[3], p[3], d[3], groups;
} layer;

/* conv3d of the layer and its two backward ops at `threads` threads; out: forward, grad_input */
static void run_layer(const layer *l, int threads, oar_tensor **out) {
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    oar_manual_seed(11);
    oar_tensor *x = oar_randn(l->x, 5, OAR_F32), *w = oar_randn(l->w, 5, OAR_F32);
    oar_tensor *b = oar_randn(l->w, 1, OAR_F32);
    oar_attr spdg[4] = {oar_attr_ints(l->s, 3), oar_attr_ints(l->p, 3), oar_attr_ints(l->d, 3),
                        oar_attr_int(l->groups)};
    oar_tensor *fin[3] = {x, w, b};
    out[0] = both(OAR_OP_conv3d, fin, 3, spdg);
    oar_tensor *gy = oar_randn(out[0]->shape, 5, OAR_F32);
    oar_attr gi[5] = {oar_attr_ints(l->x, 5), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_attr gw[5] = {oar_attr_ints(l->w, 5), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_tensor *giin[2] = {gy, w}, *gwin[2] = {x, gy};
    out[1] = both(OAR_OP_conv3d_grad_input, giin, 2, gi);
    both(OAR_OP_conv3d_grad_weight, gwin, 2, gw);
}

static void test_layer(const layer *l) {
    if (!kernel(OAR_OP_conv3d, "onednn")) return; /* a build without oneDNN */
    int before = oar_get_num_threads();
    oar_scope_begin();
    oar_tensor *one[2], *two[2];
    run_layer(l, 1, one);
    run_layer(l, 2, two);
    CHECK(t_same_bits(one[0], two[0]));
    CHECK(t_same_bits(one[1], two[1]));
    oar_scope_end();
    oar_set_num_threads(before);
}

static void test_transpose(void) {
    if (!kernel(OAR_OP_conv_transpose3d, "onednn")) return;
    oar_scope_begin();
    oar_manual_seed(12);
    int64_t xs[5] = {3, 8, 3, 4, 4}, ws[5] = {8, 2, 3, 3, 3}, bs[1] = {4};
    int64_t s[3] = {2, 2, 1}, p[3] = {1, 0, 1}, op[3] = {1, 1, 0}, d[3] = {1, 1, 2};
    oar_tensor *in[3] = {oar_randn(xs, 5, OAR_F32), oar_randn(ws, 5, OAR_F32), oar_randn(bs, 1, OAR_F32)};
    oar_attr a[5] = {oar_attr_ints(s, 3), oar_attr_ints(p, 3), oar_attr_ints(op, 3), oar_attr_ints(d, 3),
                     oar_attr_int(2)};
    both(OAR_OP_conv_transpose3d, in, 3, a);
    in[2] = NULL;
    both(OAR_OP_conv_transpose3d, in, 3, a);
    oar_scope_end();
}

/* f64 stays with the reference kernel (oneDNN's conv kernels are f32 / bf16). */
static void test_f64_reference(void) {
    oar_scope_begin();
    int64_t xs[5] = {1, 2, 3, 4, 4}, ws[5] = {2, 2, 2, 2, 2}, ys[5] = {1, 2, 2, 3, 3};
    oar_tensor *in[3] = {oar_zeros(xs, 5, OAR_F64), oar_zeros(ws, 5, OAR_F64), NULL};
    int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    oar_attr a[4] = {oar_attr_ints(one, 3), oar_attr_ints(zero, 3), oar_attr_ints(one, 3), oar_attr_int(1)};
    CHECK(!strcmp(chosen(OAR_OP_conv3d, in, 3, oar_empty(ys, 5, OAR_F64), a), "reference"));
    oar_scope_end();
}

int main(void) {
    /* mc3_18's stem (3x7x7, stride (1, 2, 2), padding (1, 3, 3)), scaled down */
    test_layer(&(layer){{3, 3, 4, 16, 16}, {8, 3, 3, 7, 7}, {1, 2, 2}, {1, 3, 3}, {1, 1, 1}, 1});
    /* a 3x3x3 block conv */
    test_layer(&(layer){{3, 16, 4, 7, 7}, {16, 16, 3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1});
    /* the 1x1x1 stride-2 downsample */
    test_layer(&(layer){{3, 16, 4, 8, 8}, {32, 16, 1, 1, 1}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, 1});
    /* grouped and dilated, odd sizes */
    test_layer(&(layer){{3, 8, 6, 7, 6}, {8, 2, 3, 3, 3}, {1, 2, 1}, {2, 1, 2}, {2, 1, 2}, 4});
    test_transpose();
    test_f64_reference();
    return test_summary("test_conv3d_dnnl");
}
