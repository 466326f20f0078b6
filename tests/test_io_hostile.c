/* Hostile and damaged files: every truncation of a valid file, random byte corruptions,
 * hand-made headers that break each rule, and the fuzzing corpus and crashers. Each must be
 * rejected with a message naming the file and the problem, never crash or leak. */
#include "test_io_util.h"

static char dir[512];
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_rand(void) { /* xorshift64*, so the test does not touch oar's generator */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static bool have_st; /* built with cJSON */

static unsigned char *valid_safetensors(size_t *size) {
    *size = 0;
    if (!have_st) return NULL;
    oar_scope_begin();
    oar_manual_seed(5);
    oar_tensor *ts[5] = {oar_randn((int64_t[]){3, 4}, 2, OAR_F32), oar_randint(0, 2, (int64_t[]){5}, 1, OAR_I64),
                         oar_gt(oar_randn((int64_t[]){6}, 1, OAR_F32), oar_zeros((int64_t[]){6}, 1, OAR_F32)),
                         oar_scalar(2, OAR_F16), oar_zeros((int64_t[]){0}, 1, OAR_BF16)};
    const char *names[5] = {"layer.weight", "ids", "mask", "half", "nothing"};
    const char *mk[1] = {"k"}, *mv[1] = {"v"};
    char path[600];
    snprintf(path, sizeof path, "%s/valid.safetensors", dir);
    CHECK(oar_safetensors_save(path, names, ts, 5, mk, mv, 1) == OAR_OK);
    oar_scope_end();
    return io_read_file(path, size);
}

static unsigned char *valid_npy(size_t *size) {
    oar_scope_begin();
    char path[600];
    snprintf(path, sizeof path, "%s/valid.npy", dir);
    CHECK(oar_npy_save(path, oar_arange(0, 12, 1, OAR_F64)) == OAR_OK);
    oar_scope_end();
    return io_read_file(path, size);
}

/* Every prefix of a valid file, from memory and from disk, is rejected with a message. */
static void test_truncation(void) {
    size_t size[2];
    unsigned char *buf[2] = {valid_safetensors(&size[0]), valid_npy(&size[1])};
    char path[600];
    snprintf(path, sizeof path, "%s/truncated", dir);
    for (int k = 0; k < 2; k++) {
        if (!buf[k]) continue;
        int rejected = 0, named = 0;
        for (size_t len = 0; len < size[k]; len++) {
            oar_clear_error();
            bool ok;
            if (k == 0) {
                oar_tensor_dict *d = oar_safetensors_load_buffer(buf[k], len);
                ok = d != NULL;
                oar_dict_free(d);
            } else {
                oar_tensor *t = oar_npy_load_buffer(buf[k], len);
                ok = t != NULL;
                oar_release(t);
            }
            rejected += !ok && oar_last_status() == OAR_ERR_FORMAT;
            named += strstr(oar_last_error(), "<buffer of") != NULL;
            CHECK(io_write_file(path, buf[k], len));
            oar_clear_error();
            if (k == 0) {
                oar_tensor_dict *d = oar_safetensors_load(path);
                ok = d != NULL;
                oar_dict_free(d);
            } else {
                oar_tensor *t = oar_npy_load(path);
                ok = t != NULL;
                oar_release(t);
            }
            rejected += !ok && oar_last_status() == OAR_ERR_FORMAT;
            named += strstr(oar_last_error(), "/truncated'") != NULL;
        }
        CHECK(rejected == (int)(2 * size[k]));
        CHECK(named == (int)(2 * size[k]));
        printf("test_io_hostile: %s: all %zu truncations rejected\n", k ? "npy" : "safetensors", size[k]);
    }
    /* the full files still load */
    if (buf[0]) {
        oar_tensor_dict *d = oar_safetensors_load_buffer(buf[0], size[0]);
        CHECK(d && oar_dict_size(d) == 5);
        oar_dict_free(d);
    }
    oar_tensor *t = oar_npy_load_buffer(buf[1], size[1]);
    CHECK(t && oar_numel(t) == 12);
    oar_release(t);
    free(buf[0]);
    free(buf[1]);
}

/* Random damage: either the file still parses (the bytes hit tensor data) or it is refused
 * with a message; never a crash (ASan and UBSan builds run this too). */
static void test_corruption(void) {
    size_t size[2];
    unsigned char *buf[2] = {valid_safetensors(&size[0]), valid_npy(&size[1])};
    for (int k = 0; k < 2; k++) {
        if (!buf[k]) continue;
        unsigned char *copy = malloc(size[k]);
        int rejected = 0, loaded = 0, bad_message = 0;
        for (int iter = 0; iter < 4000; iter++) {
            memcpy(copy, buf[k], size[k]);
            int flips = 1 + (int)(next_rand() % 4);
            /* half of the damage lands in the first 128 bytes, where the structure is */
            for (int f = 0; f < flips; f++) {
                size_t at = (size_t)(next_rand() % (iter % 2 ? size[k] : (size[k] < 128 ? size[k] : 128)));
                copy[at] = (unsigned char)(iter % 3 ? next_rand() : copy[at] ^ (1u << (next_rand() % 8)));
            }
            oar_clear_error();
            bool ok;
            if (k == 0) {
                oar_tensor_dict *d = oar_safetensors_load_buffer(copy, size[k]);
                ok = d != NULL;
                for (int i = 0; d && i < oar_dict_size(d); i++) {
                    oar_tensor *t = oar_dict_at(d, i, NULL);
                    ok = ok && t && oar_numel(t) >= 0;
                }
                oar_dict_free(d);
            } else {
                oar_tensor *t = oar_npy_load_buffer(copy, size[k]);
                ok = t != NULL;
                oar_release(t);
            }
            if (ok) loaded++;
            else {
                rejected++;
                bad_message += strncmp(oar_last_error(), k ? "npy_load_buffer: <buffer of" :
                                                             "safetensors_load_buffer: <buffer of", 20) != 0;
            }
        }
        CHECK(bad_message == 0);
        CHECK(rejected > 1000);
        printf("test_io_hostile: %s: 4000 corruptions: %d rejected, %d still valid\n", k ? "npy" : "safetensors",
               rejected, loaded);
        free(copy);
        free(buf[k]);
    }
}

/* A safetensors file from a header text and data bytes. */
static unsigned char *make_st(const char *header, const void *data, size_t n_data, uint64_t fake_len, size_t *size) {
    size_t hl = strlen(header);
    *size = 8 + hl + n_data;
    unsigned char *b = malloc(*size);
    uint64_t len = fake_len ? fake_len : hl;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(len >> (8 * i));
    memcpy(b + 8, header, hl);
    if (n_data) memcpy(b + 8 + hl, data, n_data);
    return b;
}

static void expect_st(const char *header, const void *data, size_t n_data, uint64_t fake_len, oar_status want,
                      const char *substr) {
    size_t size;
    unsigned char *b = make_st(header, data, n_data, fake_len, &size);
    oar_clear_error();
    oar_tensor_dict *d = oar_safetensors_load_buffer(b, size);
    bool ok = !d && oar_last_status() == want && strstr(oar_last_error(), substr) != NULL;
    if (!ok) fprintf(stderr, "header %s: expected \"%s\", got \"%s\"\n", header, substr, oar_last_error());
    CHECK(ok);
    oar_dict_free(d);
    free(b);
}

static void test_hostile_safetensors(void) {
    static const unsigned char z[64] = {0};
    const unsigned char two[1] = {2};
    const oar_status F = OAR_ERR_FORMAT;
    expect_st("", NULL, 0, 0, F, "expected a JSON object");
    expect_st("{}", NULL, 0, 1000, F, "header length 1000 is larger than the 2 bytes after it");
    expect_st("{}", NULL, 0, UINT64_MAX, F, "is larger than");
    expect_st("[1, 2]  ", NULL, 0, 0, F, "does not start with '{'");
    expect_st("{\"a\": ", NULL, 0, 0, F, "not valid JSON");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", z, 4, 0, F, "data after its JSON");
    expect_st("{\"\xff\":1}", NULL, 0, 0, F, "not valid UTF-8");
    expect_st("{\"a\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4, 0, F, "unknown dtype 'F99'");
    /* F4 is packed two to a byte; oar's f4e2m1 has one per byte: valid, but unsupported */
    expect_st("{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", z, 1, 0, OAR_ERR_UNSUPPORTED,
              "safetensors dtype 'F4'");
    expect_st("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4, 0, F, "expected a string 'dtype'");
    expect_st("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4, 0, F, "got nothing");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4, 0, F,
              "two 'dtype' fields");
    expect_st("{\"a\":[1]}", NULL, 0, 0, F, "tensor 'a' is an array");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", z, 4, 0, F,
              "shape[0] is not a non-negative integer");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", z, 4, 0, F, "shape[0]");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e400],\"data_offsets\":[0,4]}}", z, 4, 0, F, "shape[0]");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":\"4\",\"data_offsets\":[0,4]}}", z, 4, 0, F, "expected a 'shape' array");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", z, 4, 0,
              OAR_ERR_UNSUPPORTED, "9 dims; oar supports at most 8");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", z, 4, 0, F,
              "too many elements");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,9007199254740992,9007199254740992],\"data_offsets\":[0,0]}}", NULL,
              0, 0, F, "too many elements");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", z, 4, 0, F,
              "data_offsets [0, 4] do not hold the 8 bytes that shape [2] of F32 needs");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", z, 4, 0, F, "do not hold");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", z, 4, 0, F, "expected 'data_offsets'");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", z, 4, 0, F, "expected 'data_offsets'");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",4]}}", z, 4, 0, F, "expected 'data_offsets'");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", z, 8, 0, F, "reach past the end");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", z, 8, 0, F, "overlap");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", z, 8, 0, F,
              "bytes [0, 4) of the data section belong to no tensor");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", z, 12, 0, F, "8 bytes after the last");
    expect_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", z, 8, 0, F, "'a' appears twice");
    expect_st("{\"__metadata__\":{\"k\":1}}", NULL, 0, 0, F, "metadata values must be strings");
    expect_st("{\"__metadata__\":[\"k\"]}", NULL, 0, 0, F, "\"__metadata__\" is an array");
    expect_st("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0, 0, F, "two \"__metadata__\"");
    expect_st("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", NULL, 0, 0, F, "metadata key 'k' appears twice");
    expect_st("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", two, 1, 0, F, "expected 0 or 1");
    /* deep nesting stays within cJSON's limit */
    char deep[5000];
    memset(deep, '[', sizeof deep - 1);
    deep[0] = '{';
    deep[1] = '"';
    deep[2] = 'a';
    deep[3] = '"';
    deep[4] = ':';
    deep[sizeof deep - 1] = '\0';
    expect_st(deep, NULL, 0, 0, F, "not valid JSON");
    /* allowed: null metadata, unknown fields, a zero-size tensor anywhere, whitespace padding */
    size_t size;
    unsigned char *b = make_st("{\"__metadata__\":null,\"e\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[0,0],"
                               "\"extra\":true},\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}   \n",
                               "\x01\x02", 2, 0, &size);
    oar_tensor_dict *d = oar_safetensors_load_buffer(b, size);
    CHECK(d && oar_dict_size(d) == 2 && oar_numel(oar_dict_get(d, "e")) == 0 && t_at(oar_dict_get(d, "a"), 1) == 2);
    oar_dict_free(d);
    free(b);
}

