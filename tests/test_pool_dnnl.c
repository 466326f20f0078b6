/* The oneDNN adaptive average pooling kernels (src/kernels/cpu/pool_dnnl.c):
 *  - dispatch picks them for even bins (output size dividing the input size, ResNet's global
 *    pooling) and keeps the reference kernel for uneven bins, non-f32 or empty tensors;
 *  - forward and backward agree with the reference kernel at 1 and 2 threads, on a batch of 37
 *    (parts of two sizes at 2 threads) and on an unbatched input, and a second call gives the
 *    same bits;
 *  - results are bitwise the same at 1 and 2 threads (each image by the same code). */
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

/* The impl dispatch selects for adaptive_avg_pool2d of x [shape] to out x out. */
static const char *chosen(const int64_t *shape, int ndim, oar_dtype dt, int64_t oh, int64_t ow) {
    oar_tensor *x = oar_zeros(shape, ndim, dt);
    oar_attr a[1] = {oar_attr_ints((int64_t[]){oh, ow}, 2)};
    oar_meta m;
    int n = 1;
    if (oar_op_infer(OAR_OP_adaptive_avg_pool2d, &x, 1, a, &m, &n) != OAR_OK) return "?";
    oar_tensor *y = oar_empty(m.shape, m.ndim, dt);
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_adaptive_avg_pool2d, &x, 1, &y, 1, a);
    return k ? k->impl : "?";
}

static void test_selection(void) {
    if (!kernel(OAR_OP_adaptive_avg_pool2d, "onednn")) return; /* a build without oneDNN */
    oar_scope_begin();
    CHECK(!strcmp(chosen((int64_t[]){32, 64, 8, 8}, 4, OAR_F32, 1, 1), "onednn"));
    CHECK(!strcmp(chosen((int64_t[]){2, 3, 12, 10}, 4, OAR_F32, 3, 5), "onednn"));
    CHECK(!strcmp(chosen((int64_t[]){4, 6, 6}, 3, OAR_F32, 2, 3), "onednn")); /* unbatched */
    CHECK(!strcmp(chosen((int64_t[]){1, 2, 5, 7}, 4, OAR_F32, 3, 4), "reference")); /* uneven bins */
    CHECK(!strcmp(chosen((int64_t[]){1, 2, 3, 3}, 4, OAR_F32, 5, 4), "reference")); /* bins overlap */
    CHECK(!strcmp(chosen((int64_t[]){2, 3, 8, 8}, 4, OAR_F64, 1, 1), "reference"));
    CHECK(!strcmp(chosen((int64_t[]){0, 3, 8, 8}, 4, OAR_F32, 1, 1), "reference")); /* empty */
    oar_scope_end();
}

/* |a - b| <= 1e-5 * max(1, |b|): averages of at most 64 values of N(0, 1), summed in f32 by
 * oneDNN and in double by the reference, differ by a few ulps; a wrong window or image is off
 * by O(0.1). */
static bool near_ref(oar_tensor *a, oar_tensor *b) {
    const float *x = (const float *)oar_tensor_ptr(a), *y = (const float *)oar_tensor_ptr(b);
    for (int64_t i = 0; i < b->numel; i++)
        if (!(fabs((double)x[i] - y[i]) <= 1e-5 * fmax(1, fabs(y[i])))) return false;
    return true;
}

/* Runs op with the oneDNN and reference kernels on input in (attrs a), output of shape os;
 * returns the oneDNN result (in the current scope). */
static oar_tensor *check_op(oar_op_id op, oar_tensor *in, const oar_attr *a, const int64_t *os, int ondim) {
    const oar_kernel_entry *fast = kernel(op, "onednn"), *ref = kernel(op, "reference");
    oar_tensor *got = oar_empty(os, ondim, OAR_F32), *want = oar_empty(os, ondim, OAR_F32);
    oar_tensor *again = oar_empty(os, ondim, OAR_F32);
    CHECK(fast->supports(&in, 1, &got, 1, a));
    CHECK(oar_op_run_kernel(op, fast, &in, 1, &got, 1, a) == OAR_OK);
    CHECK(oar_op_run_kernel(op, ref, &in, 1, &want, 1, a) == OAR_OK);
    CHECK(near_ref(got, want));
    CHECK(oar_op_run_kernel(op, fast, &in, 1, &again, 1, a) == OAR_OK);
    CHECK(t_same_bits(again, got));
    return got;
}

/* x [shape] pooled to oh x ow and back, at `threads` threads; out: forward and backward results */
static void run_case(const int64_t *xs, int ndim, int64_t oh, int64_t ow, int threads, oar_tensor **out) {
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    oar_manual_seed(5);
    int64_t ys[4];
    memcpy(ys, xs, sizeof(int64_t) * (size_t)ndim);
    ys[ndim - 2] = oh, ys[ndim - 1] = ow;
    oar_tensor *x = oar_randn(xs, ndim, OAR_F32), *gy = oar_randn(ys, ndim, OAR_F32);
    oar_attr fa[1] = {oar_attr_ints((int64_t[]){oh, ow}, 2)}, ba[1] = {oar_attr_ints(xs, ndim)};
    out[0] = check_op(OAR_OP_adaptive_avg_pool2d, x, fa, ys, ndim);
    out[1] = check_op(OAR_OP_adaptive_avg_pool2d_backward, gy, ba, xs, ndim);
}

static void test_against_reference(const int64_t *xs, int ndim, int64_t oh, int64_t ow) {
    if (!kernel(OAR_OP_adaptive_avg_pool2d, "onednn")) return;
    int before = oar_get_num_threads();
    oar_scope_begin();
    oar_tensor *one[2], *two[2];
    run_case(xs, ndim, oh, ow, 1, one);
    run_case(xs, ndim, oh, ow, 2, two);
    CHECK(t_same_bits(one[0], two[0]));
    CHECK(t_same_bits(one[1], two[1]));
    oar_scope_end();
    oar_set_num_threads(before);
}

int main(void) {
    test_selection();
    test_against_reference((int64_t[]){37, 64, 8, 8}, 4, 1, 1);
    test_against_reference((int64_t[]){5, 3, 12, 10}, 4, 3, 5);
    test_against_reference((int64_t[]){6, 9, 9}, 3, 3, 3);
    return test_summary("test_pool_dnnl");
}
