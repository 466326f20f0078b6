/* Sweep cases for reductions (reduce.c) and the ops along one dim (reduce_dim.c). The large
 * f32 cases reach the AVX2 kernels' vector paths (rows, columns, a middle run, reduced dims in
 * several runs, segments split across threads); they skip the gradient check only to keep it cheap (the rule is checked on
 * the small cases). Max-like ops use distinct values: ties are kinks. */
#include "sweep.h"

#define BIG SWEEP_NO_GRAD /* large input: gradient checked on the small cases */

const sweep_case sweep_cases_reduce[] = {
    {"sum", "n:3x4", "dims= keepdim=0"},
    {"sum", "n:2x3x4", "dims=0,2 keepdim=1"},
    {"sum", "n:2x3x4", "dims=-1 keepdim=0"},
    /* leading dims summed over many rows, as a bias gradient: the GPU's tiled column kernel
     * (several row chunks, a partial last chunk, outputs not a multiple of 32) */
    {"sum", "n:1100x70", "dims=0 keepdim=0", SWEEP_NO_GRAD},
    {"mean", "n:4x300x45", "dims=0,1 keepdim=1", SWEEP_NO_GRAD},
    {"sum", "n:2x0x3", "dims=1 keepdim=0"},
    {"sum", "n:2x0x3", "dims=0 keepdim=1"},
    {"sum", "n:", "dims= keepdim=0"},
    {"sum", "n:3x1x4", "dims=1 keepdim=0"},
    {"sum", "i0_5:4x5", "dims=1 keepdim=0"},
    {"sum", "i-9_9i32:3x4", "dims=0 keepdim=0"},
    {"sum", "b:3x4", "dims=1 keepdim=1"},
    {"sum", "n:7x300", "dims=1 keepdim=0", BIG},
    {"sum", "n:300x7", "dims=0 keepdim=0", BIG},
    {"sum", "n:4x50x40", "dims=1 keepdim=1", BIG},
    {"sum", "n:3x2x40x1", "dims=0,1 keepdim=0", BIG},
    {"sum", "n:5000", "dims=0 keepdim=0", BIG},
    {"sum", "n:2x20000", "dims=1 keepdim=0", BIG},
    {"sum", "n:9000x3", "dims=0 keepdim=0", BIG},
    /* reduced dims split into several runs: per-channel sums, column blocks, rows split into
     * segments that cross block boundaries, size-1 dims in between */
    {"sum", "n:4x5x300", "dims=0,2 keepdim=0", BIG},
    {"sum", "n:8x16x10x10", "dims=0,2,3 keepdim=0", BIG},
    {"sum", "n:8x16x10x10", "dims=0,2,3 keepdim=1", BIG},
    {"sum", "n:5x7x3x9", "dims=0,2,3 keepdim=1", BIG},
    {"sum", "n:3x40x5x36", "dims=0,2 keepdim=0", BIG},
    {"sum", "n:6x3x7x5x40", "dims=1,3 keepdim=1", BIG},
    {"sum", "n:2x3x4x5x6", "dims=0,2,4 keepdim=0", BIG},
    {"sum", "n:40x3x500", "dims=0,2 keepdim=0", BIG},
    {"sum", "n:31x2x300x5", "dims=0,2 keepdim=1", BIG},
    {"sum", "n:3x1x4x1x50", "dims=0,3,4 keepdim=0", BIG},

    {"mean", "n:3x4", "dims=1 keepdim=0"},
    {"mean", "n:2x3x4", "dims=0,2 keepdim=1"},
    {"mean", "n:2x3x4", "dims= keepdim=0"},
    {"mean", "n:", "dims= keepdim=0"},
    {"mean", "n:2x0x3", "dims=1 keepdim=0"}, /* nan, like torch */
    {"mean", "n:7x300", "dims=-1 keepdim=0", BIG},
    {"mean", "n:300x7", "dims=0 keepdim=1", BIG},
    {"mean", "n:3x40x64", "dims=1 keepdim=0", BIG},
    {"mean", "n:30000", "dims= keepdim=0", BIG},
    {"mean", "n:8x16x10x10", "dims=0,2,3 keepdim=1", BIG},
    {"mean", "n:8x16x10x10", "dims=0,2,3 keepdim=0", BIG},
    {"mean", "n:7x5x3x11", "dims=0,2 keepdim=0", BIG},
    {"mean", "n:31x2x300x5", "dims=2,0 keepdim=0", BIG},

    {"amax", "d:3x4", "dims=1 keepdim=0"},
    {"amax", "d:2x3x4", "dims=0,2 keepdim=1"},
    {"amax", "d:2x3x4", "dims=-1 keepdim=0"},
    {"amax", "d:5", "dims= keepdim=0"},
    {"amax", "d:", "dims= keepdim=0"},
    {"amax", "n:0x3", "dims=1 keepdim=0"},
    {"amax", "i-5_5:4x5", "dims=0 keepdim=0"},
    {"amax", "b:3x4", "dims=1 keepdim=0"},
    {"amax", "n:7x300", "dims=1 keepdim=0", BIG},
    {"amax", "n:300x7", "dims=0 keepdim=0", BIG},
    {"amax", "n:3x40x50", "dims=1 keepdim=1", BIG},
    {"amax", "n:20000x2", "dims=0 keepdim=0", BIG},
    {"amax", "n:8x16x10x10", "dims=0,2,3 keepdim=1", BIG},
    {"amax", "n:9x3x40x7", "dims=0,2 keepdim=0", BIG},
    {"amin", "d:3x4", "dims=1 keepdim=0"},
    {"amin", "d:2x3x4", "dims=0,1 keepdim=1"},
    {"amin", "d:4", "dims=-1 keepdim=0"},
    {"amin", "i-5_5:4x5", "dims=1 keepdim=1"},
    {"amin", "n:7x300", "dims=1 keepdim=0", BIG},
    {"amin", "n:300x40", "dims=0 keepdim=0", BIG},
    {"amin", "n:40000", "dims=0 keepdim=0", BIG},
    {"amin", "n:5x7x3x9", "dims=0,2,3 keepdim=0", BIG},
    {"amin", "n:40x3x500", "dims=0,2 keepdim=1", BIG},

    {"prod", "p:3x4", "dims=1 keepdim=0"},
    {"prod", "n:2x3x4", "dims=0,2 keepdim=1"},
    {"prod", "n:5", "dims= keepdim=0"},
    {"prod", "n:", "dims= keepdim=0"},
    {"prod", "n:2x0x3", "dims=1 keepdim=0"}, /* ones */
    {"prod", "i-3_4:3x4", "dims=1 keepdim=0"},
    {"prod", "b:3x4", "dims=0 keepdim=0"},

    {"var", "n:3x4", "dims=1 correction=1 keepdim=0"},
    {"var", "n:2x3x4", "dims=0,2 correction=0 keepdim=1"},
    {"var", "n:5", "dims= correction=1 keepdim=0"},
    {"var", "n:3x4", "dims=0 correction=-1 keepdim=0"},
    {"var", "n:2x0x3", "dims=1 correction=1 keepdim=0"},
    {"var", "n:4x1", "dims=1 correction=1 keepdim=0", SWEEP_NO_GRAD}, /* N <= correction: nan */
    {"var", "n:3x2", "dims=1 correction=2 keepdim=0", SWEEP_NO_GRAD}, /* divisor 0: inf */
    {"std", "n:3x4", "dims=1 correction=1 keepdim=0"},
    {"std", "n:2x3x4", "dims=-1,0 correction=0 keepdim=1"},
    {"std", "n:6", "dims= correction=1 keepdim=0"},
    {"std", "n:3x2", "dims=1 correction=2 keepdim=0", SWEEP_NO_GRAD}, /* divisor 0: inf */

    {"logsumexp", "n:3x4", "dims=1 keepdim=0"},
    {"logsumexp", "n:2x3x4", "dims=0,2 keepdim=1"},
    {"logsumexp", "n:5", "dims= keepdim=0"},
    {"logsumexp", "n:", "dims= keepdim=0"},
    {"logsumexp", "n:2x0x3", "dims=1 keepdim=0"}, /* -inf */
    {"logsumexp", "i0_5:3x4", "dims=1 keepdim=0"},

    {"norm", "n:3x4", "p=2 dims=1 keepdim=0"},
    {"norm", "n:2x3x4", "p=2 dims= keepdim=0"},
    {"norm", "d:3x4", "p=1 dims=1 keepdim=1"},
    {"norm", "d:2x3x4", "p=inf dims=-1 keepdim=0"},
    {"norm", "n:2x3x4", "p=3 dims=0,2 keepdim=0"},
    {"norm", "d:3x4", "p=0.5 dims=0 keepdim=0"},
    {"norm", "d:3x4", "p=1.5 dims=1 keepdim=0"},
    {"norm", "n:", "p=2 dims= keepdim=0"},
    {"norm", "n:2x0x3", "p=2 dims=1 keepdim=0"},
    {"norm", "n:2x0x3", "p=inf dims=1 keepdim=0"},

    /* the GPU kernels' strategies for every reduction: one thread per output (outputs adjacent
     * in memory, groups strided or short) and groups split over several blocks (few outputs,
     * 16384 elements or more; var, std and logsumexp in two passes) */
    {"prod", "p:50x70", "dims=0 keepdim=0", BIG},
    {"var", "n:50x70", "dims=0 correction=1 keepdim=0", BIG},
    {"std", "n:3x40x70", "dims=0,1 correction=0 keepdim=1", BIG},
    {"logsumexp", "n:50x70", "dims=0 keepdim=0", BIG},
    {"norm", "n:50x70", "p=3 dims=0 keepdim=0", BIG},
    {"norm", "n:50x70", "p=inf dims=0 keepdim=0", BIG},
    {"amax", "n:100x4", "dims=1 keepdim=0", BIG},
    {"mean", "n:2x20000", "dims=1 keepdim=0", BIG},
    {"var", "n:40000", "dims= correction=1 keepdim=0", BIG},
    {"std", "n:2x20000", "dims=1 correction=1 keepdim=1", BIG},
    {"logsumexp", "n:40000", "dims= keepdim=0", BIG},
    {"norm", "n:40000", "p=3 dims= keepdim=0", BIG},
    {"norm", "n:20000x2", "p=inf dims=0 keepdim=0", BIG},
    {"norm", "n:40000", "p=1 dims= keepdim=0", BIG},
    {"prod", "c1,1.0001,0.9999,1.0002:40000", "dims= keepdim=0", BIG},
    {"sum", "n:20000x3", "dims=0 keepdim=0", BIG},

    {"argmax", "d:3x4", "dim=1 keepdim=0"},
    {"argmax", "n:2x3x4", "dim=-1 keepdim=1"},
    {"argmax", "i0_3:4x5", "dim=0 keepdim=0"}, /* ties: first index */
    {"argmax", "n:", "dim=0 keepdim=0"},
    {"argmax", "n:0x3", "dim=1 keepdim=0"},
    {"argmin", "d:3x4", "dim=0 keepdim=0"},
    {"argmin", "n:2x3x4", "dim=1 keepdim=1"},
    {"argmin", "i0_3:4x5", "dim=-1 keepdim=0"},

    {"cumsum", "n:3x4", "dim=1 reverse=0"},
    {"cumsum", "n:2x3x4", "dim=0 reverse=0"},
    {"cumsum", "n:2x3x4", "dim=-1 reverse=1"},
    {"cumsum", "n:6", "dim=0 reverse=0"},
    {"cumsum", "n:", "dim=0 reverse=0"},
    {"cumsum", "n:2x0x3", "dim=1 reverse=0"},
    {"cumsum", "i0_5:3x4", "dim=1 reverse=0"},
    {"cumsum", "b:5", "dim=0 reverse=0"},
    /* long lines: the GPU scans them a block at a time */
    {"cumsum", "n:5000", "dim=0 reverse=0", BIG},
    {"cumsum", "n:3x3000", "dim=1 reverse=1", BIG},
    {"cumsum", "n:3000x2", "dim=0 reverse=0", BIG},

    {"topk", "d:3x5", "k=2 dim=1 largest=1 sorted=1"},
    {"topk", "d:2x3x4", "k=3 dim=-1 largest=0 sorted=1"},
    {"topk", "d:4x3", "k=2 dim=0 largest=1 sorted=0"},
    {"topk", "d:3x5", "k=5 dim=1 largest=0 sorted=0"},
    {"topk", "d:3x4", "k=0 dim=1 largest=1 sorted=1"},
    {"topk", "d:", "k=1 dim=0 largest=1 sorted=1"},
    {"topk", "n:2x0", "k=0 dim=1 largest=1 sorted=1"},
    {"topk", "n:0x3", "k=2 dim=1 largest=1 sorted=1"},
    {"topk", "i0_4:3x6", "k=3 dim=1 largest=1 sorted=1"}, /* ties: lowest index first */
    {"topk_backward", "n:2x3;i0_5:2x3", "shape=2,5 dim=1"},
    {"topk_backward", "n:2x4;i0_3:2x4", "shape=3,4 dim=0"},
    {"topk_backward", "n:;i0_1:", "shape= dim=0"},
    {"topk_gather", "n:3x5;i0_5:3x2", "dim=1"},
    {"topk_gather", "n:4x3;i0_4:2x3", "dim=-2"},
    {"topk_gather", "n:;i0_1:", "dim=0"},
    {0},
};

