/* Small helpers for file formats: UTF-8 validation, duplicate names, errno text, checked
 * shape products, byte swapping. */
#include "io/io.h"

#include <stdio.h>
#include <stdlib.h>

bool oar_io_valid_utf8(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned min;
        if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
        else return false;
        if (n - i < len) return false;
        unsigned cp = c & (0xFFu >> (len + 1));
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

typedef struct name_ref {
    const char *name;
    int index;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

int oar_io_find_duplicate(const char *const *names, int n) {
    if (n < 2) return -1;
    name_ref *refs = malloc(sizeof(*refs) * (size_t)n);
    if (!refs) { /* quadratic fallback needs no memory */
        for (int i = 1; i < n; i++)
            for (int j = 0; j < i; j++)
                if (!strcmp(names[i], names[j])) return i;
        return -1;
    }
    for (int i = 0; i < n; i++) refs[i] = (name_ref){names[i], i};
    qsort(refs, (size_t)n, sizeof(*refs), cmp_name_ref);
    int dup = -1;
    for (int i = 1; i < n && dup < 0; i++)
        if (!strcmp(refs[i].name, refs[i - 1].name)) dup = refs[i].index;
    free(refs);
    return dup;
}

char *oar_io_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = oar_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

const char *oar_io_strerror(int err, char *buf, size_t size) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    const char *m = strerror_r(err, buf, size);
    if (m != buf) snprintf(buf, size, "%s", m);
#else
    if (strerror_r(err, buf, size) != 0) snprintf(buf, size, "error %d", err);
#endif
    return buf;
}

bool oar_io_shape_numel(const int64_t *shape, int ndim, int64_t *numel) {
    const int64_t limit = INT64_MAX / 16;
    int64_t span = 1, n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return false;
        if (shape[d] == 0) {
            n = 0;
            continue;
        }
        if (span > limit / shape[d]) return false;
        span *= shape[d];
    }
    *numel = n ? span : 0;
    return true;
}

void oar_io_swap_bytes(void *data, size_t n, size_t itemsize) {
    if (itemsize < 2) return;
    unsigned char *p = data;
    for (size_t i = 0; i < n; i++, p += itemsize)
        for (size_t a = 0, b = itemsize - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}
