/* TensorProto -> tensor: dims checked, data from raw_data (little-endian bytes), the typed
 * fields (float_data, int32_data, int64_data, double_data, uint64_data: uint32 and uint64; int32_data:
 * the narrower integers, float16/bfloat16 bits and bool, per onnx.proto; the float8 codes one
 * per int32, the 4- and 2-bit types packed as in raw_data) or an external data file next to the
 * model, each checked against the size the dims imply (packed for the 4- and 2-bit types, which
 * the tensor then holds one per byte: onnx_lowbit.c). */
#include "io/onnx/onnx_internal.h"
#include "io/onnx/onnx_lowbit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OX_MAX_TENSOR_BYTES ((int64_t)1 << 36) /* 64 GiB: above is an absurd shape */

static const char *const onnx_type_names[] = {
    "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool", "float16",
    "double", "uint32", "uint64", "complex64", "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz",
    "float8e5m2", "float8e5m2fnuz", "uint4", "int4", "float4e2m1", "float8e8m0", "uint2", "int2"};

const char *ox_onnx_type_name(int32_t t) {
    return t >= 0 && t < (int32_t)(sizeof onnx_type_names / sizeof *onnx_type_names) ? onnx_type_names[t]
                                                                                      : "unknown";
}

bool ox_dtype_from_onnx(int32_t t, oar_dtype *out) {
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = OAR_F32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = OAR_F64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = OAR_F16; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = OAR_BF16; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *out = OAR_I8; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *out = OAR_U8; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = OAR_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = OAR_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = OAR_BOOL; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *out = OAR_I16; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *out = OAR_U16; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: *out = OAR_U32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: *out = OAR_U64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FN: *out = OAR_F8E4M3FN; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FNUZ: *out = OAR_F8E4M3FNUZ; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2: *out = OAR_F8E5M2; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2FNUZ: *out = OAR_F8E5M2FNUZ; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E8M0: *out = OAR_F8E8M0; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT4E2M1: *out = OAR_F4E2M1; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT4: *out = OAR_I4; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT4: *out = OAR_U4; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT2: *out = OAR_I2; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT2: *out = OAR_U2; return true;
    default: return false;
    }
}

/* Reads [offset, offset + length) of dir/location into dst (exactly nbytes). */
static bool read_external(const Onnx__TensorProto *t, const char *dir, const char *what, void *dst, size_t nbytes) {
    const char *location = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value) continue;
        char *end = NULL;
        if (!strcmp(e->key, "location")) location = e->value;
        else if (!strcmp(e->key, "offset")) offset = strtoll(e->value, &end, 10);
        else if (!strcmp(e->key, "length")) length = strtoll(e->value, &end, 10);
        if (end && (*end || offset < 0)) {
            oar_error(OAR_ERR_FORMAT, "onnx: %s: external data %s '%s' is not a non-negative integer", what, e->key,
                      e->value);
            return false;
        }
    }
    if (!location || !*location) {
        oar_error(OAR_ERR_FORMAT, "onnx: %s: external data without a 'location' key", what);
        return false;
    }
    if (location[0] == '/' || strstr(location, "..")) {
        oar_error(OAR_ERR_FORMAT, "onnx: %s: external data location '%s' leaves the model's directory; expected a "
                                  "path relative to it", what, location);
        return false;
    }
    if (!dir) {
        oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s: its data is in an external file '%s', but the model was loaded "
                                       "from memory without a directory; load it with oar_onnx_load(path)",
                  what, location);
        return false;
    }
    if (length >= 0 && (uint64_t)length != nbytes) {
        oar_error(OAR_ERR_FORMAT, "onnx: %s: external data length %lld does not match its shape and dtype (%zu "
                                  "bytes)", what, (long long)length, nbytes);
        return false;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, location);
    FILE *f = fopen(path, "rb");
    if (!f) {
        oar_error(OAR_ERR_IO, "onnx: %s: cannot open its external data file '%s'", what, path);
        return false;
    }
    bool ok = fseeko(f, (off_t)offset, SEEK_SET) == 0 && fread(dst, 1, nbytes, f) == nbytes;
    fclose(f);
    if (!ok)
        oar_error(OAR_ERR_FORMAT, "onnx: %s: external data file '%s' is too short for %zu bytes at offset %lld",
                  what, path, nbytes, (long long)offset);
    return ok;
}

