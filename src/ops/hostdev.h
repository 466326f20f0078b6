/* OAR_HD marks the small geometry functions of a header that both the C kernels and the CUDA
 * kernels compile (grid_sample_geom.h, roi_align_sample.h, nms_iou.h), so the reference and the
 * GPU compute the same taps from the same source. Such headers include no oar header: nvcc
 * compiles them into .cu files, which see no oar internals. */
#ifndef OAR_HOSTDEV_H
#define OAR_HOSTDEV_H

#ifdef __CUDACC__
#define OAR_HD __host__ __device__
#else
#define OAR_HD
#endif

#endif
