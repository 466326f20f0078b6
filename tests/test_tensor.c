/* Tensors: creation, views sharing storage, copies, casts, printing, half precision,
 * random numbers, scopes and memory accounting. */
#include "test_util.h"

static int deleter_calls;
static void count_delete(void *data, void *ctx) {
    (void)data;
    (void)ctx;
    deleter_calls++;
}

static void test_creation(void) {
    int64_t s[2] = {2, 3};
    oar_tensor *z = oar_zeros(s, 2, OAR_F32), *o = oar_ones(s, 2, OAR_I32), *f = oar_full(s, 2, 2.5, OAR_F64);
    CHECK(oar_numel(z) == 6 && oar_ndim(z) == 2 && oar_size(z, -1) == 3);
    CHECK(t_at(z, 5) == 0 && t_at(o, 4) == 1 && t_at(f, 3) == 2.5);
    CHECK(oar_is_contiguous(z) && oar_strides(z)[0] == 3 && oar_strides(z)[1] == 1);
    oar_tensor *r = oar_arange(0, 1, 0.25, OAR_F32);
    CHECK(oar_numel(r) == 4 && t_at(r, 3) == 0.75);
    oar_tensor *l = oar_linspace(-1, 1, 5, OAR_F64);
    CHECK(oar_numel(l) == 5 && t_at(l, 0) == -1 && t_at(l, 2) == 0 && t_at(l, 4) == 1);
    oar_tensor *e = oar_eye(3, 4, OAR_F32);
    CHECK(t_at(e, 0) == 1 && t_at(e, 5) == 1 && t_at(e, 10) == 1 && t_at(e, 1) == 0 && oar_size(e, 1) == 4);
    float data[6] = {1, 2, 3, 4, 5, 6};
    oar_tensor *d = oar_from_data(data, s, 2, OAR_F32);
    data[0] = 100; /* from_data copied */
    CHECK(t_at(d, 0) == 1 && t_at(d, 5) == 6);
    oar_tensor *b = oar_from_blob(data, s, 2, OAR_F32, count_delete, NULL);
    CHECK(t_at(b, 0) == 100); /* from_blob shares */
    oar_tensor *bv = oar_transpose(b, 0, 1);
    oar_release(b);
    CHECK(deleter_calls == 0); /* the view keeps the buffer alive */
    oar_release(bv);
    CHECK(deleter_calls == 1);
    double v;
    oar_tensor *sc = oar_scalar(3.5, OAR_F64);
    CHECK(oar_item(sc, &v) == OAR_OK && v == 3.5 && oar_ndim(sc) == 0);
    CHECK(oar_item(z, &v) == OAR_ERR_SHAPE && strstr(oar_last_error(), "expected a tensor with one element"));
    CHECK_ERR(oar_arange(0, 1, 0, OAR_F32), "non-zero step");
    CHECK_ERR(oar_zeros((int64_t[]){-1}, 1, OAR_F32), "non-negative sizes");
    CHECK_ERR(oar_randint(5, 5, s, 2, OAR_I64), "expected low < high");
    oar_release(z); oar_release(o); oar_release(f); oar_release(r); oar_release(l);
    oar_release(e); oar_release(d); oar_release(sc);
}

