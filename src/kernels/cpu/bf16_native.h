/* Whether native bf16 compute (oneDNN's bf16 primitives on AVX512_BF16 / AMX) may run now:
 * the CPU has avx512_bf16, oar's ISA cap is avx512 and oneDNN runs at that level. Elsewhere
 * oneDNN's bf16 is emulated (3-4x slower than f32) or its reference code, so the bf16 kernels
 * decline and the via-f32 kernels (half_f32.c) take bf16 ops instead. */
#ifndef OAR_BF16_NATIVE_H
#define OAR_BF16_NATIVE_H

#include "ops/op.h"

#include <stdbool.h>

bool oar_cpu_bf16_native(void);

/* Whether op in bf16 costs no more than in f32 on this CPU now: native bf16, or a kernel of
 * OAR_IMPL_BF16_STORAGE below for it (autocast's cpu_policy AUTO asks it). */
bool oar_cpu_bf16_pays(oar_op_id op);

/* The impl name of such kernels: half_f32.c still gives their ops a via-f32 kernel to fall
 * back on, since these decline on CPUs without native bf16. */
#define OAR_IMPL_BF16_NATIVE "onednn-bf16"
/* Kernels that keep bf16 storage and compute in f32 on CPUs without native bf16, converting
 * inside a pass they make anyway (conv_dnnl.c: the layout conversions around oneDNN's f32
 * convolutions). They cover only some calls (the via-f32 kernels stay as their fallback). */
#define OAR_IMPL_BF16_STORAGE "onednn-f32-bf16io"

#endif
