/* ONNX's packing of the 4- and 2-bit dtypes (onnx_lowbit.c). */
#ifndef OAR_IO_ONNX_LOWBIT_H
#define OAR_IO_ONNX_LOWBIT_H

#include "oar.h"

#include <stddef.h>
#include <stdint.h>

int ox_elem_bits(oar_dtype dt);                   /* bits per element in an ONNX tensor */
size_t ox_packed_bytes(oar_dtype dt, int64_t n);  /* bytes n elements take in raw_data */
/* n elements of ONNX's packed bytes -> one byte each (integers sign-extended), and back */
void ox_unpack(oar_dtype dt, const uint8_t *src, int64_t n, uint8_t *dst);
void ox_pack(oar_dtype dt, const uint8_t *src, int64_t n, uint8_t *dst);

#endif
