/* libFuzzer harness for the safetensors loader: any input must load or be refused with a
 * message, without a crash, a leak or undefined behaviour. Built only with clang (see
 * tests/fuzz/README.md); test_io_hostile replays the corpus and crashers in every build. */
#include "oar.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    oar_tensor_dict *d = oar_safetensors_load_buffer(data, size);
    if (!d) {
        /* a refusal always explains itself */
        if (!oar_last_error()[0]) __builtin_trap();
        return 0;
    }
    volatile unsigned char sink = 0;
    for (int i = 0; i < oar_dict_size(d); i++) {
        const char *name = NULL;
        oar_tensor *t = oar_dict_at(d, i, &name);
        if (!t || !name || oar_dict_get(d, name) == NULL) __builtin_trap();
        /* every byte the tensor claims must be readable (ASan checks the bounds) */
        size_t n = (size_t)oar_numel(t) * oar_dtype_size(oar_dtype_of(t));
        const unsigned char *p = oar_data(t);
        for (size_t k = 0; k < n; k++) sink ^= p[k];
    }
    for (int i = 0; i < oar_dict_meta_size(d); i++) {
        const char *key = NULL, *value = oar_dict_meta_at(d, i, &key);
        if (!key || !value) __builtin_trap();
        sink ^= (unsigned char)strlen(value);
    }
    (void)sink;
    oar_dict_free(d);
    return 0;
}
