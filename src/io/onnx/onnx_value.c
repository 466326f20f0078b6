/* oar_onnx_value_load: ONNX test data of sequence and optional values. SequenceProto and
 * OptionalProto live in onnx-data.proto, which oar does not vendor; the two messages are small,
 * so their wire format is read here directly (the tensors inside with protobuf-c's TensorProto):
 *   SequenceProto { string name = 1; int32 elem_type = 2; repeated TensorProto tensor_values = 3;
 *                   sparse_tensor_values = 4; sequence_values = 5; map_values = 6; optional_values = 7 }
 *   OptionalProto { string name = 1; int32 elem_type = 2; TensorProto tensor_value = 3;
 *                   sparse_tensor_value = 4; SequenceProto sequence_value = 5; map_value = 6; optional_value = 7 }
 * elem_type: 0 undefined (an empty optional), 1 tensor, 2 sparse tensor, 3 sequence, 4 map, 5 optional. */
#include "io/onnx/onnx_internal.h"
#include "oar/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 4096

typedef struct wire {
    const uint8_t *p, *end;
} wire;

static bool varint(wire *w, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && w->p < w->end; s += 7) {
        uint8_t b = *w->p++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* The next field: its number, and for length-delimited ones the bytes. false at the end or on
 * malformed data (*bad set). */
static bool field(wire *w, int *num, const uint8_t **data, size_t *len, uint64_t *ival, bool *bad) {
    if (w->p >= w->end) return false;
    uint64_t key;
    *bad = true;
    if (!varint(w, &key)) return false;
    *num = (int)(key >> 3);
    *data = NULL;
    switch (key & 7) {
    case 0:
        if (!varint(w, ival)) return false;
        break;
    case 1:
        if (w->end - w->p < 8) return false;
        w->p += 8;
        break;
    case 2: {
        uint64_t n;
        if (!varint(w, &n) || n > (uint64_t)(w->end - w->p)) return false;
        *data = w->p;
        *len = (size_t)n;
        w->p += n;
        break;
    }
    case 5:
        if (w->end - w->p < 4) return false;
        w->p += 4;
        break;
    default: return false;
    }
    *bad = false;
    return true;
}

static oar_tensor *tensor_of(const uint8_t *data, size_t len, const char *path) {
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, data);
    if (!t) {
        oar_error(OAR_ERR_FORMAT, "onnx_value_load: '%s': a tensor inside is malformed protobuf", path);
        return NULL;
    }
    char what[600];
    snprintf(what, sizeof what, "a tensor in '%s'", path);
    oar_tensor *x = ox_tensor_from_proto(t, NULL, what, false);
    onnx__tensor_proto__free_unpacked(t, NULL);
    return x ? oar_track(x) : NULL;
}

static oar_status malformed(const char *path, const char *what) {
    return oar_error(OAR_ERR_FORMAT, "onnx_value_load: '%s' is not a valid %s (malformed or truncated protobuf)", path,
                     what);
}

static oar_status unsupported_elem(const char *path, int num) {
    return oar_error(OAR_ERR_UNSUPPORTED, "onnx_value_load: '%s' holds %s; oar reads sequences of tensors and "
                                          "optionals of a tensor or of such a sequence", path,
                     num == 4 ? "sparse tensors" : num == 6 ? "maps" : "nested sequences or optionals");
}

static oar_status read_sequence(const uint8_t *data, size_t len, const char *path, oar_onnx_value *out) {
    wire w = {data, data + len};
    int num;
    const uint8_t *d;
    size_t n;
    uint64_t iv;
    bool bad = false;
    out->kind = OAR_ONNX_SEQUENCE;
    while (field(&w, &num, &d, &n, &iv, &bad)) {
        if (num >= 4 && num <= 7 && d) return unsupported_elem(path, num);
        if (num != 3 || !d) continue;
        if (out->n == MAX_ITEMS)
            return oar_error(OAR_ERR_UNSUPPORTED, "onnx_value_load: '%s' has more than %d tensors", path, MAX_ITEMS);
        oar_tensor **g = realloc(out->items, sizeof *g * (size_t)(out->n + 1));
        if (!g) return oar_error(OAR_ERR_OOM, "onnx_value_load: out of memory");
        out->items = g;
        if (!(out->items[out->n] = tensor_of(d, n, path))) return oar_last_status();
        if (out->n && out->items[out->n]->dtype != out->items[0]->dtype)
            return oar_error(OAR_ERR_DTYPE, "onnx_value_load: '%s': tensor %d is %s, tensor 0 %s; a sequence's "
                                            "tensors share one dtype", path, out->n,
                             oar_dtype_name(out->items[out->n]->dtype), oar_dtype_name(out->items[0]->dtype));
        out->n++;
    }
    return bad ? malformed(path, "SequenceProto") : OAR_OK;
}

static oar_status read_optional(const uint8_t *data, size_t len, const char *path, oar_onnx_value *out) {
    wire w = {data, data + len};
    int num;
    const uint8_t *d;
    size_t n;
    uint64_t iv;
    bool bad = false;
    out->kind = OAR_ONNX_NONE;
    while (field(&w, &num, &d, &n, &iv, &bad)) {
        if ((num == 4 || num == 6 || num == 7) && d) return unsupported_elem(path, num);
        if (num == 3 && d) {
            oar_onnx_value_clear(out);
            out->kind = OAR_ONNX_TENSOR;
            if (!(out->tensor = tensor_of(d, n, path))) return oar_last_status();
        } else if (num == 5 && d) {
            oar_onnx_value_clear(out);
            oar_status st = read_sequence(d, n, path, out);
            if (st != OAR_OK) return st;
        }
    }
    return bad ? malformed(path, "OptionalProto") : OAR_OK;
}

oar_status oar_onnx_value_load(const char *path, int kind, oar_onnx_value *out) {
    oar_init();
    if (!path || !out || kind < 0 || kind > 3)
        return oar_error(OAR_ERR_INVALID_ARG, "onnx_value_load: expected a path, an output and a kind in [0, 3], got "
                                              "%s, %s, %d", path ? "a path" : "NULL", out ? "an output" : "NULL", kind);
    memset(out, 0, sizeof *out);
    if (kind == 0) {
        out->tensor = oar_onnx_tensor_load(path);
        return out->tensor ? OAR_OK : oar_last_status();
    }
    size_t n = 0;
    uint8_t *buf = ox_read_whole("onnx_value_load", path, &n);
    if (!buf) return oar_last_status();
    oar_status st = kind == 1 ? read_sequence(buf, n, path, out) : read_optional(buf, n, path, out);
    free(buf);
    if (st != OAR_OK) oar_onnx_value_clear(out);
    return st;
}
