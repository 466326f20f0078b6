/* Writing safetensors: an 8-byte little-endian header length, a JSON header padded with
 * spaces to a multiple of 8 bytes (as the reference implementation does), then each tensor's
 * bytes in row-major order, little-endian, back to back in the order given. The metadata
 * records each tensor's CRC32C (io/checksum.c), verified when the file is loaded. */
#include "io/io.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef OAR_HAVE_CJSON
#include <cjson/cJSON.h>

static const char *const WHO = "safetensors_save";

static oar_status check_text(const char *what, int i, const char *s) {
    if (!s) return oar_error(OAR_ERR_INVALID_ARG, "%s: %s %d is NULL", WHO, what, i);
    if (!oar_io_valid_utf8(s, strlen(s)))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: %s %d is not valid UTF-8", WHO, what, i);
    return OAR_OK;
}

static oar_status check_args(const char *path, const char *const *names, oar_tensor *const *tensors, int n,
                             const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    if (!path || !*path) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a file path, got %s", WHO, path ? "\"\"" : "NULL");
    if (n < 0 || (n > 0 && (!names || !tensors)))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected n >= 0 names and tensors, got n = %d%s", WHO, n,
                         n > 0 ? " with a NULL array" : "");
    if (n_meta < 0 || (n_meta > 0 && (!meta_keys || !meta_values)))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected n_meta >= 0 keys and values, got n_meta = %d%s", WHO, n_meta,
                         n_meta > 0 ? " with a NULL array" : "");
    oar_status st;
    for (int i = 0; i < n; i++) {
        if ((st = check_text("name", i, names[i])) != OAR_OK) return st;
        if (!*names[i] || !strcmp(names[i], "__metadata__"))
            return oar_error(OAR_ERR_INVALID_ARG, "%s: name %d is \"%s\"; tensor names must be non-empty and not "
                                                  "\"__metadata__\"", WHO, i, names[i]);
        const oar_tensor *t = tensors[i];
        if (!t) return oar_error(OAR_ERR_INVALID_ARG, "%s: tensor '%.200s' is NULL", WHO, names[i]);
        if (!OAR_HANDLE_OK(t)) return oar_handle_error(WHO, "tensor", i, t);
        if (!t->storage)
            return oar_error(OAR_ERR_STATE, "%s: tensor '%.200s' is symbolic (traced) and has no data", WHO, names[i]);
        if (!oar_st_dtype_name(t->dtype))
            return oar_error(OAR_ERR_UNSUPPORTED, "%s: tensor '%.200s' is %s, which safetensors has no name for "
                                                  "(it packs 4-bit types two to a byte; oar stores one per byte); "
                                                  "cast it to a wider dtype (oar_cast) to save it", WHO, names[i],
                             oar_dtype_name(t->dtype));
        /* a GPU tensor is written from a host copy (oar_io_write_tensor) */
    }
    int dup = oar_io_find_duplicate(names, n);
    if (dup >= 0) return oar_error(OAR_ERR_INVALID_ARG, "%s: the name '%.200s' is given twice", WHO, names[dup]);
    for (int i = 0; i < n_meta; i++) {
        if ((st = check_text("metadata key", i, meta_keys[i])) != OAR_OK) return st;
        if ((st = check_text("metadata value", i, meta_values[i])) != OAR_OK) return st;
        if (oar_io_is_checksum_key(meta_keys[i]))
            return oar_error(OAR_ERR_INVALID_ARG, "%s: metadata key '%.200s' is reserved: oar records each tensor's "
                                                  "checksum under '" OAR_IO_CRC_PREFIX "<name>'; use another key",
                             WHO, meta_keys[i]);
    }
    dup = oar_io_find_duplicate(meta_keys, n_meta);
    if (dup >= 0) return oar_error(OAR_ERR_INVALID_ARG, "%s: the metadata key '%.200s' is given twice", WHO, meta_keys[dup]);
    return OAR_OK;
}

/* Integers are written as raw JSON text so that every value up to 2^64 stays exact. */
static bool add_int(cJSON *array, uint64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    cJSON *item = cJSON_CreateRaw(num);
    return item && cJSON_AddItemToArray(array, item);
}

