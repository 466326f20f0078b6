/* In-place writes (oar_copy_, oar_fill_) into tensors a traced function made, without gradients:
 * the tensor stands for a new program value, so a compiled function gives the eager results at
 * every call and at other inputs (a residual block's `out += identity`, a zeroed accumulator).
 * Writes a program cannot make are refused with a message naming why: into a view, into a tensor
 * that has views, into an argument of the function, and a traced value into a tensor holding data. */
#include "test_util.h"

#include <string.h>

/* out = relu(x * 2); out += x; acc = zeros-like via fill_(0); acc += out (broadcast of a row);
 * returns (out, acc): the residual pattern and a filled accumulator, both written in place. */
static oar_status residual(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    oar_tensor *x = in[0];
    oar_tensor *y = oar_mul_scalar(x, 2.0), *r = y ? oar_relu(y) : NULL;
    oar_tensor *sum = r ? oar_add(r, x) : NULL;
    oar_status st = sum ? oar_copy_(r, sum) : oar_last_status(); /* r += x */
    oar_tensor *acc = st == OAR_OK ? oar_mul_scalar(x, 1.0) : NULL;
    if (st == OAR_OK && !acc) st = oar_last_status();
    if (st == OAR_OK) st = oar_fill_(acc, 0.0);
    oar_tensor *row = st == OAR_OK ? oar_slice(r, 0, 0, 1, 1) : NULL; /* a view of r, made after its write */
    oar_tensor *acc2 = row ? oar_add(acc, row) : NULL;
    if (st == OAR_OK) st = acc2 ? oar_copy_(acc, acc2) : oar_last_status(); /* acc += r[0:1] */
    oar_release(y), oar_release(sum), oar_release(row), oar_release(acc2);
    if (st != OAR_OK) {
        oar_release(r), oar_release(acc);
        return st;
    }
    out[0] = r;
    out[1] = acc;
    return OAR_OK;
}

static void eager_residual(oar_tensor *x, float *r_out, float *acc_out) {
    oar_tensor *in[1] = {x}, *out[2] = {0};
    CHECK(residual(NULL, in, 1, out, 2) == OAR_OK);
    memcpy(r_out, oar_data(out[0]), sizeof(float) * (size_t)oar_numel(x));
    memcpy(acc_out, oar_data(out[1]), sizeof(float) * (size_t)oar_numel(x));
    oar_release(out[0]), oar_release(out[1]);
}

static void test_compiled_equals_eager(void) {
    oar_no_grad_begin();
    oar_jit *f = oar_jit_to_static(residual, NULL, NULL);
    CHECK(f != NULL);
    int64_t shapes[2][2] = {{3, 4}, {5, 4}}; /* the traced shape, and another (traced again) */
    for (int s = 0; s < 2; s++) {
        for (int call = 0; call < 2; call++) {
            oar_manual_seed((uint64_t)(10 * s + call));
            oar_tensor *x = oar_randn(shapes[s], 2, OAR_F32), *in[1] = {x}, *out[2] = {0};
            CHECK(oar_jit_call(f, in, 1, out, 2) == OAR_OK);
            float r[20], acc[20];
            eager_residual(x, r, acc);
            int n = (int)oar_numel(x);
            const float *cr = oar_data(out[0]), *ca = oar_data(out[1]);
            CHECK(cr && ca && !memcmp(cr, r, sizeof(float) * (size_t)n) && !memcmp(ca, acc, sizeof(float) * (size_t)n));
            oar_release(x), oar_release(out[0]), oar_release(out[1]);
        }
    }
    CHECK(oar_jit_num_traces(f) == 2);
    /* the two `+=` take their fresh results as they are (no copy: clone records `contiguous`); the
     * fill's copy of its constant is folded by the passes */
    char text[8192];
    CHECK(oar_jit_dump(f, 0, text, sizeof text) > 0 && strstr(text, "contiguous(") == NULL);
    oar_jit_free(f);
    oar_no_grad_end();
}

typedef enum { INTO_VIEW, INTO_VIEWED, INTO_ARG, INTO_DATA } refusal;

static oar_status refused_write(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    refusal kind = *(const refusal *)user;
    oar_tensor *y = oar_mul_scalar(in[0], 2.0), *v = NULL, *dst = y, *src = NULL;
    if (kind == INTO_VIEW) dst = v = oar_slice(y, 0, 0, 1, 1);
    if (kind == INTO_VIEWED) v = oar_slice(y, 0, 0, 1, 1);
    if (kind == INTO_ARG) dst = in[0];
    if (kind == INTO_DATA) {
        int64_t shape[2] = {3, 4};
        dst = oar_full(shape, 2, 0.0, OAR_F32); /* holds data, made inside the function */
    }
    src = oar_add_scalar(dst, 1.0);
    oar_status st = oar_copy_(dst, src);
    oar_release(src), oar_release(v);
    if (kind == INTO_DATA) oar_release(dst);
    out[0] = y;
    return st;
}

static void test_refusals(void) {
    oar_no_grad_begin();
    const char *why[] = {"into a view (made by 'slice')", "that has views (one made by 'slice')",
                         "into an argument of a function", "into a tensor that holds data"};
    for (refusal k = INTO_VIEW; k <= INTO_DATA; k++) {
        oar_jit *f = oar_jit_to_static(refused_write, &k, NULL);
        int64_t shape[2] = {3, 4};
        oar_tensor *x = oar_ones(shape, 2, OAR_F32), *in[1] = {x}, *out[1] = {0};
        CHECK_ERR(oar_jit_call(f, in, 1, out, 1), why[k]);
        CHECK(((const float *)oar_data(x))[0] == 1.0f); /* the argument was not written */
        oar_release(x);
        oar_jit_free(f);
    }
    oar_no_grad_end();
}

/* With gradients on, a write into a traced tensor is refused (an autograd node may have saved it,
 * and a symbolic tensor has no version counter to catch that): here y depends on a parameter. The
 * Python binding rebinds instead when gradients are wanted. */
static oar_status write_with_grad(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    oar_tensor *y = oar_mul(in[0], (oar_tensor *)user), *z = oar_add_scalar(y, 1.0);
    oar_status st = oar_copy_(y, z);
    oar_release(z);
    out[0] = y;
    return st;
}

static void test_gradients_refused(void) {
    int64_t shape[1] = {3};
    oar_tensor *w = oar_ones(shape, 1, OAR_F32);
    oar_set_requires_grad(w, true);
    oar_jit *f = oar_jit_to_static(write_with_grad, w, NULL);
    oar_tensor *x = oar_ones(shape, 1, OAR_F32), *in[1] = {x}, *out[1] = {0};
    CHECK_ERR(oar_jit_call(f, in, 1, out, 1), "without gradients only");
    oar_no_grad_begin(); /* the same function without gradients compiles */
    CHECK(oar_jit_call(f, in, 1, out, 1) == OAR_OK && t_at(out[0], 2) == 2.0); /* x * w + 1 */
    oar_no_grad_end();
    oar_release(out[0]), oar_release(x), oar_release(w);
    oar_jit_free(f);
}

int main(void) {
    test_compiled_equals_eager();
    test_refusals();
    test_gradients_refused();
    return test_summary("test_trace_inplace");
}
