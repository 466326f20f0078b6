/* The .npy header: a Python literal dict with exactly the keys 'descr', 'fortran_order' and
 * 'shape'. This is not JSON (single quotes, tuples, True/False), so it has its own small,
 * strict parser that never reads outside the n bytes it is given. */
#include "io/npy.h"

#include <stdio.h>

typedef struct cursor {
    const oar_io_source *s;
    const char *p, *end, *start;
} cursor;

static oar_status bad(cursor *c, const char *what) {
    return oar_io_fail(c->s, OAR_ERR_FORMAT, "bad .npy header: %s at byte %zu of \"%.80s\"", what,
                       (size_t)(c->p - c->start), c->start);
}

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool accept(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static bool accept_word(cursor *c, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, w, n)) {
        c->p += n;
        return true;
    }
    return false;
}

/* A quoted string without escapes, copied into buf (cap bytes). */
static oar_status parse_str(cursor *c, char *buf, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return bad(c, "expected a quoted string");
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n') return bad(c, "unsupported character in a string");
        if (n + 1 >= cap) return bad(c, "string too long");
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return bad(c, "unterminated string");
    c->p++;
    buf[n] = '\0';
    return OAR_OK;
}

static oar_status parse_shape(cursor *c, oar_npy_header *h) {
    if (!accept(c, '(')) return bad(c, "expected '(' to start the shape tuple");
    h->ndim = 0;
    for (;;) {
        if (accept(c, ')')) break;
        skip_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return bad(c, "expected a non-negative integer in the shape");
        int64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (INT64_MAX / 16 - 9) / 10) return bad(c, "shape entry too large");
            v = v * 10 + (*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 long literals */
        if (h->ndim == OAR_MAX_DIMS)
            return oar_io_fail(c->s, OAR_ERR_UNSUPPORTED, "the array has more than %d dims, the most oar supports",
                               OAR_MAX_DIMS);
        h->shape[h->ndim++] = v;
        if (accept(c, ',')) continue;
        if (accept(c, ')')) break;
        return bad(c, "expected ',' or ')' in the shape");
    }
    if (!oar_io_shape_numel(h->shape, h->ndim, &h->numel))
        return oar_io_fail(c->s, OAR_ERR_FORMAT, "the shape has too many elements");
    return OAR_OK;
}

static const struct {
    char kind;
    int size;
    oar_dtype dt;
} kinds[] = {{'f', 2, OAR_F16}, {'f', 4, OAR_F32}, {'f', 8, OAR_F64}, {'i', 1, OAR_I8}, {'u', 1, OAR_U8},
             {'i', 4, OAR_I32}, {'i', 8, OAR_I64}, {'b', 1, OAR_BOOL}, {'i', 2, OAR_I16}, {'u', 2, OAR_U16},
             {'u', 4, OAR_U32}, {'u', 8, OAR_U64}};

static oar_status parse_descr(cursor *c, const char *d, oar_npy_header *h) {
    char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return oar_io_fail(c->s, OAR_ERR_UNSUPPORTED, "dtype '%s' is not a simple NumPy type oar reads "
                                                      "(f2, f4, f8, i1, u1, i2, u2, i4, u4, i8, u8, b1)", d);
    char kind = d[1];
    int size = 0;
    const char *q = d + 2;
    for (; *q >= '0' && *q <= '9' && size < 1000; q++) size = size * 10 + (*q - '0');
    for (size_t i = 0; *q == '\0' && i < sizeof kinds / sizeof *kinds; i++) {
        if (kinds[i].kind != kind || kinds[i].size != size) continue;
        if (order == '|' && size > 1) return oar_io_fail(c->s, OAR_ERR_FORMAT, "dtype '%s' has no byte order", d);
        h->dtype = kinds[i].dt;
        h->big_endian = order == '>' || (order == '=' && !oar_io_host_is_le());
        return OAR_OK;
    }
    return oar_io_fail(c->s, OAR_ERR_UNSUPPORTED, "dtype '%s' has no oar equivalent; oar reads f2, f4, f8, i1, u1, "
                                                  "i2, u2, i4, u4, i8, u8 and b1", d);
}

oar_status oar_npy_parse_header(const oar_io_source *s, const char *text, size_t n, oar_npy_header *h) {
    cursor c = {s, text, text + n, text};
    memset(h, 0, sizeof *h);
    bool seen[3] = {false, false, false};
    char key[32], descr[32];
    oar_status st;
    if (!accept(&c, '{')) return bad(&c, "expected '{'");
    for (;;) {
        if (accept(&c, '}')) break;
        if ((st = parse_str(&c, key, sizeof key)) != OAR_OK) return st;
        int which = !strcmp(key, "descr") ? 0 : !strcmp(key, "fortran_order") ? 1 : !strcmp(key, "shape") ? 2 : -1;
        if (which < 0) return oar_io_fail(s, OAR_ERR_FORMAT, "bad .npy header: unexpected key '%s'", key);
        if (seen[which]) return oar_io_fail(s, OAR_ERR_FORMAT, "bad .npy header: the key '%s' appears twice", key);
        seen[which] = true;
        if (!accept(&c, ':')) return bad(&c, "expected ':'");
        skip_ws(&c);
        if (which == 0) {
            if (c.p < c.end && (*c.p == '[' || *c.p == '{'))
                return oar_io_fail(s, OAR_ERR_UNSUPPORTED, "structured NumPy dtypes are not supported");
            if ((st = parse_str(&c, descr, sizeof descr)) != OAR_OK) return st;
        } else if (which == 1) {
            if (accept_word(&c, "True")) h->fortran_order = true;
            else if (accept_word(&c, "False")) h->fortran_order = false;
            else return bad(&c, "expected True or False");
        } else if ((st = parse_shape(&c, h)) != OAR_OK) {
            return st;
        }
        if (accept(&c, ',')) continue;
        if (accept(&c, '}')) break;
        return bad(&c, "expected ',' or '}'");
    }
    skip_ws(&c);
    if (c.p != c.end) return bad(&c, "unexpected text after the dict");
    static const char *const names[3] = {"descr", "fortran_order", "shape"};
    for (int i = 0; i < 3; i++)
        if (!seen[i]) return oar_io_fail(s, OAR_ERR_FORMAT, "bad .npy header: the key '%s' is missing", names[i]);
    return parse_descr(&c, descr, h);
}

const char *oar_npy_descr(oar_dtype dt) {
    switch (dt) {
    case OAR_F32: return "<f4";
    case OAR_F64: return "<f8";
    case OAR_F16: return "<f2";
    case OAR_I8: return "|i1";
    case OAR_U8: return "|u1";
    case OAR_I32: return "<i4";
    case OAR_I64: return "<i8";
    case OAR_BOOL: return "|b1";
    case OAR_I16: return "<i2";
    case OAR_U16: return "<u2";
    case OAR_U32: return "<u4";
    case OAR_U64: return "<u8";
    default: return NULL;
    }
}
