/* Sweep cases for the shape and index family. The large integer cases exist to push the
 * memcpy kernels past one block (64 KiB), so their threaded paths meet the reference. */
#include "sweep.h"

const sweep_case sweep_cases_index[] = {
    /* concat: a 1-d empty input is skipped, as in torch */
    {"concat", "n:2x3;n:4x3", "dim=0"},
    {"concat", "n:2x3;n:2x1;n:2x2", "dim=-1"},
    {"concat", "n:2x0x3;n:2x2x3", "dim=1"},
    {"concat", "n:3;n:0;n:2", "dim=0"},
    {"concat", "n:0;n:2x3", "dim=1"},
    {"concat", "n:2x3", "dim=0"},
    {"concat", "i0_9:2x3;i0_9:2x3", "dim=1"},
    {"concat", "b:2x2;b:1x2", "dim=0"},
    {"concat", "nf16:2x3;nf16:2x2", "dim=1"},
    {"concat", "i0_100:3x6000;i0_100:3x5000", "dim=1"},
    {"concat", "i0_100:5000x3;i0_100:3000x3", "dim=0"},
    {"concat", "i0_100:20000x1;i0_100:20000x2", "dim=-1"},
    /* the copy kernel takes strided inputs (the strided pass): odd sizes, each element size,
     * gpt-mini's backward concat of the head gradients (threaded) */
    {"concat", "n:3x5x7;n:3x5x2;n:3x5x1", "dim=-1", SWEEP_NO_GRAD},
    {"concat", "nf64:2x3x5;nf64:2x4x5", "dim=1", SWEEP_NO_GRAD},
    {"concat", "i-100_100i8:5x3;i-100_100i8:5x9", "dim=1"},
    {"concat", "nf16:7x3;nf16:2x3", "dim=0", SWEEP_NO_GRAD},
    {"concat", "n:8x128x256;n:8x128x256;n:8x128x256", "dim=-1", SWEEP_NO_GRAD},
    /* stack */
    {"stack", "n:2x3;n:2x3", "dim=0"},
    {"stack", "n:2x3;n:2x3;n:2x3", "dim=-1"},
    {"stack", "n:2x3;n:2x3", "dim=1"},
    {"stack", "n:;n:", "dim=0"},
    {"stack", "n:0x2;n:0x2", "dim=1"},
    {"stack", "i0_5:4;i0_5:4", "dim=0"},
    {"stack", "b:3;b:3", "dim=-1"},
    {"stack", "i0_100:4000x5;i0_100:4000x5;i0_100:4000x5", "dim=1"},
    {"stack", "i-9_9i32:3x7;i-9_9i32:3x7", "dim=2"},
    {"stack", "n:64x300;n:64x300", "dim=0", SWEEP_NO_GRAD},
    /* split and chunk: views, one output per piece */
    {"split", "n:5x3", "dim=0 split_size=2"},
    {"split", "n:4x6", "dim=-1 split_size=3"},
    {"split", "n:4x6", "dim=1 split_size=10"},
    {"split", "n:0x2", "dim=0 split_size=2"},
    {"split", "n:0x2", "dim=0 split_size=0"},
    {"split", "i0_9:6", "dim=0 split_size=4"},
    {"split", "b:3x2", "dim=0 split_size=1"},
    {"chunk", "n:5x3", "dim=0 chunks=4"},
    {"chunk", "n:6x2", "dim=0 chunks=4"},
    {"chunk", "n:2x7", "dim=-1 chunks=3"},
    {"chunk", "n:0x3", "dim=0 chunks=3"},
    {"chunk", "i0_5:4x2", "dim=1 chunks=2"},
    /* index_select: repeated indices make the gradient accumulate */
    {"index_select", "n:5x3;i0_5:4", "dim=0"},
    {"index_select", "n:3x4x2;i0_4:6", "dim=-2"},
    {"index_select", "n:3x4;i0_4:0", "dim=1"},
    {"index_select", "n:;i0_1:1", "dim=0"},
    {"index_select", "n:4;i0_4:", "dim=0"},
    {"index_select", "n:4x3;i0_4i32:3", "dim=0"},
    {"index_select", "i0_9:4x3;i0_3:5", "dim=1"},
    {"index_select", "b:4x3;i0_4:2", "dim=0"},
    {"index_select", "i0_99:2000x40;i0_2000:300", "dim=0"},
    {"index_select", "i0_99:40x2000;i0_2000:300", "dim=1"},
    {"index_select_backward", "n:4x3;i0_5:4", "shape=5,3 dim=0"},
    {"index_select_backward", "n:2x6;i0_3:6", "shape=2,3 dim=-1"},
    {"index_select_backward", "n:;i0_1:1", "shape= dim=0"},
    {"index_select_backward", "i0_5:3x2;i0_3i32:2", "shape=3,3 dim=1"},
    /* gather and scatter_add: index may be longer than the input along dim, shorter elsewhere */
    {"gather", "n:3x4;i0_3:5x4", "dim=0"},
    {"gather", "n:3x4;i0_4:2x3", "dim=-1"},
    {"gather", "n:2x3x4;i0_3:2x2x4", "dim=1"},
    {"gather", "n:;i0_1:", "dim=0"},
    {"gather", "n:3x4;i0_3:0x4", "dim=0"},
    {"gather", "i0_9:3x4;i0_4i32:3x2", "dim=1"},
    {"gather", "b:3x4;i0_3:2x4", "dim=0"},
    {"scatter_add", "n:3x4;i0_3:2x4;n:2x4", "dim=0"},
    {"scatter_add", "n:3x4;i0_4:3x2;n:3x5", "dim=1"},
    {"scatter_add", "n:2x3;i0_2:4x3;n:4x3", "dim=-2"},
    {"scatter_add", "n:;i0_1:;n:", "dim=0"},
    {"scatter_add", "n:4;i0_4:;n:3", "dim=0"},
    {"scatter_add", "n:3x4;i0_3:0x4;n:2x4", "dim=0"},
    {"scatter_add", "i0_9:3x4;i0_3i32:2x4;i0_9:2x4", "dim=0"},
    {"scatter_add", "b:3x2;i0_3:2x2;b:2x2", "dim=0"},
    /* scatter_reduce: every reduction with and without the input; slots reached 0, 1 or more times.
     * amax/amin take distinct src values ('d') so no ties make kinks for the finite differences */
    {"scatter_reduce", "n:3x4;i0_3:5x4;n:5x4", "dim=0 reduce=sum include_self=1"},
    {"scatter_reduce", "n:3x4;i0_3:5x4;n:5x4", "dim=0 reduce=sum include_self=0"},
    {"scatter_reduce", "n:3x4;i0_4:3x6;n:3x6", "dim=1 reduce=mean include_self=1"},
    {"scatter_reduce", "n:3x4;i0_4:3x6;n:3x6", "dim=-1 reduce=mean include_self=0"},
    {"scatter_reduce", "n:3x4;i0_3:5x4;n:5x4", "dim=0 reduce=prod include_self=1"},
    {"scatter_reduce", "n:2x6;i0_4:2x5;c1.5,0,2,0,-1:2x5", "dim=1 reduce=prod include_self=1"},
    {"scatter_reduce", "c0,1,2,3:2x4;i0_2:2x6;c0,2,0.5,-1,3,1.5:2x6", "dim=1 reduce=prod include_self=0"},
    {"scatter_reduce", "n:3x4;i0_3:5x4;d:5x4", "dim=0 reduce=amax include_self=1"},
    {"scatter_reduce", "n:3x4;i0_3:5x4;d:5x4", "dim=0 reduce=amax include_self=0"},
    {"scatter_reduce", "n:4x3;i0_3:4x5;d:4x5", "dim=1 reduce=amin include_self=1"},
    {"scatter_reduce", "n:4x3;i0_3:4x5;d:4x5", "dim=1 reduce=amin include_self=0"},
    {"scatter_reduce", "i-5_5:3x4;i0_3:4x4;i-5_5:4x4", "dim=0 reduce=mean include_self=1"},
    {"scatter_reduce", "i-5_5i32:6;i0_6:8;i-5_5i32:8", "dim=0 reduce=amin include_self=0"},
    {"scatter_reduce", "n:;i0_1:;n:", "dim=0 reduce=prod include_self=1"},
    {"scatter_reduce", "n:3x4;i0_3:0x4;n:0x4", "dim=0 reduce=amax include_self=1"},
    /* masked_fill: x and mask broadcast together */
    {"masked_fill", "n:3x4;b:3x4", "value=-1.5"},
    {"masked_fill", "n:3x4;b:4", "value=0"},
    {"masked_fill", "n:4;b:3x1", "value=2"},
    {"masked_fill", "n:0x3;b:3", "value=1"},
    /* filling with inf makes the loss inf, so finite differences are undefined */
    {"masked_fill", "n:;b:", "value=inf", SWEEP_NO_GRAD},
    {"masked_fill", "i0_9:3x4;b:3x4", "value=-7"},
    {"masked_fill", "b:5;b:5", "value=1"},
    /* the block kernel: x of the output's shape, mask broadcast along leading dims only */
    {"masked_fill", "n:2x3x5x5;b:5x5", "value=-3"},
    {"masked_fill", "n:2x3x5x5;b:1x5x5", "value=0.5"},
    {"masked_fill", "n:2x4x37x37;b:37x37", "value=-inf", SWEEP_NO_GRAD},  /* tails, threads */
    {"masked_fill", "n:3x70x300;b:300", "value=-inf", SWEEP_NO_GRAD},
    {"masked_fill", "nf64:3x9;b:3x9", "value=2.5"},
    {"masked_fill", "nf16:4x9;b:9", "value=-2"},
    {"masked_fill", "i0_9i32:6x11;b:11", "value=-7"},
    {"masked_fill", "i0_9i8:6x11;b:6x11", "value=3"},
    /* tril, triu */
    {"tril", "n:4x4", "diagonal=0"},
    {"tril", "n:3x5", "diagonal=-1"},
    {"tril", "n:2x3x4", "diagonal=2"},
    {"tril", "n:0x3", "diagonal=0"},
    {"tril", "i0_9:3x3", "diagonal=1"},
    {"triu", "n:4x3", "diagonal=0"},
    {"triu", "n:2x4x3", "diagonal=-1"},
    {"triu", "n:3x4", "diagonal=10"},
    {"triu", "b:3x3", "diagonal=1"},
    /* flip */
    {"flip", "n:3x4", "dims=0"},
    {"flip", "n:2x3x4", "dims=-1,0"},
    {"flip", "n:2x3", "dims="},
    {"flip", "n:", "dims=0"},
    {"flip", "n:0x3", "dims=1"},
    {"flip", "i0_9:5", "dims=0"},
    {"flip", "b:2x3", "dims=1"},
    /* pad: pairs from the last dim; mode 0 constant, 1 reflect, 2 replicate */
    {"pad", "n:2x3", "pads=1,2 mode=0 value=0.5"},
    {"pad", "n:2x3x4", "pads=1,1,2,0 mode=0 value=0"},
    {"pad", "n:2x5", "pads=-1,2 mode=0 value=1"},
    {"pad", "n:2x5", "pads=2,4 mode=1 value=0"},
    {"pad", "n:2x3x4", "pads=1,2,2,1 mode=1 value=0"},
    {"pad", "n:1x5", "pads=-1,2 mode=1 value=0"},
    {"pad", "n:2x3", "pads=2,3 mode=2 value=0"},
    {"pad", "n:2x2x3", "pads=1,1,3,0,1,0 mode=2 value=0"},
    {"pad", "n:0x3", "pads=1,1 mode=0 value=2"},
    {"pad", "n:2x0", "pads=1,1 mode=0 value=2"},
    {"pad", "n:3", "pads= mode=0 value=0"},
    {"pad", "i0_9:3x3", "pads=1,1,1,1 mode=1 value=0"},
    {"pad", "b:2x2", "pads=1,0 mode=0 value=1"},
    {"pad_backward", "n:2x6", "shape=2,3 pads=1,2 mode=0"},
    {"pad_backward", "n:2x9", "shape=2,5 pads=2,2 mode=1"},
    {"pad_backward", "n:4x6", "shape=2,3 pads=2,1,1,1 mode=2"},
    {"pad_backward", "n:2x4", "shape=2,5 pads=-1,0 mode=0"},
    {"pad_backward", "i0_5:2x5", "shape=2,3 pads=1,1 mode=1"},
    {"pad_backward", "n:0x6", "shape=0,3 pads=1,2 mode=0"},
    {"pad_backward", "n:0x9", "shape=0,5 pads=2,2 mode=1"},
    {0},
};