static void test_views(void) {
    oar_tensor *x = oar_arange(0, 24, 1, OAR_F32);
    oar_tensor *y = oar_reshape(x, (int64_t[]){2, 3, 4}, 3);
    CHECK(oar_data(y) == oar_data(x));
    oar_tensor *p = oar_permute(y, (int[]){2, 0, 1}, 3);
    CHECK(oar_size(p, 0) == 4 && oar_size(p, 1) == 2 && !oar_is_contiguous(p));
    CHECK(t_at(p, 1) == 4); /* p[0,0,1] = y[0,1,0] */
    oar_tensor *s = oar_slice(y, 2, 1, 4, 2); /* [2,3,2]: columns 1 and 3 */
    CHECK(oar_size(s, 2) == 2 && t_at(s, 0) == 1 && t_at(s, 1) == 3 && t_at(s, 2) == 5);
    oar_tensor *e = oar_expand(oar_slice(x, 0, 0, 1, 1), (int64_t[]){3, 5}, 2);
    CHECK(oar_strides(e)[0] == 0 && oar_strides(e)[1] == 0 && t_at(e, 14) == 0);
    oar_tensor *u = oar_unsqueeze(x, 0), *q = oar_squeeze(u, 0);
    CHECK(oar_ndim(u) == 2 && oar_size(u, 0) == 1 && oar_ndim(q) == 1);
    oar_tensor *c = oar_contiguous(p);
    CHECK(oar_is_contiguous(c) && oar_data(c) != oar_data(x) && t_at(c, 1) == 4);
    oar_tensor *f = oar_flatten(p, 0, -1);
    CHECK(oar_numel(f) == 24 && t_at(f, 1) == 4);
    /* a write through a view is seen by the base */
    CHECK(oar_fill_(s, -1) == OAR_OK);
    CHECK(t_at(x, 1) == -1 && t_at(x, 3) == -1 && t_at(x, 2) == 2);
    CHECK_ERR(oar_view(p, (int64_t[]){24}, 1), "without a copy");
    CHECK_ERR(oar_permute(y, (int[]){0, 0, 1}, 3), "permutation");
    oar_tensor *t = oar_transpose(y, -1, 0);
    CHECK(oar_size(t, 0) == 4 && oar_size(t, 2) == 2);
    oar_release(x); oar_release(y); oar_release(p); oar_release(s); oar_release(e);
    oar_release(u); oar_release(q); oar_release(c); oar_release(f); oar_release(t);
}

static void test_copy_cast(void) {
    int64_t s[2] = {2, 3};
    oar_tensor *a = oar_arange(-1.5, 1.5, 0.5, OAR_F32);
    oar_tensor *i = oar_cast(a, OAR_I32);
    CHECK(oar_dtype_of(i) == OAR_I32 && t_at(i, 0) == -1 && t_at(i, 1) == -1 && t_at(i, 5) == 1);
    oar_tensor *bl = oar_cast(a, OAR_BOOL);
    CHECK(t_at(bl, 3) == 0 && t_at(bl, 4) == 1);
    oar_tensor *dst = oar_zeros(s, 2, OAR_F64);
    oar_tensor *row = oar_arange(0, 3, 1, OAR_F32);
    CHECK(oar_copy_(dst, row) == OAR_OK && t_at(dst, 4) == 1 && t_at(dst, 5) == 2); /* broadcast + cast */
    CHECK(oar_copy_(row, dst) == OAR_ERR_SHAPE);
    oar_tensor *cl = oar_clone(dst);
    CHECK(oar_data(cl) != oar_data(dst) && t_at(cl, 5) == 2);
    oar_release(a); oar_release(i); oar_release(bl); oar_release(dst); oar_release(row); oar_release(cl);
}

/* Copies of permuted, transposed and sliced layouts (the row and tiled copy paths) must equal
 * an element-by-element reading of the source. */
static void test_strided_copies(void) {
    int64_t shape[4] = {3, 37, 5, 41};
    oar_tensor *x = oar_reshape(oar_arange(0, 3 * 37 * 5 * 41, 1, OAR_F32), shape, 4);
    oar_tensor *views[3] = {oar_permute(x, (int[]){0, 2, 1, 3}, 4), oar_transpose(x, -1, -2),
                            oar_slice(oar_slice(x, 3, 1, 40, 3), 1, 2, 30, 1)};
    for (int v = 0; v < 3; v++) {
        oar_tensor *c = oar_contiguous(views[v]);
        CHECK(c && oar_is_contiguous(c));
        const float *cp = oar_data(c), *xp = oar_data(x);
        const int64_t *vs = oar_strides(views[v]), *sh = oar_shape(views[v]);
        int64_t base = (const float *)oar_data(views[v]) - xp, bad = 0, i = 0;
        for (int64_t a = 0; a < sh[0]; a++)
            for (int64_t b = 0; b < sh[1]; b++)
                for (int64_t d = 0; d < sh[2]; d++)
                    for (int64_t e = 0; e < sh[3]; e++, i++)
                        bad += cp[i] != xp[base + a * vs[0] + b * vs[1] + d * vs[2] + e * vs[3]];
        CHECK(bad == 0);
    }
}

