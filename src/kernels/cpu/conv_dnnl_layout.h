/* Output layout conversion for the oneDNN conv kernels (conv_dnnl.c): from the channels-
 * innermost layouts oneDNN's fast convolutions write (NHWC; nChw8c / nChw16c) into oar's
 * plain NCHW. oneDNN's own reorder measured ~3x slower in this direction than the other
 * when all channels of a pixel are together (NHWC, 16-channel nChw16c): 32x16x32x32 took
 * ~135-190 us into NCHW and ~47-64 us out of it; the AVX2 8x8 transposes here take ~127 us.
 * bf16 (16-bit elements, 8x8 transposes in SSE registers) both ways: oneDNN's bf16 reorders
 * between NCHW and NHWC took about as long for 1 MB as its f32 ones for 2 MB.
 * Pure data movement: the same bits as oneDNN's reorder gives. */
#ifndef OAR_CONV_DNNL_LAYOUT_H
#define OAR_CONV_DNNL_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

/* Where element (n, c, pixel p) of an [n, c, h, w] (or [n, c, d, h, w]) tensor lies, for layouts whose channels
 * come in contiguous runs of 8 or more:
 *   n * n_stride + (c / block) * block_stride + c % block + p * pixel_stride
 * (NHWC: block 1, block_stride 1; nChw16c: block 16, pixel_stride 16). */
typedef struct oar_chan_layout {
    int64_t n, c, pixels;  /* batch, channels, h * w (d * h * w) */
    int64_t n_stride, block_stride, pixel_stride;
    int64_t block;
    int64_t esize; /* bytes per element: 2 (bf16), else (0 or 4) f32 */
    bool plain_bf16; /* with esize 4: the plain side holds bf16, the channel layout f32, so the
                        conversion widens (into the layout) or rounds (out of it, to nearest even
                        with quiet NaNs, the `cast` kernel's bits) in the same pass: bf16
                        storage around an f32 convolution (conv_dnnl.c) with no cast pass */
} oar_chan_layout;

/* Describes a oneDNN memory descriptor (passed as void * so this header needs no oneDNN)
 * as an oar_chan_layout; false where it is not one these converters handle (channels not
 * a multiple of 8, padded channels, other blockings, dtypes other than f32 and bf16) or the
 * CPU lacks AVX2. */
bool oar_chan_layout_of(const void *dnnl_md, oar_chan_layout *l);

/* src in l's layout into plain [n, c, pixels] (bf16 where l->plain_bf16); the buffers must not overlap. On x86 it uses
 * AVX2: call it only on a CPU where oar_chan_layout_of accepts layouts. */
void oar_chan_to_plain(const oar_chan_layout *l, const void *src, void *plain);
/* The other way: plain [n, c, pixels] into l's layout (every element of it written). */
void oar_plain_to_chan(const oar_chan_layout *l, const void *plain, void *dst);

#endif