/* ---- bad inputs */
static oar_tensor *zeros2(int64_t a, int64_t b) {
    int64_t s[2] = {a, b};
    return oar_zeros(s, 2, OAR_F32);
}
static oar_tensor *indices(const int64_t *v, int64_t n) { return oar_from_data(v, &n, 1, OAR_I64); }

static bool bad_concat_shape(void) {
    oar_tensor *xs[2] = {zeros2(2, 4), zeros2(2, 5)};
    return oar_concat(xs, 2, 0) != NULL;
}
static bool bad_concat_scalar(void) {
    oar_tensor *xs[2] = {oar_scalar(1, OAR_F32), oar_scalar(2, OAR_F32)};
    return oar_concat(xs, 2, 0) != NULL;
}
static bool bad_stack_shape(void) {
    oar_tensor *xs[2] = {zeros2(2, 3), zeros2(3, 2)};
    return oar_stack(xs, 2, 0) != NULL;
}
static bool bad_split_many(void) {
    oar_tensor *out[64];
    return oar_split(zeros2(100, 1), 1, 0, out, 64) >= 0;
}
static bool bad_split_room(void) {
    oar_tensor *out[2];
    return oar_split(zeros2(5, 1), 2, 0, out, 2) >= 0;
}
static bool bad_chunk_zero(void) {
    oar_tensor *out[4];
    return oar_chunk(zeros2(5, 1), 0, 0, out, 4) >= 0;
}
static bool bad_index_select_range(void) {
    int64_t v[3] = {0, 7, 1};
    return oar_index_select(zeros2(5, 2), 0, indices(v, 3)) != NULL;
}
static bool bad_index_select_range_strided(void) { /* a transposed input takes the reference kernel */
    int64_t v[2] = {1, 3};
    return oar_index_select(oar_transpose(zeros2(2, 3), 0, 1), 0, indices(v, 2)) != NULL;
}
static bool bad_index_dtype(void) {
    int64_t n = 2;
    return oar_index_select(zeros2(5, 2), 0, oar_zeros(&n, 1, OAR_F32)) != NULL;
}
static bool bad_gather_range(void) {
    int64_t v[2] = {1, -1};
    int64_t s[2] = {1, 2};
    return oar_gather(zeros2(2, 3), 1, oar_from_data(v, s, 2, OAR_I64)) != NULL;
}
static bool bad_gather_ndim(void) {
    int64_t v[2] = {0, 1};
    return oar_gather(zeros2(2, 3), 1, indices(v, 2)) != NULL;
}
static bool bad_scatter_range(void) {
    int64_t v[3] = {0, 1, 2};
    int64_t s[2] = {1, 3};
    return oar_scatter_add(zeros2(2, 3), 0, oar_from_data(v, s, 2, OAR_I64), zeros2(1, 3)) != NULL;
}
static bool bad_scatter_dtype(void) {
    int64_t v[3] = {0, 1, 0};
    int64_t s[2] = {1, 3};
    return oar_scatter_add(zeros2(2, 3), 0, oar_from_data(v, s, 2, OAR_I64), oar_zeros(s, 2, OAR_F64)) != NULL;
}
static bool bad_pad_reflect(void) {
    int64_t p[2] = {3, 0};
    return oar_pad(zeros2(2, 3), p, 2, OAR_PAD_REFLECT, 0) != NULL;
}
static bool bad_pad_odd(void) {
    int64_t p[3] = {1, 1, 1};
    return oar_pad(zeros2(2, 3), p, 3, OAR_PAD_CONSTANT, 0) != NULL;
}
static bool bad_mask_dtype(void) { return oar_masked_fill(zeros2(2, 3), zeros2(2, 3), 1) != NULL; }
static bool bad_tril_1d(void) {
    int64_t n = 3;
    return oar_tril(oar_zeros(&n, 1, OAR_F32), 0) != NULL;
}
static bool bad_flip_twice(void) {
    int d[2] = {0, -2};
    return oar_flip(zeros2(2, 3), d, 2) != NULL;
}