static void test_format(void) {
    oar_tensor *x = oar_reshape(oar_arange(0, 4, 1, OAR_F32), (int64_t[]){2, 2}, 2);
    char buf[256];
    oar_format(x, buf, sizeof buf);
    CHECK(strcmp(buf, "tensor([[0., 1.],\n        [2., 3.]], shape=[2, 2], dtype=f32)") == 0);
    oar_tensor *h = oar_mul_scalar(x, 0.5);
    oar_format(h, buf, sizeof buf);
    CHECK(strstr(buf, "0.5000") != NULL);
    oar_tensor *big = oar_zeros((int64_t[]){2000}, 1, OAR_I64);
    int n = oar_format(big, buf, sizeof buf);
    CHECK(n < 200 && strstr(buf, "...") != NULL);
    oar_release(x); oar_release(h); oar_release(big);
}

static void test_half(void) {
    /* every finite f16 survives f16 -> f32 -> f16 */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = oar_f16_to_f32((uint16_t)h);
        if (f != f) continue;
        if (oar_f32_to_f16(f) != h) bad++;
    }
    CHECK(bad == 0);
    CHECK(oar_f16_to_f32(oar_f32_to_f16(65504.f)) == 65504.f);
    CHECK(oar_f32_to_f16(65520.f) == 0x7C00);                   /* ties past max round to inf */
    CHECK(oar_f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00);        /* tie: to even (down) */
    CHECK(oar_f32_to_f16(1.0f + 3.0f / 2048) == 0x3C02);        /* tie: to even (up) */
    CHECK(oar_f32_to_f16(5.9604644775390625e-08f) == 0x0001);   /* smallest subnormal */
    CHECK(oar_f32_to_f16(2.98023223876953125e-08f) == 0x0000);  /* half of it: tie to even 0 */
    CHECK(oar_f32_to_bf16(1.0f + 1.0f / 256) == 0x3F80);        /* tie to even */
    CHECK(oar_f32_to_bf16(1.0f + 3.0f / 256) == 0x3F82);
    CHECK(oar_bf16_to_f32(oar_f32_to_bf16(-2.5f)) == -2.5f);
    CHECK(oar_f32_to_bf16(NAN) != 0x7F80 && (oar_f32_to_bf16(NAN) & 0x7F80) == 0x7F80);
    oar_tensor *x = oar_cast(oar_arange(0, 4, 1, OAR_F32), OAR_F16);
    CHECK(oar_dtype_of(x) == OAR_F16 && t_at(x, 3) == 3);
    CHECK(oar_dtype_size(OAR_BF16) == 2 && strcmp(oar_dtype_name(OAR_BF16), "bf16") == 0);
    oar_release(x);
}

