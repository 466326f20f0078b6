/* Reading safetensors. Nothing in the file is trusted: the header length is checked against
 * the file size, the header must be UTF-8 JSON of the documented shape, every tensor's dtype,
 * shape and data offsets are checked, and the offsets must tile the data section exactly (no
 * overlap, no hole, nothing after the last tensor), as the format's specification requires.
 * Only then is memory for the tensors allocated and their bytes read. */
#include "io/io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_HEADER_BYTES 100000000ull /* the reference implementation's limit */

#ifdef OAR_HAVE_CJSON
#include <cjson/cJSON.h>

typedef struct st_entry {
    const char *name;
    oar_dtype dtype;
    int ndim;
    int64_t shape[OAR_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end;
} st_entry;

/* safetensors dtypes that oar has no type for: such files are valid but unsupported. */
static bool other_st_dtype(const char *name) {
    static const char *const others[] = {"F6_E2M3", "F6_E3M2", "F4", "C64"};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        if (!strcmp(name, others[i])) return true;
    return false;
}

static bool json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double x = v->valuedouble;
    if (!isfinite(x) || x < 0 || x > 9007199254740992.0 || floor(x) != x) return false;
    *out = (uint64_t)x;
    return true;
}

static const char *json_kind(const cJSON *v) {
    if (!v) return "nothing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an unknown value";
}

static oar_status parse_metadata(const oar_io_source *s, const cJSON *meta, oar_tensor_dict **d_meta, int n) {
    int n_meta = 0;
    if (meta && !cJSON_IsNull(meta)) {
        if (!cJSON_IsObject(meta))
            return oar_io_fail(s, OAR_ERR_FORMAT, "\"__metadata__\" is %s; expected an object of strings",
                               json_kind(meta));
        for (const cJSON *c = meta->child; c; c = c->next) {
            if (!cJSON_IsString(c) || !c->valuestring)
                return oar_io_fail(s, OAR_ERR_FORMAT, "metadata '%.200s' is %s; metadata values must be strings",
                                   c->string ? c->string : "", json_kind(c));
            n_meta += !oar_io_is_checksum_key(c->string); /* checksums are oar's, not the caller's */
        }
    }
    oar_tensor_dict *d = oar_dict_alloc(n, n_meta);
    if (!d) return oar_io_fail(s, OAR_ERR_OOM, "out of memory for %d tensors", n);
    *d_meta = d;
    int i = 0;
    if (n_meta)
        for (const cJSON *c = meta->child; c; c = c->next) {
            if (oar_io_is_checksum_key(c->string)) continue;
            d->meta_keys[i] = oar_io_strdup(c->string ? c->string : "");
            d->meta_values[i] = oar_io_strdup(c->valuestring);
            if (!d->meta_keys[i] || !d->meta_values[i]) return oar_io_fail(s, OAR_ERR_OOM, "out of memory for metadata");
            i++;
        }
    return OAR_OK;
}

/* The three fields of a tensor entry; unknown fields are ignored as by the reference reader,
 * a repeated field is an error. */