static bool bad_scatter_reduce_kind(void) {
    int64_t v[2] = {0, 1};
    return oar_scatter_reduce(zeros2(2, 3), 0, oar_from_data(v, (int64_t[]){2, 1}, 2, OAR_I64), zeros2(2, 1),
                              "max", true) != NULL;
}
static bool bad_scatter_reduce_shape(void) {
    int64_t v[2] = {0, 1};
    return oar_scatter_reduce(zeros2(2, 3), 0, oar_from_data(v, (int64_t[]){2, 1}, 2, OAR_I64), zeros2(2, 3),
                              "sum", true) != NULL;
}
static bool bad_scatter_reduce_range(void) {
    int64_t v[2] = {0, 2};
    return oar_scatter_reduce(zeros2(2, 3), 0, oar_from_data(v, (int64_t[]){2, 1}, 2, OAR_I64), zeros2(2, 1),
                              "amin", false) != NULL;
}

const sweep_bad sweep_bad_index[] = {
    {"scatter_reduce with reduce 'max'", bad_scatter_reduce_kind, "expected reduce to be one of sum, prod, mean, amax, amin, got 'max'"},
    {"scatter_reduce with src wider than index", bad_scatter_reduce_shape, "expected index and src of one shape"},
    {"scatter_reduce with index 2 on a dim of 2", bad_scatter_reduce_range, "scatter_reduce: expected indices in [0, 2) for dim 0"},
    {"concat of mismatched shapes", bad_concat_shape, "concat: expected input 1 to match input 0 in dim 1, got 5 != 4"},
    {"concat of 0-d tensors", bad_concat_scalar, "got a 0-d input 0; use oar_stack"},
    {"stack of different shapes", bad_stack_shape, "expected input 1 to have input 0's shape [2, 3], got [3, 2]"},
    {"split into more than 64 pieces", bad_split_many, "expected at most 64 pieces, got 100"},
    {"split with too little room", bad_split_room, "expected room for 3 pieces in out, got max_out = 2"},
    {"chunk into 0 chunks", bad_chunk_zero, "chunk: expected chunks > 0, got 0"},
    {"index_select out of range", bad_index_select_range,
     "index_select: expected indices in [0, 5) for dim 0 of size 5, got 7"},
    {"index_select out of range, strided input", bad_index_select_range_strided,
     "index_select: expected indices in [0, 3) for dim 0 of size 3, got 3"},
    {"index_select with a float index", bad_index_dtype, "expected index of dtype i64 or i32, got f32"},
    {"gather with a negative index", bad_gather_range, "gather: expected indices in [0, 3) for dim 1 of size 3, got -1"},
    {"gather with a 1-d index for a 2-d input", bad_gather_ndim, "expected index to have as many dims as the input (2), got 1"},
    {"scatter_add out of range", bad_scatter_range, "scatter_add: expected indices in [0, 2) for dim 0 of size 2, got 2"},
    {"scatter_add with an f64 src", bad_scatter_dtype, "expected src to have the input's dtype f32, got f64"},
    {"reflect pad as wide as the dim", bad_pad_reflect, "reflect mode expected pads < 3 (the size of dim 1), got (3, 0)"},
    {"pad with an odd count", bad_pad_odd, "got an odd count 3"},
    {"masked_fill with a float mask", bad_mask_dtype, "expected mask to be bool, got f32"},
    {"tril of a vector", bad_tril_1d, "tril: expected a tensor with at least 2 dims"},
    {"flip of one dim twice", bad_flip_twice, "flip: expected distinct dims, got dim 0 twice"},
    {0},
};