static void expect_npy_fill(const char *header, int major, size_t n_data, int fill, oar_status want,
                            const char *substr) {
    size_t hl = strlen(header), pre = major == 1 ? 10 : 12, size = pre + hl + n_data;
    unsigned char *b = calloc(1, size);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + pre, header, hl);
    memset(b + pre + hl, fill, n_data);
    oar_clear_error();
    oar_tensor *t = oar_npy_load_buffer(b, size);
    bool ok = want == OAR_OK ? t != NULL
                             : !t && oar_last_status() == want && strstr(oar_last_error(), substr) != NULL;
    if (!ok) fprintf(stderr, "npy header %s: expected \"%s\", got \"%s\"\n", header, substr, oar_last_error());
    CHECK(ok);
    oar_release(t);
    free(b);
}

static void expect_npy(const char *header, int major, size_t n_data, oar_status want, const char *substr) {
    expect_npy_fill(header, major, n_data, 0, want, substr);
}

static void test_hostile_npy(void) {
    const oar_status F = OAR_ERR_FORMAT, U = OAR_ERR_UNSUPPORTED;
    CHECK_ERR(oar_npy_load_buffer("\x93NUMPX\x01\x00\x00\x00", 10), "not a .npy file");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4, 8, U, "version 4.0");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, 4, F,
               "truncated: shape [2] of f32 needs 8 bytes of data, the file has 4");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, 12, F, "4 unexpected bytes");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 2, 8, OAR_OK, "");
    expect_npy("{'descr': '<f4', 'fortran_order': False}", 1, 8, F, "the key 'shape' is missing");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 1, 8, F, "unexpected key 'x'");
    expect_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 1, 8, F, "appears twice");
    expect_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 1, 8, U, "dtype '<c8' has no oar equivalent");
    expect_npy("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", 1, 8, F, "has no byte order");
    expect_npy("{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }", 1, 8, U, "dtype 'f4'");
    expect_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 1, 8, U, "structured");
    expect_npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 1, 8, F, "expected True or False");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 1, 8, F, "non-negative integer");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 1, 8, F, "expected ',' or ')'");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 1, 8, U, "more than 8 dims");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 1, 8, F, "too large");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 1, 8, F,
               "too many elements");
    expect_npy("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", 1, 8, F, "bad .npy header");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 1, 8, F, "unexpected text after");
    expect_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", 1, 8, F, "bad .npy header");
    expect_npy_fill("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 1, 3, 2, F,
                    "element 0 of a bool tensor is byte 0x02; expected 0 or 1");
    /* a header length past the end of the file */
    unsigned char b[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0xff};
    CHECK_ERR(oar_npy_load_buffer(b, 12), "truncated: the header needs 65535 bytes");
    b[6] = 2;
    b[8] = b[9] = b[10] = b[11] = 0xff;
    CHECK_ERR(oar_npy_load_buffer(b, 12), "exceeds the limit");
}