static oar_status parse_entry(const oar_io_source *s, const cJSON *e, st_entry *out) {
    const char *name = e->string ? e->string : "";
    out->name = name;
    if (!cJSON_IsObject(e))
        return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s' is %s; expected an object with dtype, shape and "
                                              "data_offsets", name, json_kind(e));
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *c = e->child; c; c = c->next) {
        const cJSON **slot = !c->string ? NULL : !strcmp(c->string, "dtype") ? &dtype
                           : !strcmp(c->string, "shape") ? &shape : !strcmp(c->string, "data_offsets") ? &offs : NULL;
        if (!slot) continue;
        if (*slot) return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s' has two '%s' fields", name, c->string);
        *slot = c;
    }
    if (!cJSON_IsString(dtype) || !dtype->valuestring)
        return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': expected a string 'dtype', got %s", name, json_kind(dtype));
    if (!oar_st_dtype_parse(dtype->valuestring, &out->dtype)) {
        bool known = other_st_dtype(dtype->valuestring);
        return oar_io_fail(s, known ? OAR_ERR_UNSUPPORTED : OAR_ERR_FORMAT,
                           "tensor '%.200s' has %s dtype '%.40s'; oar reads F32, F64, F16, BF16, I8, U8, I16, U16, "
                           "I32, U32, I64, U64 and BOOL",
                           name, known ? "the safetensors" : "the unknown", dtype->valuestring);
    }
    if (!cJSON_IsArray(shape))
        return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': expected a 'shape' array, got %s", name, json_kind(shape));
    int nd = cJSON_GetArraySize(shape);
    if (nd > OAR_MAX_DIMS)
        return oar_io_fail(s, OAR_ERR_UNSUPPORTED, "tensor '%.200s' has %d dims; oar supports at most %d", name, nd,
                           OAR_MAX_DIMS);
    out->ndim = 0;
    for (const cJSON *c = shape->child; c; c = c->next) {
        uint64_t v;
        if (!json_uint(c, &v))
            return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': shape[%d] is not a non-negative integer", name,
                               out->ndim);
        out->shape[out->ndim++] = (int64_t)v;
    }
    if (!oar_io_shape_numel(out->shape, out->ndim, &out->numel))
        return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': the shape has too many elements", name);
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &out->begin) ||
        !json_uint(offs->child->next, &out->end))
        return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': expected 'data_offsets' [begin, end] of two "
                                              "non-negative integers", name);
    uint64_t need = (uint64_t)out->numel * oar_dtypes[out->dtype].size;
    if (out->end < out->begin || out->end - out->begin != need) {
        char sh[160];
        oar_format_shape(out->shape, out->ndim, sh, sizeof sh);
        return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': data_offsets [%llu, %llu] do not hold the %llu bytes "
                                              "that shape %s of %s needs", name, (unsigned long long)out->begin,
                           (unsigned long long)out->end, (unsigned long long)need, sh, dtype->valuestring);
    }
    return OAR_OK;
}

/* Each tensor whose checksum the metadata records must have it. A malformed checksum is a
 * format error; a tensor without one (older files, other writers) is not checked. */
static oar_status verify_checksums(const oar_io_source *s, const cJSON *meta, oar_tensor_dict *d) {
    if (!meta || !cJSON_IsObject(meta) || !oar_io_verify_checksums()) return OAR_OK;
    for (int i = 0; i < d->n; i++) {
        size_t len = strlen(OAR_IO_CRC_PREFIX) + strlen(d->names[i]) + 1;
        char *key = malloc(len);
        if (!key) return oar_io_fail(s, OAR_ERR_OOM, "out of memory checking checksums");
        snprintf(key, len, OAR_IO_CRC_PREFIX "%s", d->names[i]);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(meta, key);
        free(key);
        if (!c) continue;
        uint32_t want, got;
        if (!oar_io_parse_crc(c->valuestring, &want))
            return oar_io_fail(s, OAR_ERR_FORMAT, "metadata '" OAR_IO_CRC_PREFIX "%.200s' is '%.40s'; expected the "
                                                  "tensor's CRC32C as 8 lower-case hex digits", d->names[i],
                               c->valuestring);
        oar_status st = oar_io_tensor_crc32c(d->tensors[i], &got);
        if (st != OAR_OK) return st;
        if (got != want)
            return oar_io_fail(s, OAR_ERR_FORMAT,
                               "tensor '%.200s' is damaged: its data has CRC32C %08x, but the file recorded %08x when "
                               "it was written (a flipped bit or a bad copy); restore the file from a good copy, or, "
                               "to load it anyway, set OAR_SKIP_CHECKSUM=1 or call oar_set_verify_checksums(false)",
                               d->names[i], (unsigned)got, (unsigned)want);
    }
    return OAR_OK;
}

