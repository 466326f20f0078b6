/* Integrity of saved files (issue 13): a byte flipped inside the weight data of a safetensors
 * file, a checkpoint or an exported model is caught on load with a message naming the file,
 * the tensor and both checksums; files without checksums (older oar, PyTorch's writer) still
 * load; verification can be skipped (OAR_SKIP_CHECKSUM=1, oar_set_verify_checksums). Also
 * the CRC32C itself: the standard check value, the hardware and portable paths agreeing. */
#include "test_io_util.h"

#include "base/base.h"

static char g_dir[512];

/* Flips one bit of the byte at offset from the end of the file (1: the last byte, which lies in
 * the last tensor's data). */
static bool flip_from_end(const char *path, size_t from_end) {
    size_t n = 0;
    unsigned char *b = io_read_file(path, &n);
    if (!b || n < from_end) {
        free(b);
        return false;
    }
    b[n - from_end] ^= 0x10;
    bool ok = io_write_file(path, b, n);
    free(b);
    return ok;
}

static void test_crc32c(void) {
    const char *check = "123456789"; /* the catalogue's check input: CRC-32C is e3069283 */
    CHECK(oar_crc32c(0, check, 9) == 0xE3069283u);
    CHECK(oar_crc32c_portable(0, check, 9) == 0xE3069283u);
    CHECK(oar_crc32c(0, NULL, 0) == 0);
    /* every length and alignment up to 64 + 3, in one call and in two pieces */
    unsigned char buf[80];
    for (int i = 0; i < 80; i++) buf[i] = (unsigned char)(i * 37 + 11);
    int diffs = 0;
    for (int off = 0; off < 4; off++)
        for (size_t n = 0; n <= 67; n++) {
            uint32_t a = oar_crc32c(0, buf + off, n), b = oar_crc32c_portable(0, buf + off, n);
            uint32_t c = oar_crc32c(oar_crc32c(0, buf + off, n / 3), buf + off + n / 3, n - n / 3);
            diffs += a != b || a != c;
        }
    CHECK(diffs == 0);
}

static void test_safetensors(void) {
    oar_scope_begin();
    char path[700];
    snprintf(path, sizeof path, "%s/t.safetensors", g_dir);
    oar_tensor *t[2] = {oar_randn((int64_t[]){64, 32}, 2, OAR_F32), oar_arange(0, 100, 1, OAR_I64)};
    const char *names[2] = {"weight", "steps"}, *keys[1] = {"note"}, *vals[1] = {"hello"};
    CHECK(oar_safetensors_save(path, names, t, 2, keys, vals, 1) == OAR_OK);
    oar_tensor_dict *d = oar_safetensors_load(path);
    CHECK(d && io_same_tensor(oar_dict_get(d, "weight"), t[0]));
    /* the checksums are oar's: the caller sees its own metadata only */
    CHECK(d && oar_dict_meta_size(d) == 1 && !strcmp(oar_dict_meta(d, "note"), "hello"));
    oar_dict_free(d);
    /* the key is in the file, readable by any safetensors reader */
    size_t n = 0;
    unsigned char *bytes = io_read_file(path, &n);
    CHECK(bytes && memmem(bytes, n, "\"oar.crc32c.weight\"", 19));
    free(bytes);

    /* a flipped bit in the last tensor's data */
    CHECK(flip_from_end(path, 3));
    oar_clear_error();
    CHECK(oar_safetensors_load(path) == NULL);
    const char *msg = oar_last_error();
    CHECK(oar_last_status() == OAR_ERR_FORMAT);
    CHECK(strstr(msg, "t.safetensors") && strstr(msg, "tensor 'steps' is damaged"));
    CHECK(strstr(msg, "CRC32C") && strstr(msg, "OAR_SKIP_CHECKSUM=1") && strstr(msg, "oar_set_verify_checksums"));
    /* skipping loads it, damage included */
    oar_set_verify_checksums(false);
    d = oar_safetensors_load(path);
    CHECK(d && oar_dict_get(d, "steps") && t_at(oar_dict_get(d, "steps"), 99) != 99);
    oar_dict_free(d);
    oar_set_verify_checksums(true);
    /* and in the first tensor: the message names that one */
    CHECK(oar_safetensors_save(path, names, t, 2, NULL, NULL, 0) == OAR_OK);
    CHECK(flip_from_end(path, 800 + 5));
    CHECK_ERR(oar_safetensors_load(path), "tensor 'weight' is damaged");

    /* a checksum that is not 8 hex digits is malformed */
    CHECK(oar_safetensors_save(path, names, t, 2, NULL, NULL, 0) == OAR_OK);
    bytes = io_read_file(path, &n);
    char *at = bytes ? memmem(bytes, n, "\"oar.crc32c.steps\":\"", 20) : NULL;
    if (at) at[20] = 'Z';
    CHECK(at && io_write_file(path, bytes, n));
    free(bytes);
    CHECK_ERR(oar_safetensors_load(path), "expected the tensor's CRC32C as 8 lower-case hex digits");
    /* the prefix is reserved */
    const char *rk[1] = {"oar.crc32c.weight"}, *rv[1] = {"00000000"};
    CHECK_ERR(oar_safetensors_save(path, names, t, 2, rk, rv, 1), "is reserved");
    oar_scope_end();
}