/* ---- bad inputs */
static oar_tensor *zeros2(int64_t a, int64_t b, oar_dtype dt) {
    int64_t s[2] = {a, b};
    return oar_zeros(s, 2, dt);
}

static bool bad_sum_dim(void) {
    int d[1] = {2};
    return oar_sum(zeros2(2, 3, OAR_F32), d, 1, false) != NULL;
}
static bool bad_mean_int(void) { return oar_mean(zeros2(2, 3, OAR_I64), NULL, 0, false) != NULL; }
static bool bad_amax_empty(void) {
    int d[1] = {1};
    return oar_amax(zeros2(2, 0, OAR_F32), d, 1, false) != NULL;
}
static bool bad_amin_twice(void) {
    int d[2] = {0, -2};
    return oar_amin(zeros2(2, 3, OAR_F32), d, 2, false) != NULL;
}
static bool bad_prod_many_dims(void) {
    int d[9] = {0};
    return oar_prod(zeros2(2, 3, OAR_F32), d, 9, false) != NULL;
}
static bool bad_var_int(void) { return oar_var(zeros2(2, 3, OAR_I32), NULL, 0, 1, false) != NULL; }
static bool bad_std_dim(void) {
    int d[1] = {-3};
    return oar_std(zeros2(2, 3, OAR_F32), d, 1, 1, false) != NULL;
}
static bool bad_logsumexp_dim(void) {
    int d[1] = {5};
    return oar_logsumexp(zeros2(2, 3, OAR_F32), d, 1, false) != NULL;
}
static bool bad_norm_p(void) { return oar_norm(zeros2(2, 3, OAR_F32), 0.0, NULL, 0, false) != NULL; }
static bool bad_norm_int(void) { return oar_norm(zeros2(2, 3, OAR_I64), 2.0, NULL, 0, false) != NULL; }
static bool bad_argmax_bool(void) { return oar_argmax(zeros2(2, 3, OAR_BOOL), 1, false) != NULL; }
static bool bad_argmin_empty(void) { return oar_argmin(zeros2(2, 0, OAR_F32), 1, false) != NULL; }
static bool bad_argmax_dim(void) { return oar_argmax(zeros2(2, 3, OAR_F32), 2, false) != NULL; }
static bool bad_cumsum_dim(void) { return oar_cumsum(zeros2(2, 3, OAR_F32), -3) != NULL; }
static bool bad_topk_k(void) {
    oar_tensor *v, *i;
    return oar_topk(zeros2(2, 3, OAR_F32), 4, 1, true, true, &v, &i) == OAR_OK;
}
static bool bad_topk_bool(void) {
    oar_tensor *v, *i;
    return oar_topk(zeros2(2, 3, OAR_BOOL), 1, 1, true, true, &v, &i) == OAR_OK;
}
static bool bad_topk_out(void) {
    oar_tensor *v;
    return oar_topk(zeros2(2, 3, OAR_F32), 1, 1, true, true, &v, NULL) == OAR_OK;
}
static oar_tensor *index_tensor(int64_t v) {
    int64_t s[2] = {2, 1};
    return oar_full(s, 2, (double)v, OAR_I64);
}
static bool bad_topk_backward_range(void) {
    oar_attr a[2] = {oar_attr_ints((int64_t[]){2, 3}, 2), oar_attr_int(1)};
    oar_tensor *in[2] = {zeros2(2, 1, OAR_F32), index_tensor(5)};
    return oar_op_call1(OAR_OP_topk_backward, in, 2, a) != NULL;
}
static bool bad_topk_backward_dtype(void) {
    oar_attr a[2] = {oar_attr_ints((int64_t[]){2, 3}, 2), oar_attr_int(1)};
    oar_tensor *in[2] = {zeros2(2, 1, OAR_F32), zeros2(2, 1, OAR_F32)};
    return oar_op_call1(OAR_OP_topk_backward, in, 2, a) != NULL;
}
static bool bad_topk_gather_shape(void) {
    oar_attr a[1] = {oar_attr_int(1)};
    oar_tensor *in[2] = {zeros2(2, 3, OAR_F32), zeros2(3, 1, OAR_I64)};
    return oar_op_call1(OAR_OP_topk_gather, in, 2, a) != NULL;
}
static bool bad_topk_gather_range(void) {
    oar_attr a[1] = {oar_attr_int(1)};
    oar_tensor *in[2] = {zeros2(2, 3, OAR_F32), index_tensor(-1)};
    return oar_op_call1(OAR_OP_topk_gather, in, 2, a) != NULL;
}