/* Whether the external data file holds nbytes at the given offset (checked before allocating). */
static bool external_fits(const Onnx__TensorProto *t, const char *dir, size_t nbytes, const char *what) {
    const char *location = NULL;
    long long offset = 0;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value) continue;
        if (!strcmp(e->key, "location")) location = e->value;
        else if (!strcmp(e->key, "offset")) offset = strtoll(e->value, NULL, 10);
    }
    if (!dir || !location || location[0] == '/' || strstr(location, "..") || offset < 0)
        return true; /* read_external reports these */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, location);
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_size < offset || (uint64_t)(sb.st_size - offset) < nbytes) {
        if (stat(path, &sb) != 0) return true; /* read_external names the missing file */
        oar_error(OAR_ERR_FORMAT, "onnx: %s: external data file '%s' has %lld bytes, too few for %zu at offset %lld",
                  what, path, (long long)sb.st_size, nbytes, offset);
        return false;
    }
    return true;
}

/* Copies a typed field of n values into the tensor, converting (float16/bfloat16 arrive as
 * their bits in int32_data). */
static bool copy_typed(const Onnx__TensorProto *t, oar_tensor *x, int64_t n, const char *what) {
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    size_t es = tr->size;
    char *dst = oar_tensor_ptr(x);
    size_t have;
    const char *field;
    switch (x->dtype) {
    case OAR_F32: have = t->n_float_data, field = "float_data"; break;
    case OAR_F64: have = t->n_double_data, field = "double_data"; break;
    case OAR_I64: have = t->n_int64_data, field = "int64_data"; break;
    case OAR_U32: case OAR_U64: have = t->n_uint64_data, field = "uint64_data"; break;
    default: have = t->n_int32_data, field = "int32_data"; break;
    }
    int bits = ox_elem_bits(x->dtype);
    int64_t want = bits < 8 ? (n + 8 / bits - 1) / (8 / bits) : n; /* sub-byte: 8 / bits per int32 */
    if ((int64_t)have != want) {
        oar_error(OAR_ERR_FORMAT, "onnx: %s: expected %lld values (its dims%s) in %s or raw_data, got %zu", what,
                  (long long)want, bits < 8 ? ", packed" : "", field, have);
        return false;
    }
    if (oar_dtype_is_lowbit(x->dtype)) { /* the codes' bits, one byte per int32 (packed below 8 bits) */
        uint8_t *bytes = malloc((size_t)want + 1);
        if (!bytes) {
            oar_error(OAR_ERR_OOM, "onnx: %s: out of memory", what);
            return false;
        }
        for (int64_t i = 0; i < want; i++) bytes[i] = (uint8_t)t->int32_data[i];
        if (bits < 8) ox_unpack(x->dtype, bytes, n, (uint8_t *)dst);
        else memcpy(dst, bytes, (size_t)n);
        free(bytes);
        return true;
    }
    for (int64_t i = 0; i < n; i++) {
        char *p = dst + (size_t)i * es;
        switch (x->dtype) {
        case OAR_F32: memcpy(p, &t->float_data[i], 4); break;
        case OAR_F64: memcpy(p, &t->double_data[i], 8); break;
        case OAR_I64: memcpy(p, &t->int64_data[i], 8); break;
        case OAR_F16:
        case OAR_BF16: {
            uint16_t bits = (uint16_t)t->int32_data[i];
            memcpy(p, &bits, 2);
            break;
        }
        case OAR_BOOL: *(uint8_t *)p = t->int32_data[i] != 0; break;
        case OAR_U32: case OAR_U64: tr->store_i64(p, (int64_t)t->uint64_data[i]); break; /* the bits; u32 keeps the low half */
        default: tr->store_i64(p, t->int32_data[i]); break;
        }
    }
    return true;
}

