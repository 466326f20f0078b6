/* The layout copy kernels (src/kernels/cpu/cpu_copy.c): on views the op sweep cannot spell
 * (permutes, chunk views, transposes, stride 0 broadcasts), for every element size, at 1 and
 * 2 threads, `contiguous`, `concat` and `stack` write the same bytes as the reference kernels,
 * and dispatch picks the copy kernel for strided inputs. Inputs hold random bytes (floats
 * include NaN payloads), so any reordering or conversion would show. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/op.h"
#include "test_util.h"

static const oar_dtype DTYPES[] = {OAR_F32, OAR_F64, OAR_F16, OAR_BF16, OAR_I8, OAR_U8, OAR_I32, OAR_I64, OAR_BOOL};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

static const oar_kernel_entry *kernel_named(oar_op_id op, const char *impl) {
    const oar_kernel_entry *ks;
    int n = oar_op_kernels(op, &ks);
    for (int i = 0; i < n; i++)
        if (!strcmp(ks[i].impl, impl)) return &ks[i];
    return NULL;
}

/* A dense tensor of random bytes (bools keep 0 / 1). */
static oar_tensor *random_bytes(const int64_t *shape, int nd, oar_dtype dt) {
    oar_tensor *t = oar_empty(shape, nd, dt);
    unsigned char *p = (unsigned char *)oar_tensor_ptr(t);
    size_t n = (size_t)t->numel * oar_dtype_size(dt);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(dt == OAR_BOOL ? rand() & 1 : rand() & 0xFF);
    return t;
}

/* Kernel k of op into a fresh output; NULL where it declines or fails. */
static oar_tensor *run(oar_op_id op, const oar_kernel_entry *k, oar_tensor **in, int n_in, const oar_attr *a) {
    oar_meta m[1];
    int n_out = 0;
    if (oar_op_infer(op, in, n_in, a, m, &n_out) != OAR_OK) return NULL;
    oar_tensor *out = oar_empty(m[0].shape, m[0].ndim, m[0].dtype);
    if (!out || (k->supports && !k->supports(in, n_in, &out, 1, a))) return NULL;
    size_t nb = (size_t)out->numel * oar_dtype_size(m[0].dtype);
    if (nb) memset(oar_tensor_ptr(out), 0xA5, nb); /* every byte must be written */
    if (oar_op_run_kernel(op, k, in, n_in, &out, 1, a) != OAR_OK) return NULL;
    return out;
}

static bool same_bytes(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || a->numel != b->numel || a->dtype != b->dtype || a->ndim != b->ndim) return false;
    return !memcmp(oar_tensor_ptr(a), oar_tensor_ptr(b), (size_t)a->numel * oar_dtype_size(a->dtype));
}

/* The copy kernel equals the reference at 1 and 2 threads; dispatch takes it unless every
 * input of a join is dense (the memcpy join's case). */
static void check(const char *what, oar_op_id op, oar_tensor **in, int n_in, const oar_attr *a) {
    const oar_kernel_entry *copy = kernel_named(op, "copy"), *ref = kernel_named(op, "reference");
    CHECK(copy && ref);
    if (!copy || !ref) return;
    oar_tensor *want = run(op, ref, in, n_in, a);
    CHECK(want != NULL);
    for (int threads = 1; threads <= 2; threads++) {
        oar_set_num_threads(threads);
        oar_tensor *got = run(op, copy, in, n_in, a);
        bool ok = same_bytes(got, want);
        if (!ok) fprintf(stderr, "%s (%d threads): the copy kernel differs from the reference\n", what, threads);
        CHECK(ok);
    }
    bool dense = true;
    for (int i = 0; i < n_in; i++) dense = dense && in[i]->contiguous;
    const oar_kernel_entry *picked = oar_select_kernel(op, in, n_in, &want, 1, a);
    if (!dense || op == OAR_OP_contiguous) CHECK(picked == copy);
    oar_set_num_threads(1);
}

static void check_contiguous(const char *what, oar_tensor *view) {
    check(what, OAR_OP_contiguous, &view, 1, NULL);
}

/* [B, T, h, hd] <-> [B, h, T, hd]: the attention block's transposes. */
static void permutes(oar_dtype dt, int64_t b, int64_t t, int64_t h, int64_t hd) {
    int64_t s[4] = {b, t, h, hd};
    oar_tensor *x = random_bytes(s, 4, dt);
    check_contiguous("transpose(1, 2) of [B, T, h, hd]", oar_transpose(x, 1, 2));
    int p[4] = {0, 2, 3, 1};
    check_contiguous("permute(0, 2, 3, 1)", oar_permute(x, p, 4));
    int q[4] = {3, 1, 0, 2};
    check_contiguous("permute(3, 1, 0, 2)", oar_permute(x, q, 4));
}

/* qkv [B, T, 3 * d] cut into chunks along the last dim, then the heads transposed. */
static void chunks(oar_dtype dt, int64_t b, int64_t t, int64_t h, int64_t hd) {
    int64_t s[3] = {b, t, 3 * h * hd};
    oar_tensor *qkv = random_bytes(s, 3, dt), *c[3];
    CHECK(oar_chunk(qkv, 3, 2, c, 3) == 3);
    check_contiguous("a chunk of the last dim", c[1]);
    int64_t hs[4] = {b, t, h, hd};
    oar_tensor *heads = oar_transpose(oar_reshape(c[2], hs, 4), 1, 2);
    check_contiguous("a chunk, split into heads, transposed", heads);
    /* the backward's concat of the three head gradients, as strided views */
    oar_tensor *g[3];
    for (int i = 0; i < 3; i++) {
        int64_t gs[4] = {b, h, t, hd};
        g[i] = oar_transpose(random_bytes(gs, 4, dt), 1, 2);
    }
    oar_attr last = oar_attr_int(-1), one = oar_attr_int(1), zero = oar_attr_int(0);
    check("concat of transposed views along the last dim", OAR_OP_concat, g, 3, &last);
    check("concat of transposed views along dim 1", OAR_OP_concat, g, 3, &one);
    check("stack of transposed views at dim 0", OAR_OP_stack, g, 3, &zero);
    check("stack of transposed views at the last dim", OAR_OP_stack, g, 3, &last);
    oar_tensor *mixed[3] = {g[0], oar_contiguous(g[1]), oar_reshape(oar_contiguous(c[0]), hs, 4)};
    check("concat of strided and dense inputs", OAR_OP_concat, mixed, 3, &last);
}