const sweep_bad sweep_bad_reduce[] = {
    {"sum over a dim that does not exist", bad_sum_dim, "expected dims in [-2, 1], got 2"},
    {"mean of integers", bad_mean_int, "mean: expected the input to have a floating dtype"},
    {"amax over an empty dim", bad_amax_empty, "amax: expected reduced dims of non-zero size, got dim 1"},
    {"amin with a dim named twice", bad_amin_twice, "amin: dim 0 appears twice"},
    {"prod over 9 dims", bad_prod_many_dims, "prod: expected 0..8 dims, got 9"},
    {"var of integers", bad_var_int, "var: expected the input to have a floating dtype"},
    {"std over a dim that does not exist", bad_std_dim, "std: expected dims in [-2, 1], got -3"},
    {"logsumexp over a dim that does not exist", bad_logsumexp_dim, "logsumexp: expected dims in [-2, 1]"},
    {"norm with p = 0", bad_norm_p, "norm: expected p > 0"},
    {"norm of integers", bad_norm_int, "norm: expected the input to have a floating dtype"},
    {"argmax of bools", bad_argmax_bool, "argmax: expected a numeric tensor, got bool"},
    {"argmin over an empty dim", bad_argmin_empty, "argmin: expected dim 1 to have non-zero size"},
    {"argmax over a dim that does not exist", bad_argmax_dim, "argmax: expected dim in [-2, 1], got 2"},
    {"cumsum over a dim that does not exist", bad_cumsum_dim, "cumsum: expected dim in [-2, 1], got -3"},
    {"topk with k larger than the dim", bad_topk_k, "topk: expected k in [0, 3] (the size of dim 1), got 4"},
    {"topk of bools", bad_topk_bool, "topk: expected a numeric tensor, got bool"},
    {"topk without a place for the indices", bad_topk_out, "topk: expected non-NULL values and indices"},
    {"topk_backward with an index out of range", bad_topk_backward_range, "expected indices in [0, 3), got 5"},
    {"topk_backward with float indices", bad_topk_backward_dtype, "topk_backward: expected i64 indices, got f32"},
    {"topk_gather with indices of the wrong shape", bad_topk_gather_shape,
     "topk_gather: expected indices of shape [2, 3] except along dim 1, got [3, 1]"},
    {"topk_gather with a negative index", bad_topk_gather_range, "topk_gather: expected indices in [0, 3), got -1"},
    {0},
};
