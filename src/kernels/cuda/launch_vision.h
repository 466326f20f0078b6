/* Launchers of vision.cu: grid_sample and its backward, roi_align and its backward, nms. Plain C;
 * dtype is an oar_dtype (f32, f64, f16, bf16); each returns a cudaError_t as int. Tensors are
 * contiguous. The geometry is the host's own (ops/grid_sample_geom.h, roi_align_sample.h,
 * nms_iou.h, compiled for the device as well), vision.cu is built without FMA contraction, and
 * every sum runs in double in the reference's order: the results are the reference's bit for bit.
 *
 * The input gradients are scatters (each output point adds into the taps it read); they run
 * without float atomics. Every (output point, tap) is one entry keyed by the input element it
 * feeds; a stable radix sort of the keys keeps, within an input element, the reference's order;
 * then one thread per input-gradient element finds its run of entries by binary search and adds
 * them in order, in double. */
#ifndef OAR_CUDA_LAUNCH_VISION_H
#define OAR_CUDA_LAUNCH_VISION_H

#include <stddef.h>
#include <stdint.h>

#include "ops/grid_sample_geom.h"
#include "ops/roi_align_sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The scatters' entry count is a CUB item count (int). */
#define OAR_CU_VISION_MAX_ENTRIES 0x7ffffff0LL

/* grid_sample: x [n, c, (d,) h, w], grid [n, (do,) ho, wo, dims], y [n, c, (do,) ho, wo]. */
typedef struct oar_cu_grid {
    gs_opts opts;
    gs_geom geom;
    int64_t n, c;
    int64_t np;  /* grid points per batch element */
    int64_t vol; /* input elements per channel */
} oar_cu_grid;

/* Taps per grid point: 1 (nearest), 4 or 8 (bilinear, trilinear), 16 (bicubic). */
int oar_cu_grid_taps(const oar_cu_grid *g);
int oar_cu_grid_sample(void *y, const void *x, const void *grid, int dtype, const oar_cu_grid *g, void *stream);
/* Scratch bytes of the backward (n * np * taps entries, at most OAR_CU_VISION_MAX_ENTRIES). */
size_t oar_cu_grid_sample_backward_scratch(const oar_cu_grid *g);
/* dx (x's shape) and dgrid (grid's shape) from gy (y's shape). */
int oar_cu_grid_sample_backward(void *dx, void *dgrid, const void *gy, const void *x, const void *grid, int dtype,
                                const oar_cu_grid *g, void *scratch, void *stream);

/* roi_align: x [n, c, h, w], k boxes whose geometry the host computed (ops/roi_align_geom.h),
 * y [k, c, ph, pw]. */
typedef struct oar_cu_roi_box {
    roi_geom r;
    int64_t first; /* samples of the boxes before this one (ph * pw * gh * gw each) */
} oar_cu_roi_box;
typedef struct oar_cu_roi {
    int64_t k, n, c, h, w, ph, pw;
    int64_t samples; /* of all boxes */
} oar_cu_roi;

/* boxes: k entries in device memory. */
int oar_cu_roi_align(void *y, const void *x, int dtype, const oar_cu_roi_box *boxes, const oar_cu_roi *g,
                     void *stream);
/* Scratch bytes of the backward (4 entries per sample, at most OAR_CU_VISION_MAX_ENTRIES). */
size_t oar_cu_roi_align_backward_scratch(const oar_cu_roi *g);
/* dx [n, c, h, w] from gy [k, c, ph, pw]. */
int oar_cu_roi_align_backward(void *dx, const void *gy, int dtype, const oar_cu_roi_box *boxes,
                              const oar_cu_roi *g, void *scratch, void *stream);

/* nms: boxes [n, 4] and scores [n] (each of its own float dtype) -> keep [n] (kept indices by
 * decreasing score, then -1) and count (one int64), all on the device. The boxes are ranked by a
 * stable radix sort (the reference's order: equal scores by index, NaN last), the overlaps of
 * every pair of ranks become a bit matrix (n x ceil(n / 64) words), and one block walks the ranks
 * in order, keeping a box unless a kept one's row marked it. n <= OAR_CU_NMS_MAX_BOXES (the
 * walk's marks live in shared memory). */
#define OAR_CU_NMS_MAX_BOXES (64 * 6144LL)
size_t oar_cu_nms_scratch(int64_t n);
int oar_cu_nms(int64_t *keep, int64_t *count, const void *boxes, int box_dtype, const void *scores, int score_dtype,
               int64_t n, double iou_threshold, void *scratch, void *stream);

#ifdef __cplusplus
}
#endif
#endif