static void transposes(oar_dtype dt, int64_t r, int64_t c) {
    int64_t s[2] = {r, c};
    oar_tensor *x = random_bytes(s, 2, dt);
    check_contiguous("a 2-d transpose", oar_transpose(x, 0, 1));
    check_contiguous("a 2-d transpose of a column slice",
                     oar_transpose(oar_slice(x, 1, 1, c, 1), 0, 1));
    int64_t s3[3] = {3, r, c};
    oar_tensor *y = random_bytes(s3, 3, dt);
    int p[3] = {2, 0, 1};
    check_contiguous("a 3-d permute(2, 0, 1)", oar_permute(y, p, 3));
    check_contiguous("every second row and column", oar_slice(oar_slice(y, 1, 0, r, 2), 2, 0, c, 2));
}

/* An NCHW batch to NHWC (a model's input before its first conv) with few channels: tiles of
 * 8 pixels by 3, 1 or 7 channels, dense or (19 channels: 8 + 8 + 3) the last of a row. */
static void images(oar_dtype dt) {
    const int64_t shapes[][4] = {{2, 3, 13, 11}, {1, 1, 8, 5}, {1, 7, 4, 6}, {1, 19, 9, 9}};
    for (int i = 0; i < 4; i++) {
        oar_tensor *x = random_bytes(shapes[i], 4, dt);
        check_contiguous("NCHW to NHWC", oar_permute(x, (int[]){0, 2, 3, 1}, 4));
    }
}

static void broadcasts(oar_dtype dt) {
    oar_tensor *row = random_bytes((int64_t[]){1, 50}, 2, dt), *col = random_bytes((int64_t[]){300, 1}, 2, dt);
    oar_tensor *one = random_bytes(NULL, 0, dt);
    check_contiguous("a row broadcast down", oar_expand(row, (int64_t[]){300, 50}, 2));
    check_contiguous("a column broadcast across", oar_expand(col, (int64_t[]){300, 50}, 2));
    check_contiguous("a scalar broadcast", oar_expand(one, (int64_t[]){7, 9}, 2));
    oar_tensor *parts[2] = {oar_expand(row, (int64_t[]){300, 50}, 2), oar_expand(col, (int64_t[]){300, 7}, 2)};
    oar_attr last = oar_attr_int(1);
    check("concat of broadcasts", OAR_OP_concat, parts, 2, &last);
}

static void edges(oar_dtype dt) {
    oar_tensor *e = random_bytes((int64_t[]){0, 5}, 2, dt);
    check_contiguous("an empty transpose", oar_transpose(e, 0, 1));
    oar_tensor *u = random_bytes((int64_t[]){1, 1}, 2, dt);
    check_contiguous("one element", oar_transpose(u, 0, 1));
    oar_tensor *v = random_bytes((int64_t[]){7}, 1, dt);
    check_contiguous("a 1-d step-3 slice", oar_slice(v, 0, 0, 7, 3));
    oar_tensor *s[2] = {random_bytes(NULL, 0, dt), random_bytes(NULL, 0, dt)};
    oar_attr zero = oar_attr_int(0);
    check("stack of 0-d tensors", OAR_OP_stack, s, 2, &zero);
    oar_tensor *skip[3] = {oar_transpose(random_bytes((int64_t[]){3, 2}, 2, dt), 0, 1),
                           random_bytes((int64_t[]){0}, 1, dt), random_bytes((int64_t[]){2, 4}, 2, dt)};
    oar_attr one = oar_attr_int(1);
    check("concat with a skipped empty input", OAR_OP_concat, skip, 3, &one);
}

int main(void) {
    oar_init();
    srand(11);
    for (int i = 0; i < N_DTYPES; i++) {
        oar_scope_begin();
        oar_dtype dt = DTYPES[i];
        permutes(dt, 3, 7, 5, 9);    /* odd sizes, no whole tiles or vectors */
        chunks(dt, 2, 5, 3, 7);
        transposes(dt, 37, 29);
        transposes(dt, 8, 16);       /* whole 8 x 8 tiles only */
        transposes(dt, 3, 29);       /* 8 x 3 tiles, destination rows with no gap between them */
        transposes(dt, 7, 16);
        images(dt);
        broadcasts(dt);
        edges(dt);
        oar_scope_end();
    }
    /* large enough to be cut into units and threaded */
    oar_scope_begin();
    permutes(OAR_F32, 8, 128, 4, 64); /* gpt-mini's shapes */
    chunks(OAR_F32, 8, 128, 4, 64);
    chunks(OAR_F16, 4, 100, 4, 33);
    transposes(OAR_F32, 300, 257);
    transposes(OAR_F32, 3, 50000); /* an image's channels: threaded */
    transposes(OAR_F64, 129, 300);
    transposes(OAR_U8, 700, 333);
    oar_tensor *big = random_bytes((int64_t[]){300000}, 1, OAR_F32);
    check_contiguous("a long 1-d step-2 slice", oar_slice(big, 0, 1, 300000, 2));
    oar_scope_end();
    return test_summary("test_copy_kernels");
}