static void free_blob(void *data, void *ctx) {
    (void)ctx;
    free(data); /* protobuf-c's default allocator: malloc per bytes field */
}

oar_tensor *ox_tensor_from_proto(Onnx__TensorProto *t, const char *dir, const char *what, bool steal) {
    oar_dtype dt;
    if (!ox_dtype_from_onnx(t->data_type, &dt)) {
        oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s has dtype %s (%d); oar supports float, double, float16, bfloat16, "
                                       "the float8 and float4 types, int8, uint8, int16, uint16, int32, uint32, "
                                       "int64, uint64, int4, uint4, int2, uint2 and bool", what,
                  ox_onnx_type_name(t->data_type),
                  (int)t->data_type);
        return NULL;
    }
    if (t->segment) {
        oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s is a segment of a larger tensor; segmented tensors are not "
                                       "supported", what);
        return NULL;
    }
    if (t->n_dims > OAR_MAX_DIMS) {
        oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s has %zu dims; oar supports at most %d", what, t->n_dims,
                  OAR_MAX_DIMS);
        return NULL;
    }
    int64_t shape[OAR_MAX_DIMS], n = 1;
    size_t es = oar_dtypes[dt].size;
    for (size_t d = 0; d < t->n_dims; d++) {
        shape[d] = t->dims[d];
        if (shape[d] < 0 || (shape[d] && n > OX_MAX_TENSOR_BYTES / (int64_t)es / shape[d])) {
            oar_error(OAR_ERR_FORMAT, "onnx: %s: dim %zu is %lld; expected a size in [0, %lld] with the whole "
                                      "tensor under %lld bytes", what, d, (long long)shape[d],
                      (long long)(OX_MAX_TENSOR_BYTES / (int64_t)es), (long long)OX_MAX_TENSOR_BYTES);
            return NULL;
        }
        n *= shape[d];
    }
    /* nbytes: in the file (4- and 2-bit types packed); the tensor holds n * es */
    size_t nbytes = ox_packed_bytes(dt, n);
    bool packed = nbytes != (size_t)n * es;
    bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (steal && !external && t->has_raw_data && nbytes && t->raw_data.len == nbytes && dt != OAR_BOOL && !packed &&
        (uintptr_t)t->raw_data.data % es == 0) { /* the tensor takes the parsed bytes: no copy */
        oar_tensor *x = oar_from_blob(t->raw_data.data, shape, (int)t->n_dims, dt, free_blob, NULL);
        if (!x) return NULL;
        oar_scope_forget(x); /* an internal reference, like oar_tensor_new's */
        /* oar owns these bytes now: tracked, so the conv kernels keep their weights packed
         * across calls (untracked, resnet18 reordered every weight on every call) */
        oar_storage_track(x->storage);
        t->raw_data.data = NULL;
        t->raw_data.len = 0;
        return x;
    }
    /* the data's size is checked against the dims before anything is allocated */
    if (!external && t->has_raw_data && t->raw_data.len != nbytes) {
        oar_error(OAR_ERR_FORMAT, "onnx: %s: raw_data has %zu bytes, expected %zu (%lld %s values)", what,
                  t->raw_data.len, nbytes, (long long)n, ox_onnx_type_name(t->data_type));
        return NULL;
    }
    if (!external && !t->has_raw_data) {
        size_t have = dt == OAR_F32 ? t->n_float_data : dt == OAR_F64 ? t->n_double_data
                    : dt == OAR_I64 ? t->n_int64_data : dt == OAR_U32 || dt == OAR_U64 ? t->n_uint64_data
                    : t->n_int32_data;
        int64_t per = packed ? 8 / ox_elem_bits(dt) : 1, want = (n + per - 1) / per;
        if ((int64_t)have != want) {
            oar_error(OAR_ERR_FORMAT, "onnx: %s: expected %lld values (its dims%s) in raw_data or a typed field, got "
                                      "%zu", what, (long long)want, packed ? ", packed" : "", have);
            return NULL;
        }
    }
    if (external && !external_fits(t, dir, nbytes, what)) return NULL;
    oar_tensor *x = oar_tensor_new(dt, shape, (int)t->n_dims);
    if (!x) return NULL;
    bool ok;
    if (packed && (external || t->has_raw_data)) { /* unpacked into one byte per element */
        uint8_t *buf = malloc(nbytes + 1);
        ok = buf != NULL;
        if (!ok) oar_error(OAR_ERR_OOM, "onnx: %s: out of memory", what);
        if (ok && external) ok = read_external(t, dir, what, buf, nbytes);
        else if (ok) {
            ok = t->raw_data.len == nbytes;
            if (ok) memcpy(buf, t->raw_data.data, nbytes);
            else oar_error(OAR_ERR_FORMAT, "onnx: %s: raw_data has %zu bytes, expected %zu (%lld %s values, packed)",
                           what, t->raw_data.len, nbytes, (long long)n, ox_onnx_type_name(t->data_type));
        }
        if (ok) ox_unpack(dt, buf, n, (uint8_t *)oar_tensor_ptr(x));
        free(buf);
    } else if (external) ok = read_external(t, dir, what, oar_tensor_ptr(x), nbytes);
    else if (t->has_raw_data) {
        ok = t->raw_data.len == nbytes;
        if (ok && nbytes) memcpy(oar_tensor_ptr(x), t->raw_data.data, nbytes);
        else if (!ok) oar_error(OAR_ERR_FORMAT, "onnx: %s: raw_data has %zu bytes, expected %zu (%lld %s values)", what,
                       t->raw_data.len, nbytes, (long long)n, ox_onnx_type_name(t->data_type));
        if (ok && dt == OAR_BOOL) /* any nonzero byte is true; oar's bools are 0 or 1 */
            for (size_t i = 0; i < nbytes; i++) ((uint8_t *)oar_tensor_ptr(x))[i] = ((uint8_t *)oar_tensor_ptr(x))[i] != 0;
    } else ok = copy_typed(t, x, n, what);
    if (!ok) {
        oar_tensor_unref(x);
        return NULL;
    }
    return x;
}

