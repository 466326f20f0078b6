/* The model loader's fuzzing seeds (tests/fuzz/corpus/model) and every model input that ever
 * crashed it (tests/fuzz/crashers/model-*), replayed through oar_program_load_buffers in every
 * build, sanitized or not: each must load a program that verifies, or be refused with a
 * message. Inputs are in the harness's format (tests/fuzz/fuzz_model.c): a 4-byte
 * little-endian JSON length, the JSON, the weights. */
#include "test_io_util.h"

#include "graph/serialize.h"

static int loaded, refused;

static void replay(const char *file) {
    size_t size;
    unsigned char *data = io_read_file(file, &size);
    if (!data) return;
    const char *json = (const char *)data;
    size_t jlen = size, wlen = 0;
    const unsigned char *weights = NULL;
    if (size >= 4) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
        json = (const char *)data + 4;
        jlen = n < size - 4 ? n : size - 4;
        wlen = size - 4 - jlen;
        weights = wlen ? data + 4 + jlen : NULL;
    }
    oar_clear_error();
    oar_program *p = oar_program_load_buffers(json, jlen, weights, wlen);
    if (p) {
        loaded++;
        CHECK(oar_program_verify(p) == OAR_OK);
        int n = oar_program_dump(p, NULL, 0);
        CHECK(n > 0);
        oar_program_free(p);
    } else {
        refused++;
        bool said = oar_last_error()[0] && strstr(oar_last_error(), "program_load") != NULL;
        CHECK(said);
        if (!said) fprintf(stderr, "%s: refused without a message\n", file);
    }
    free(data);
}

static int replay_dir(const char *rel, const char *prefix) {
    char path[1024];
    if (!io_source_path(path, sizeof path, rel)) return -1;
    DIR *d = opendir(path);
    if (!d) return 0;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char file[2048];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        replay(file);
        files++;
    }
    closedir(d);
    return files;
}

int main(void) {
    oar_clear_error();
    if (!oar_program_load_buffers("{}", 2, NULL, 0) && oar_last_status() == OAR_ERR_UNSUPPORTED &&
        strstr(oar_last_error(), "built without cJSON")) {
        printf("test_model_corpus: oar was built without cJSON: model files are refused, as they should be\n");
        return test_summary("test_model_corpus");
    }
    int seeds = replay_dir("tests/fuzz/corpus/model", "");
    if (seeds < 0) {
        printf("test_model_corpus: skipped: set OAR_SOURCE_DIR to the repository\n");
        return test_summary("test_model_corpus");
    }
    int crashers = replay_dir("tests/fuzz/crashers", "model-");
    printf("test_model_corpus: replayed %d seeds and %d crashers (%d loaded, %d refused)\n", seeds, crashers, loaded,
           refused);
    CHECK(seeds > 0);
    CHECK(loaded > 0 && refused > 0);
    return test_summary("test_model_corpus");
}
