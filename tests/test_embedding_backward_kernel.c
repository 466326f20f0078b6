/* The column kernel of embedding_backward (src/kernels/cpu/nn_embedding_backward.c) writes the
 * reference's bits (sums in double, in index order) at 1 and 2 threads, for f32 and f64 and
 * each index dtype, and refuses an out-of-range index with the reference's message. */
#include "ops/op.h"
#include "test_util.h"

static const oar_kernel_entry *kernel_named(oar_op_id op, const char *impl) {
    const oar_kernel_entry *ks;
    int n = oar_op_kernels(op, &ks);
    for (int i = 0; i < n; i++)
        if (!strcmp(ks[i].impl, impl)) return &ks[i];
    return NULL;
}

static oar_tensor *run(const oar_kernel_entry *k, oar_tensor **in, const oar_attr *a) {
    oar_meta m[1];
    int n_out = 0;
    if (oar_op_infer(OAR_OP_embedding_backward, in, 2, a, m, &n_out) != OAR_OK) return NULL;
    oar_tensor *out = oar_empty(m[0].shape, m[0].ndim, m[0].dtype);
    if (!out || (k->supports && !k->supports(in, 2, &out, 1, a))) return NULL;
    if (oar_op_run_kernel(OAR_OP_embedding_backward, k, in, 2, &out, 1, a) != OAR_OK) return NULL;
    return out;
}

/* g [n, dim] of dtype gd; indices drawn from [0, num) (few rows: many repeats). */
static void check(oar_dtype gd, oar_dtype id, int64_t n, int64_t dim, int64_t num) {
    const oar_kernel_entry *fast = kernel_named(OAR_OP_embedding_backward, "columns"),
                           *ref = kernel_named(OAR_OP_embedding_backward, "reference");
    CHECK(fast && ref);
    if (!fast || !ref) return;
    oar_tensor *g = oar_randn((int64_t[]){n, dim}, 2, gd);
    oar_tensor *i64 = oar_randint(0, num, (int64_t[]){n}, 1, OAR_I64);
    oar_tensor *in[2] = {g, oar_cast(i64, id)};
    oar_attr a = oar_attr_int(num);
    oar_tensor *want = run(ref, in, &a);
    CHECK(want != NULL);
    for (int t = 1; t <= 2; t++) {
        oar_set_num_threads(t);
        CHECK(t_same_bits(run(fast, in, &a), want));
    }
    oar_set_num_threads(1);
    CHECK(oar_select_kernel(OAR_OP_embedding_backward, in, 2, &want, 1, &a) == fast);
}

int main(void) {
    oar_init();
    oar_manual_seed(5);
    oar_scope_begin();
    check(OAR_F32, OAR_I64, 1024, 256, 256); /* gpt-mini's token embedding: threaded */
    check(OAR_F32, OAR_I32, 1024, 256, 3);
    check(OAR_F64, OAR_I64, 300, 200, 17);
    check(OAR_F32, OAR_I8, 41, 70, 5);       /* a partial column range */
    check(OAR_F32, OAR_U8, 7, 1, 200);
    check(OAR_F32, OAR_I64, 0, 8, 4);         /* no indices: zeros */
    /* an index past the last row */
    oar_tensor *g = oar_randn((int64_t[]){3, 4}, 2, OAR_F32);
    int64_t bad[3] = {0, 9, 1};
    oar_tensor *in[2] = {g, oar_from_data(bad, (int64_t[]){3}, 1, OAR_I64)};
    oar_attr a = oar_attr_int(5);
    CHECK_ERR(run(kernel_named(OAR_OP_embedding_backward, "columns"), in, &a), "index 9 is out of range");
    oar_scope_end();
    return test_summary("test_embedding_backward_kernel");
}
