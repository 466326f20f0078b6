/* libFuzzer harness for the ONNX loader (oar_onnx_load_buffer): any input must load (and, when
 * its inputs are static, compile and run on zeros, which the loader does) or be refused with a
 * message, without a crash, a leak or undefined behaviour. Built only with clang and protobuf-c
 * (see tests/fuzz/README.md); test_onnx replays corpus/onnx and crashers/onnx-* in every build. */
#include "oar.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    oar_onnx_model *m = oar_onnx_load_buffer(data, size, NULL, NULL);
    if (!m && !oar_last_error()[0]) __builtin_trap();
    oar_onnx_free(m);
    return 0;
}