static void test_random(void) {
    int64_t s[1] = {100000};
    oar_manual_seed(42);
    oar_set_num_threads(1);
    oar_tensor *a = oar_randn(s, 1, OAR_F32);
    oar_manual_seed(42);
    oar_set_num_threads(2);
    oar_tensor *b = oar_randn(s, 1, OAR_F32);
    CHECK(memcmp(oar_data(a), oar_data(b), sizeof(float) * 100000) == 0); /* thread-count independent */
    oar_tensor *c = oar_randn(s, 1, OAR_F32);
    CHECK(memcmp(oar_data(a), oar_data(c), sizeof(float) * 100000) != 0); /* the stream advances */
    double mean = 0, var = 0;
    float *p = oar_data(a);
    for (int i = 0; i < 100000; i++) mean += p[i];
    mean /= 100000;
    for (int i = 0; i < 100000; i++) var += (p[i] - mean) * (p[i] - mean);
    var /= 100000;
    CHECK(fabs(mean) < 0.02 && fabs(var - 1) < 0.02);
    oar_tensor *u = oar_rand(s, 1, OAR_F64);
    double lo = 1, hi = 0;
    for (int i = 0; i < 100000; i++) {
        double v = ((double *)oar_data(u))[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    CHECK(lo >= 0 && hi < 1 && lo < 0.001 && hi > 0.999);
    oar_tensor *r = oar_randint(-3, 4, s, 1, OAR_I64);
    int64_t *q = oar_data(r), mn = 100, mx = -100;
    for (int i = 0; i < 100000; i++) {
        mn = q[i] < mn ? q[i] : mn;
        mx = q[i] > mx ? q[i] : mx;
    }
    CHECK(mn == -3 && mx == 3);
    oar_rng_state st = oar_rng_get_state();
    oar_tensor *d1 = oar_rand((int64_t[]){5}, 1, OAR_F32);
    oar_rng_set_state(st);
    oar_tensor *d2 = oar_rand((int64_t[]){5}, 1, OAR_F32);
    CHECK(memcmp(oar_data(d1), oar_data(d2), 5 * sizeof(float)) == 0);
    CHECK(oar_set_num_threads(0) == OAR_ERR_INVALID_ARG);
    oar_release(a); oar_release(b); oar_release(c); oar_release(u); oar_release(r);
    oar_release(d1); oar_release(d2);
}

static void test_scopes(void) {
    oar_memory_stats before = oar_memory_stats_get(OAR_CPU);
    oar_tensor *kept;
    oar_scope_begin();
    {
        oar_tensor *a = oar_ones((int64_t[]){1000}, 1, OAR_F32);
        oar_tensor *b = oar_add(a, a);
        oar_release(a); /* releasing a scoped tensor is safe */
        oar_scope_begin();
        oar_tensor *inner = oar_mul(b, b);
        kept = oar_keep(oar_add(inner, b)); /* moves to the outer scope */
        oar_scope_end();
        CHECK(t_at(kept, 0) == 6);
        oar_keep(kept); /* and out of it, to the caller */
    }
    oar_scope_end();
    CHECK(t_at(kept, 999) == 6);
    oar_release(kept);
    oar_memory_stats after = oar_memory_stats_get(OAR_CPU);
    CHECK(after.current_bytes == before.current_bytes);
    CHECK(after.peak_bytes >= before.current_bytes + 4 * 4000);
}

/* set_storage_: a tensor moves onto a view of a flat buffer and keeps its identity (ZeRO's
 * parameters_as_bucket_view relies on every holder of the parameter following it). */
static void test_set_storage(void) {
    oar_tensor *w = oar_arange(0, 6, 1, OAR_F32);
    oar_tensor *p = oar_reshape(w, (int64_t[]){2, 3}, 2);
    oar_tensor *param = oar_clone(p);
    oar_set_requires_grad(param, true);
    oar_tensor *bucket = oar_zeros((int64_t[]){10}, 1, OAR_F32);
    oar_tensor *slot = oar_view(oar_slice(bucket, 0, 4, 10, 1), (int64_t[]){2, 3}, 2);
    CHECK(oar_copy_(slot, param) == OAR_OK);
    CHECK(oar_set_storage_(param, slot) == OAR_OK);
    CHECK(oar_data(param) == (float *)oar_data(bucket) + 4 && oar_requires_grad(param));
    CHECK(oar_fill_(oar_slice(bucket, 0, 5, 6, 1), 42) == OAR_OK); /* a write to the bucket shows in param */
    CHECK(t_at(param, 0) == 0 && t_at(param, 1) == 42 && t_at(param, 5) == 5);
    oar_no_grad_begin();
    CHECK(oar_fill_(param, 7) == OAR_OK); /* and the other way */
    oar_no_grad_end();
    CHECK(t_at(bucket, 3) == 0 && t_at(bucket, 4) == 7 && t_at(bucket, 9) == 7);
    CHECK_ERR(oar_set_storage_(param, bucket), "expected a source of the tensor's shape [2, 3], dtype f32");
    CHECK_ERR(oar_set_storage_(param, oar_zeros((int64_t[]){2, 3}, 2, OAR_F64)), "got [2, 3], f64");
    CHECK_ERR(oar_set_storage_(param, NULL), "expected two tensors");
    oar_release(w); oar_release(p); oar_release(param); oar_release(bucket); oar_release(slot);
}

int main(void) {
    oar_scope_begin(); /* nested calls create temporaries; the scope frees them */
    test_creation();
    test_views();
    test_set_storage();
    test_copy_cast();
    test_strided_copies();
    test_format();
    test_half();
    test_random();
    test_scopes();
    oar_scope_end();
    return test_summary("test_tensor");
}
