/* Direct convolutions (conv_direct.c) for small-channel, stride-1 convs such as LeNet's: no
 * im2col, the input zero-padded once per image and every output computed in registers. */
#ifndef OAR_CONV_DIRECT_H
#define OAR_CONV_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { OAR_CONV_DIRECT_AUTO, OAR_CONV_DIRECT_AVX2, OAR_CONV_DIRECT_AVX512 } oar_conv_direct_isa;

/* Test hook: run the kernels in one instruction set (AUTO: the best the CPU switch allows). Both
 * give bitwise equal results. Returns the previous setting, or -1 (and changes nothing) when
 * the set is not available in this build, on this CPU or under the cap (oar_set_cpu_isa). */
int oar_conv_direct_force_isa(oar_conv_direct_isa isa);

typedef enum { OAR_CONV_DIRECT_FORWARD, OAR_CONV_DIRECT_GRAD_INPUT, OAR_CONV_DIRECT_GRAD_WEIGHT } oar_conv_direct_op;

/* The rule for which convs the direct kernels take (a pure function of the shape), on the
 * forward conv's geometry: x [*, ci, *, *], weight [co, ci / groups, kh, kw]. False where AVX2
 * is missing. */
bool oar_conv_direct_takes(oar_conv_direct_op op, int64_t ci, int64_t co, int64_t kh, int64_t kw,
                           const int64_t *stride, const int64_t *pad, const int64_t *dilation, int64_t groups);

#endif
