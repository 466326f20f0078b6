/* Sweep cases for views. */
#include "sweep.h"

const sweep_case sweep_cases_view[] = {
    /* the strided pass spreads every dim apart, which reshape cannot view: contiguous only */
    {"reshape", "n:2x3x4", "shape=6,4", SWEEP_NO_STRIDED},
    {"reshape", "n:2x3x4", "shape=-1", SWEEP_NO_STRIDED},
    {"reshape", "n:2x3x4", "shape=2,-1,2", SWEEP_NO_STRIDED},
    {"reshape", "n:2x3x4", "shape=2,3,2,2"}, /* splits only the last dim: a view of any layout */
    {"reshape", "n:1", "shape="},
    {"reshape", "n:0x3", "shape=3,0"},
    {"permute", "n:2x3x4", "dims=2,0,1"},
    {"permute", "n:2x3", "dims=-1,0"},
    {"slice", "n:6x4", "dim=0 start=1 end=5 step=2"},
    {"slice", "n:6x4", "dim=-1 start=-3 end=100 step=1"},
    {"slice", "n:6x4", "dim=1 start=3 end=1 step=1"},
    {"expand", "n:3x1", "shape=2,3,4"},
    {"expand", "n:1x4", "shape=-1,4"},
    {"squeeze", "n:3x1x4", "dim=1"},
    {"squeeze", "n:3x2", "dim=0"},
    {"unsqueeze", "n:3x4", "dim=1"},
    {"unsqueeze", "n:3x4", "dim=-1"},
    /* as_strided reads storage: the strided pass would view another storage order, so it is skipped.
     * Overlapping windows (the gradient adds up) and a transposed read with an offset. */
    {"as_strided", "n:3x4", "size=3,3 stride=2,1 storage_offset=1", SWEEP_NO_STRIDED | SWEEP_NO_BATCH},
    {"as_strided", "n:12", "size=4,3 stride=1,4 storage_offset=-1", SWEEP_NO_STRIDED | SWEEP_NO_BATCH},
    {"as_strided", "n:2x5", "size=2,2,3 stride=5,1,1 storage_offset=0", SWEEP_NO_STRIDED | SWEEP_NO_BATCH},
    {"as_strided", "n:6", "size= stride= storage_offset=5", SWEEP_NO_STRIDED | SWEEP_NO_BATCH},
    {"slice_backward", "n:2x4", "shape=6,4 dim=0 start=1 end=5 step=2"},
    {"slice_backward", "n:6x2", "shape=6,4 dim=1 start=1 end=4 step=2"},
    {"slice_backward", "n:0x2", "shape=0,4 dim=1 start=1 end=4 step=2"},
    {"slice_backward", "n:0x4", "shape=6,4 dim=0 start=2 end=2 step=1"},
    {0},
};

static bool bad_reshape(void) {
    int64_t s[2] = {2, 3}, t[1] = {7};
    return oar_reshape(oar_zeros(s, 2, OAR_F32), t, 1) != NULL;
}
static bool bad_expand(void) {
    int64_t s[1] = {3}, t[1] = {4};
    return oar_expand(oar_zeros(s, 1, OAR_F32), t, 1) != NULL;
}
static bool bad_view_noncontig(void) {
    int64_t s[2] = {2, 3}, t[1] = {6};
    return oar_view(oar_transpose(oar_zeros(s, 2, OAR_F32), 0, 1), t, 1) != NULL;
}
static bool bad_slice_dim(void) {
    int64_t s[2] = {2, 3};
    return oar_slice(oar_zeros(s, 2, OAR_F32), 5, 0, 1, 1) != NULL;
}

static bool bad_as_strided_outside(void) {
    int64_t shape[1] = {6}, size[2] = {3, 3}, stride[2] = {2, 1};
    return oar_as_strided(oar_zeros(shape, 1, OAR_F32), size, stride, 2, 0) != NULL;
}
static bool bad_as_strided_negative(void) {
    int64_t shape[1] = {6}, size[1] = {2}, stride[1] = {-1};
    return oar_as_strided(oar_zeros(shape, 1, OAR_F32), size, stride, 1, 3) != NULL;
}

const sweep_bad sweep_bad_view[] = {
    {"as_strided past the storage", bad_as_strided_outside, "as_strided: expected the view inside the storage of 6 elements, but it reaches element 6"},
    {"as_strided with a negative stride", bad_as_strided_negative, "as_strided: expected nonnegative sizes and strides"},
    {"reshape to a different element count", bad_reshape, "expected the new shape to hold 6 elements"},
    {"expand a dim of size 3 to 4", bad_expand, "expected each input dim to be 1 or equal"},
    {"view of a transposed tensor", bad_view_noncontig, "without a copy"},
    {"slice of a dim that does not exist", bad_slice_dim, "expected dim in [-2, 1], got 5"},
    {0},
};
