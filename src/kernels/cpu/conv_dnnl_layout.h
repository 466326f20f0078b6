/* Activation layout conversions for the oneDNN conv kernels (conv_dnnl.c): between oar's
 * plain NCHW and the channels-innermost layouts oneDNN's fast convolutions run on (NHWC and
 * nChw8c / nChw16c). oneDNN's own reorders for these measured 2-3x slower than the reverse
 * direction (NHWC or 16-channel blocks to NCHW: ~135 us for 2 MiB on ResNet-20's first stage,
 * where NCHW to nChw16c takes ~64 us); these are AVX2 8x8 transposes (~127 us there). Pure
 * data movement: the same bits as oneDNN's reorder gives. */
#ifndef OAR_CONV_DNNL_LAYOUT_H
#define OAR_CONV_DNNL_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

/* Where element (n, c, pixel p) of an [n, c, h, w] tensor lies, for layouts whose channels
 * come in contiguous runs of 8 or more:
 *   n * n_stride + (c / block) * block_stride + c % block + p * pixel_stride
 * (NHWC: block 1, block_stride 1; nChw16c: block 16, pixel_stride 16). */
typedef struct oar_chan_layout {
    int64_t n, c, pixels;  /* batch, channels, h * w */
    int64_t n_stride, block_stride, pixel_stride;
    int64_t block;
} oar_chan_layout;

/* Describes a oneDNN memory descriptor (passed as void * so this header needs no oneDNN)
 * as an oar_chan_layout; false where it is not one these converters handle (channels not
 * a multiple of 8, padded channels, other blockings) or the CPU lacks AVX2. */
bool oar_chan_layout_of(const void *dnnl_md, oar_chan_layout *l);

/* plain [n, c, pixels] into l's layout, and back. The buffers must not overlap. On x86 they
 * use AVX2: call them only on a CPU where oar_chan_layout_of accepts layouts. */
void oar_chan_from_plain(const oar_chan_layout *l, const float *plain, float *dst);
void oar_chan_to_plain(const oar_chan_layout *l, const float *src, float *plain);

#endif