/* The examples the fuzzer started from and every input that once crashed: both loaders must
 * survive each of them. */
static void test_fuzz_files(void) {
    const char *sub[3] = {"tests/fuzz/corpus/safetensors", "tests/fuzz/corpus/npy", "tests/fuzz/crashers"};
    int files = 0;
    for (int k = 0; k < 3; k++) {
        char path[1024];
        if (!io_source_path(path, sizeof path, sub[k])) {
            printf("test_io_hostile: skipped the fuzz files: set OAR_SOURCE_DIR to the repository\n");
            return;
        }
        DIR *d = opendir(path);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char file[2048];
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            size_t size;
            unsigned char *buf = io_read_file(file, &size);
            if (!buf) continue;
            files++;
            oar_tensor_dict *dict = oar_safetensors_load_buffer(buf, size);
            oar_dict_free(dict);
            oar_release(oar_npy_load_buffer(buf, size));
            free(buf);
        }
        closedir(d);
    }
    printf("test_io_hostile: replayed %d fuzz files\n", files);
    CHECK(files > 0);
}

int main(void) {
    if (!io_mkdtemp(dir, sizeof dir)) {
        fprintf(stderr, "test_io_hostile: cannot make a scratch directory\n");
        return 1;
    }
    have_st = io_have_safetensors();
    if (!have_st) printf("test_io_hostile: oar was built without cJSON: only .npy is tested\n");
    else test_hostile_safetensors();
    test_truncation();
    test_corruption();
    test_hostile_npy();
    test_fuzz_files();
    io_rmtree(dir);
    return test_summary("test_io_hostile");
}