/* The header; crcs[i] is tensor i's checksum, recorded in the metadata after the caller's. */
static cJSON *build_header(const char *const *names, oar_tensor *const *tensors, int n, const char *const *meta_keys,
                           const char *const *meta_values, int n_meta, const uint32_t *crcs) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    if (n_meta > 0 || n > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        if (!meta) goto fail;
        for (int i = 0; i < n_meta; i++)
            if (!cJSON_AddStringToObject(meta, meta_keys[i], meta_values[i])) goto fail;
        for (int i = 0; i < n; i++) {
            size_t len = strlen(OAR_IO_CRC_PREFIX) + strlen(names[i]) + 1;
            char *key = malloc(len), hex[9];
            if (!key) goto fail;
            snprintf(key, len, OAR_IO_CRC_PREFIX "%s", names[i]);
            snprintf(hex, sizeof hex, "%08" PRIx32, crcs[i]);
            cJSON *item = cJSON_AddStringToObject(meta, key, hex);
            free(key);
            if (!item) goto fail;
        }
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const oar_tensor *t = tensors[i];
        cJSON *e = cJSON_AddObjectToObject(root, names[i]);
        if (!e || !cJSON_AddStringToObject(e, "dtype", oar_st_dtype_name(t->dtype))) goto fail;
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        if (!shape) goto fail;
        for (int d = 0; d < t->ndim; d++)
            if (!add_int(shape, (uint64_t)t->shape[d])) goto fail;
        uint64_t nbytes = (uint64_t)t->numel * oar_dtypes[t->dtype].size;
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        if (!offs || !add_int(offs, offset) || !add_int(offs, offset + nbytes)) goto fail;
        offset += nbytes;
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

oar_status oar_safetensors_save(const char *path, const char *const *names, oar_tensor *const *tensors, int n,
                                const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    oar_status st = check_args(path, names, tensors, n, meta_keys, meta_values, n_meta);
    if (st != OAR_OK) return st;
    /* checksums first: the header that records them precedes the data */
    uint32_t *crcs = malloc(sizeof(uint32_t) * (size_t)(n + 1));
    if (!crcs) return oar_error(OAR_ERR_OOM, "%s: out of memory saving '%.300s'", WHO, path);
    for (int i = 0; i < n && st == OAR_OK; i++) st = oar_io_tensor_crc32c(tensors[i], &crcs[i]);
    cJSON *root = st == OAR_OK ? build_header(names, tensors, n, meta_keys, meta_values, n_meta, crcs) : NULL;
    free(crcs);
    if (st != OAR_OK) {
        oar_error_prefix("%s: '%.300s'", WHO, path);
        return st;
    }
    char *json = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) return oar_error(OAR_ERR_OOM, "%s: out of memory building the header of '%.300s'", WHO, path);
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    char *header = malloc(padded ? padded : 1);
    if (!header) {
        free(json);
        return oar_error(OAR_ERR_OOM, "%s: out of memory building the header of '%.300s'", WHO, path);
    }
    memcpy(header, json, len);
    memset(header + len, ' ', padded - len);
    free(json);

    oar_io_writer *w = oar_io_writer_open(path, WHO);
    if (!w) {
        free(header);
        return oar_last_status();
    }
    unsigned char len8[8];
    oar_io_put_le64(len8, padded);
    st = oar_io_writer_write(w, len8, 8);
    if (st == OAR_OK) st = oar_io_writer_write(w, header, padded);
    free(header);
    for (int i = 0; i < n && st == OAR_OK; i++) st = oar_io_write_tensor(w, tensors[i]);
    if (st != OAR_OK) {
        oar_io_writer_abort(w);
        return st;
    }
    return oar_io_writer_commit(w);
}

#else /* !OAR_HAVE_CJSON */

oar_status oar_safetensors_save(const char *path, const char *const *names, oar_tensor *const *tensors, int n,
                                const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    return oar_error(OAR_ERR_UNSUPPORTED, "safetensors_save: oar was built without cJSON, which safetensors "
                                          "headers need; install cJSON and reconfigure (.npy files work without it)");
}

#endif
