/* libFuzzer harness for the .npy loader: any input must load or be refused with a message,
 * without a crash, a leak or undefined behaviour. Built only with clang (see
 * tests/fuzz/README.md); test_io_hostile replays the corpus and crashers in every build. */
#include "oar.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    oar_tensor *t = oar_npy_load_buffer(data, size);
    if (!t) {
        if (!oar_last_error()[0]) __builtin_trap();
        return 0;
    }
    if (!oar_is_contiguous(t)) __builtin_trap();
    volatile unsigned char sink = 0;
    size_t n = (size_t)oar_numel(t) * oar_dtype_size(oar_dtype_of(t));
    const unsigned char *p = oar_data(t);
    for (size_t k = 0; k < n; k++) sink ^= p[k];
    (void)sink;
    oar_release(t);
    return 0;
}
