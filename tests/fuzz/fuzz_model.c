/* libFuzzer harness for the model loader (oar_program_load_buffers): any input must load a
 * program that verifies, or be refused with a message, without a crash, a leak or undefined
 * behaviour. An input is split in two: a 4-byte little-endian length n, then n bytes of program
 * JSON (fewer if the input is shorter), then the weights (safetensors; none when empty). Built
 * only with clang (see tests/fuzz/README.md); test_model_corpus replays the corpus and the
 * crashers in every build. */
#include "graph/serialize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *json = (const char *)data;
    size_t jlen = size, wlen = 0;
    const uint8_t *weights = NULL;
    if (size >= 4) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
        json = (const char *)data + 4;
        jlen = n < size - 4 ? n : size - 4;
        wlen = size - 4 - jlen;
        weights = wlen ? data + 4 + jlen : NULL;
    }
    oar_program *p = oar_program_load_buffers(json, jlen, weights, wlen);
    if (!p) {
        /* a refusal always explains itself */
        if (!oar_last_error()[0]) __builtin_trap();
        return 0;
    }
    /* a loaded program verifies, prints, and every bound tensor's bytes are readable */
    if (oar_program_verify(p) != OAR_OK) __builtin_trap();
    int n = oar_program_dump(p, NULL, 0);
    char *text = malloc((size_t)n + 1);
    if (text) {
        oar_program_dump(p, text, (size_t)n + 1);
        free(text);
    }
    volatile unsigned char sink = 0;
    for (int v = 0; v < p->n_values; v++) {
        oar_tensor *t = p->values[v].tensor;
        if (!t) continue;
        size_t nb = (size_t)oar_numel(t) * oar_dtype_size(oar_dtype_of(t));
        const unsigned char *b = oar_data(t);
        for (size_t k = 0; k < nb; k++) sink ^= b[k];
    }
    (void)sink;
    oar_program_free(p);
    return 0;
}