uint8_t *ox_read_whole(const char *who, const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        oar_error(OAR_ERR_IO, "%s: cannot open '%s'", who, path);
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    bool oom = false, err = false;
    for (;;) {
        if (n == cap) {
            uint8_t *b = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
            if (!b) {
                oom = true;
                break;
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            err = ferror(f) != 0;
            break;
        }
    }
    fclose(f);
    if (oom || err) { /* never parse part of a file */
        free(buf);
        oar_error(oom ? OAR_ERR_OOM : OAR_ERR_IO, "%s: %s reading '%s'", who, oom ? "out of memory" : "an I/O error",
                  path);
        return NULL;
    }
    *size = n;
    return buf;
}

oar_tensor *oar_onnx_tensor_load(const char *path) {
    oar_init();
    if (!path) {
        oar_error(OAR_ERR_INVALID_ARG, "onnx_tensor_load: expected a path, got NULL");
        return NULL;
    }
    size_t n = 0;
    uint8_t *buf = ox_read_whole("onnx_tensor_load", path, &n);
    if (!buf) return NULL;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, n, buf);
    free(buf);
    if (!t) {
        oar_error(OAR_ERR_FORMAT, "onnx_tensor_load: '%s' is not a valid TensorProto (malformed or truncated "
                                  "protobuf)", path);
        return NULL;
    }
    char what[600], dir[4096];
    snprintf(what, sizeof what, "tensor file '%s'", path);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    oar_tensor *x = ox_tensor_from_proto(t, dir, what, false);
    onnx__tensor_proto__free_unpacked(t, NULL);
    return x ? oar_track(x) : NULL;
}
