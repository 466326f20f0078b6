/* Byte tensors from NCHW into NHWC rows, for the int8 convolutions (qconv_dnnl.c). */
#ifndef OAR_U8_LAYOUT_H
#define OAR_U8_LAYOUT_H

#include <stdint.h>

/* The n images [c, h, w] of src into pixels of c consecutive bytes: pixel (y, x) of image b
 * goes to dst + b * dst_image + y * dst_row + x * c, so dst may be the inside of a larger frame
 * (rows of dst_row bytes, images of dst_image). Nothing else of dst is written. */
void oar_u8_nchw_to_nhwc(const uint8_t *src, int64_t n, int64_t c, int64_t h, int64_t w, uint8_t *dst,
                         int64_t dst_row, int64_t dst_image);

#endif
