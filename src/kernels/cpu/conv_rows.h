/* A convolution's output rows cut into parts, each part a convolution of its own over the input
 * rows it reads (its halo included) with the padding that part sees. With NHWC activations a
 * part's input and output rows are contiguous slabs of the image, so a batch-1 conv can run its
 * parts on different threads (conv_dnnl.c). Pure arithmetic, no oneDNN: tested on its own. */
#ifndef OAR_KERNELS_CPU_CONV_ROWS_H
#define OAR_KERNELS_CPU_CONV_ROWS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct oar_conv_rows {
    int64_t out0, out_h;  /* output rows [out0, out0 + out_h) */
    int64_t in0, in_h;    /* the input rows they read, clipped to the image */
    int64_t pad_t, pad_b; /* padding rows the part's window reaches above and below those */
} oar_conv_rows;

/* Cuts the oh output rows of a convolution along one axis (input size h, kernel k, stride s, top
 * padding pt, dilation d counted from 1 as in oar's attributes) into `parts` parts, the first
 * oh % parts one row longer. A part reads input rows out0 * s - pt + ky * d for ky < k (its
 * input may run up to s - 1 rows further, unread); with in_h + pad_t + pad_b rows it gives
 * exactly out_h rows. False (nothing cut) when parts is not in [1, oh], a size is not positive,
 * or a part would read no input row (all padding). */
bool oar_conv_rows_split(int64_t h, int64_t k, int64_t s, int64_t pt, int64_t d, int64_t oh, int64_t parts,
                         oar_conv_rows *out);

#endif