/* Files written before checksums, and by other writers, load unchecked. */
static void test_old_files(void) {
    char ref[1024];
    if (!io_source_path(ref, sizeof ref, "tests/data/ref.safetensors")) {
        printf("test_io_checksum: skipped the reference file: set OAR_SOURCE_DIR to the repository\n");
        return;
    }
    oar_tensor_dict *d = oar_safetensors_load(ref); /* written by Python's safetensors */
    CHECK(d && oar_dict_size(d) > 0);
    oar_dict_free(d);
    /* an oar file with its checksums removed from the metadata (as older oar wrote it) */
    char path[700];
    snprintf(path, sizeof path, "%s/old.safetensors", g_dir);
    oar_scope_begin();
    oar_tensor *t = oar_randn((int64_t[]){5}, 1, OAR_F32);
    const char *name = "w";
    CHECK(oar_safetensors_save(path, &name, &t, 1, NULL, NULL, 0) == OAR_OK);
    size_t n = 0;
    unsigned char *b = io_read_file(path, &n);
    char *at = b ? memmem(b, n, "\"oar.crc32c.w\"", 14) : NULL;
    if (at) at[1] = 'x'; /* "xar.crc32c.w": metadata of no meaning to oar */
    CHECK(at && io_write_file(path, b, n));
    free(b);
    CHECK(flip_from_end(path, 2)); /* unchecked: nothing can tell */
    oar_tensor_dict *od = oar_safetensors_load(path);
    CHECK(od && oar_dict_meta(od, "xar.crc32c.w"));
    oar_dict_free(od);
    oar_scope_end();
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* The same through a checkpoint and through an exported model and the predictor. */
static void test_checkpoint_and_model(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    oar_module *m = oar_zoo_create("tiny", NULL);
    char ckpt[700], model[700], weights[720];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", g_dir);
    CHECK(oar_checkpoint_save(ckpt, m, NULL, 4) == OAR_OK);
    CHECK(oar_checkpoint_load(ckpt, m, NULL, NULL) == OAR_OK);
    CHECK(flip_from_end(ckpt, 7));
    CHECK_ERR(oar_checkpoint_load(ckpt, m, NULL, NULL), "is damaged");
    CHECK(strstr(oar_last_error(), "ckpt.safetensors"));
    oar_set_verify_checksums(false);
    CHECK(oar_checkpoint_load(ckpt, m, NULL, NULL) == OAR_OK);
    oar_set_verify_checksums(true);

    oar_module_train(m, false);
    oar_input_spec spec = {OAR_F32, 2, {-1, 64}, "x"};
    oar_jit *f = oar_jit_to_static(forward_fn, m, &(oar_jit_opts){.specs = &spec, .n_specs = 1, .module = m});
    oar_tensor *x = oar_randn((int64_t[]){2, 64}, 2, OAR_F32), *y[1] = {0};
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK);
    snprintf(model, sizeof model, "%s/model", g_dir);
    CHECK(oar_jit_save(f, model) == OAR_OK);
    oar_jit_free(f);
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = model});
    CHECK(p != NULL);
    oar_predictor_free(p);
    snprintf(weights, sizeof weights, "%s.safetensors", model);
    CHECK(flip_from_end(weights, 9));
    oar_clear_error();
    CHECK(oar_predictor_create(&(oar_predictor_config){.model_path = model}) == NULL);
    CHECK(strstr(oar_last_error(), "model.safetensors") && strstr(oar_last_error(), "is damaged"));
    oar_set_verify_checksums(false);
    p = oar_predictor_create(&(oar_predictor_config){.model_path = model});
    CHECK(p != NULL);
    oar_predictor_free(p);
    oar_set_verify_checksums(true);
    oar_module_free(m);
    oar_scope_end();
}

/* OAR_SKIP_CHECKSUM=1, read at the first load of the process (so this runs first). */
static void test_environment(void) {
    setenv("OAR_SKIP_CHECKSUM", "1", 1);
    oar_scope_begin();
    char path[700];
    snprintf(path, sizeof path, "%s/env.safetensors", g_dir);
    oar_tensor *t = oar_randn((int64_t[]){16}, 1, OAR_F32);
    const char *name = "w";
    CHECK(oar_safetensors_save(path, &name, &t, 1, NULL, NULL, 0) == OAR_OK);
    CHECK(flip_from_end(path, 1));
    oar_tensor_dict *d = oar_safetensors_load(path);
    CHECK(d != NULL); /* skipped, as asked */
    oar_dict_free(d);
    oar_set_verify_checksums(true); /* the call wins over the environment */
    CHECK_ERR(oar_safetensors_load(path), "tensor 'w' is damaged");
    unsetenv("OAR_SKIP_CHECKSUM");
    oar_scope_end();
}

int main(void) {
    if (!io_have_safetensors()) {
        printf("test_io_checksum: skipped: built without cJSON\n");
        return 0;
    }
    if (!io_mkdtemp(g_dir, sizeof g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_environment();
    test_crc32c();
    test_safetensors();
    test_old_files();
    test_checkpoint_and_model();
    io_rmtree(g_dir);
    return test_summary("test_io_checksum");
}