static int cmp_offsets(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The tensors must tile [0, data_size) exactly. */
static oar_status check_layout(const oar_io_source *s, st_entry *e, int n, uint64_t data_size) {
    qsort(e, (size_t)n, sizeof *e, cmp_offsets);
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].end > data_size)
            return oar_io_fail(s, OAR_ERR_FORMAT, "tensor '%.200s': data_offsets [%llu, %llu] reach past the end of the "
                                                  "%llu-byte data section (truncated file?)", e[i].name,
                               (unsigned long long)e[i].begin, (unsigned long long)e[i].end,
                               (unsigned long long)data_size);
        if (e[i].begin < pos)
            return oar_io_fail(s, OAR_ERR_FORMAT, "tensors '%.200s' and '%.200s' overlap in the data section",
                               e[i - 1].name, e[i].name);
        if (e[i].begin > pos)
            return oar_io_fail(s, OAR_ERR_FORMAT, "bytes [%llu, %llu) of the data section belong to no tensor",
                               (unsigned long long)pos, (unsigned long long)e[i].begin);
        pos = e[i].end;
    }
    if (pos != data_size)
        return oar_io_fail(s, OAR_ERR_FORMAT, "the data section has %llu bytes after the last tensor ends",
                           (unsigned long long)(data_size - pos));
    return OAR_OK;
}

static oar_status read_header(const oar_io_source *s, char **out, uint64_t *hlen) {
    unsigned char len8[8];
    if (s->size < 8)
        return oar_io_fail(s, OAR_ERR_FORMAT, "the file has %llu bytes; a safetensors file starts with an 8-byte "
                                              "header length", (unsigned long long)s->size);
    oar_status st = oar_io_source_read(s, 0, len8, 8);
    if (st != OAR_OK) return st;
    *hlen = oar_io_get_le64(len8);
    if (*hlen > s->size - 8)
        return oar_io_fail(s, OAR_ERR_FORMAT, "the header length %llu is larger than the %llu bytes after it "
                                              "(truncated file, or not safetensors)", (unsigned long long)*hlen,
                           (unsigned long long)(s->size - 8));
    if (*hlen > MAX_HEADER_BYTES)
        return oar_io_fail(s, OAR_ERR_FORMAT, "the header length %llu exceeds the limit of %llu bytes",
                           (unsigned long long)*hlen, MAX_HEADER_BYTES);
    if (*hlen < 2) return oar_io_fail(s, OAR_ERR_FORMAT, "the header has %llu bytes; expected a JSON object",
                                      (unsigned long long)*hlen);
    char *h = malloc((size_t)*hlen + 1);
    if (!h) return oar_io_fail(s, OAR_ERR_OOM, "out of memory for a %llu-byte header", (unsigned long long)*hlen);
    if ((st = oar_io_source_read(s, 8, h, (size_t)*hlen)) != OAR_OK) {
        free(h);
        return st;
    }
    h[*hlen] = '\0';
    *out = h;
    if (h[0] != '{') return oar_io_fail(s, OAR_ERR_FORMAT, "the header does not start with '{' (not safetensors?)");
    if (!oar_io_valid_utf8(h, (size_t)*hlen)) return oar_io_fail(s, OAR_ERR_FORMAT, "the header is not valid UTF-8");
    return OAR_OK;
}

