/* The two files of an exported model from the path a user gives. The documented form is the
 * stem ("dir/model" for dir/model.json + dir/model.safetensors), but "dir/model.json" is what a
 * user sees on disk and types, and the oar command always accepted it: every reader and writer
 * goes through here so the library accepts both forms too (and ".safetensors"), instead of
 * looking for dir/model.json.json. */
#include "graph/serialize.h"

#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n > k && !memcmp(s + n - k, suffix, k);
}

size_t oar_model_stem_len(const char *path) {
    size_t n = strlen(path);
    if (ends_with(path, n, ".json")) return n - strlen(".json");
    if (ends_with(path, n, ".safetensors")) return n - strlen(".safetensors");
    return n;
}

char *oar_model_file(const char *path, const char *suffix) {
    size_t a = oar_model_stem_len(path), b = strlen(suffix);
    char *s = malloc(a + b + 1);
    if (!s) return NULL;
    memcpy(s, path, a);
    memcpy(s + a, suffix, b + 1);
    return s;
}
