/* ONNX's layout of the 4- and 2-bit dtypes: packed, first element in the lowest bits (two
 * per byte for int4/uint4/float4e2m1, four for int2/uint2), where oar keeps one per byte (an
 * integer's value sign-extended, a float's code). Shared by import (raw_data, int32_data) and
 * export (raw_data). */
#include "io/onnx/onnx_lowbit.h"

#include "tensor/tensor.h"

int ox_elem_bits(oar_dtype dt) { return oar_dtype_is_lowbit(dt) ? oar_dtype_bits(dt) : (int)oar_dtype_size(dt) * 8; }

size_t ox_packed_bytes(oar_dtype dt, int64_t n) {
    int bits = ox_elem_bits(dt);
    return bits >= 8 ? (size_t)n * (size_t)(bits / 8) : ((size_t)n * (size_t)bits + 7) / 8;
}

static bool signed_int(oar_dtype dt) { return dt == OAR_I4 || dt == OAR_I2; }

void ox_unpack(oar_dtype dt, const uint8_t *src, int64_t n, uint8_t *dst) {
    int bits = ox_elem_bits(dt), per = 8 / bits;
    unsigned mask = (1u << bits) - 1;
    for (int64_t i = 0; i < n; i++) {
        unsigned v = (src[i / per] >> (bits * (int)(i % per))) & mask;
        if (signed_int(dt) && (v >> (bits - 1))) v |= ~mask; /* sign-extend two's complement */
        dst[i] = (uint8_t)v;
    }
}

void ox_pack(oar_dtype dt, const uint8_t *src, int64_t n, uint8_t *dst) {
    int bits = ox_elem_bits(dt), per = 8 / bits;
    unsigned mask = (1u << bits) - 1;
    for (size_t b = 0; b < ox_packed_bytes(dt, n); b++) dst[b] = 0; /* the unused high bits are 0 */
    for (int64_t i = 0; i < n; i++) dst[i / per] |= (uint8_t)((src[i] & mask) << (bits * (int)(i % per)));
}