static oar_status parse_json(const oar_io_source *s, const char *h, uint64_t hlen, cJSON **root) {
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(h, (size_t)hlen, &end, 0);
    if (!*root) {
        size_t at = end && end >= h && end <= h + hlen ? (size_t)(end - h) : 0;
        return oar_io_fail(s, OAR_ERR_FORMAT, "the header is not valid JSON (error near byte %zu of %llu: \"%.24s\")",
                           at, (unsigned long long)hlen, h + at);
    }
    for (const char *p = end; p < h + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return oar_io_fail(s, OAR_ERR_FORMAT, "the header has data after its JSON object (at byte %zu)",
                               (size_t)(p - h));
    if (!cJSON_IsObject(*root)) return oar_io_fail(s, OAR_ERR_FORMAT, "the header is not a JSON object");
    return OAR_OK;
}

static oar_tensor_dict *load(oar_io_source *s) {
    char *h = NULL;
    uint64_t hlen = 0;
    cJSON *root = NULL;
    st_entry *e = NULL;
    oar_tensor_dict *d = NULL;
    oar_status st = read_header(s, &h, &hlen);
    if (st == OAR_OK) st = parse_json(s, h, hlen, &root);
    if (st != OAR_OK) goto done;
    const cJSON *meta = NULL;
    int n = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (c->string && !strcmp(c->string, "__metadata__")) {
            if (meta) {
                st = oar_io_fail(s, OAR_ERR_FORMAT, "the header has two \"__metadata__\" entries");
                goto done;
            }
            meta = c;
        } else {
            n++;
        }
    }
    e = malloc(sizeof(*e) * (size_t)(n ? n : 1));
    if (!e) {
        st = oar_io_fail(s, OAR_ERR_OOM, "out of memory for %d tensor entries", n);
        goto done;
    }
    int k = 0;
    for (const cJSON *c = root->child; c && st == OAR_OK; c = c->next)
        if (c != meta) st = parse_entry(s, c, &e[k++]);
    if (st == OAR_OK) st = check_layout(s, e, n, s->size - 8 - hlen);
    if (st == OAR_OK) st = parse_metadata(s, meta, &d, n);
    for (int i = 0; i < n && st == OAR_OK; i++) {
        d->names[i] = oar_io_strdup(e[i].name);
        d->tensors[i] = d->names[i] ? oar_tensor_new(e[i].dtype, e[i].shape, e[i].ndim) : NULL;
        if (!d->tensors[i]) st = oar_io_fail(s, OAR_ERR_OOM, "out of memory for tensor '%.200s'", e[i].name);
    }
    if (st == OAR_OK) st = oar_dict_index(d, s->who, s->label);
    for (int i = 0; i < n && st == OAR_OK; i++)
        st = oar_io_source_read_tensor(s, 8 + hlen + e[i].begin, d->tensors[i], false, e[i].name);
    if (st == OAR_OK) st = verify_checksums(s, meta, d);
done:
    free(e);
    cJSON_Delete(root);
    free(h);
    if (st != OAR_OK) {
        oar_dict_free(d);
        return NULL;
    }
    return d;
}

oar_tensor_dict *oar_safetensors_load(const char *path) {
    oar_io_source s;
    if (oar_io_source_open_file(&s, path, "safetensors_load") != OAR_OK) return NULL;
    oar_tensor_dict *d = load(&s);
    oar_io_source_close(&s);
    return d;
}

oar_tensor_dict *oar_safetensors_load_buffer(const void *data, size_t size) {
    if (!data && size) {
        oar_error(OAR_ERR_INVALID_ARG, "safetensors_load_buffer: data is NULL for %zu bytes", size);
        return NULL;
    }
    oar_io_source s;
    oar_io_source_open_memory(&s, data, size, "safetensors_load_buffer");
    return load(&s);
}

#else /* !OAR_HAVE_CJSON */

static void *no_cjson(const char *who) {
    oar_error(OAR_ERR_UNSUPPORTED, "%s: oar was built without cJSON, which safetensors headers need; install cJSON "
                                   "and reconfigure (.npy files work without it)", who);
    return NULL;
}
oar_tensor_dict *oar_safetensors_load(const char *path) { return no_cjson("safetensors_load"); }
oar_tensor_dict *oar_safetensors_load_buffer(const void *data, size_t size) {
    return no_cjson("safetensors_load_buffer");
}

#endif
