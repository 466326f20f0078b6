/* The tensor dictionary returned by the loaders: named tensors in file order, a sorted name
 * index for lookups, and string metadata. */
#include "io/io.h"

#include <stdlib.h>

oar_tensor_dict *oar_dict_alloc(int n, int n_meta) {
    oar_tensor_dict *d = OAR_NEW(oar_tensor_dict);
    if (!d) return NULL;
    d->n = n;
    d->n_meta = n_meta;
    size_t nn = n ? (size_t)n : 1, nm = n_meta ? (size_t)n_meta : 1;
    d->names = oar_malloc(sizeof(char *) * nn);
    d->tensors = oar_malloc(sizeof(oar_tensor *) * nn);
    d->by_name = oar_malloc(sizeof(int) * nn);
    d->meta_keys = oar_malloc(sizeof(char *) * nm);
    d->meta_values = oar_malloc(sizeof(char *) * nm);
    if (!d->names || !d->tensors || !d->by_name || !d->meta_keys || !d->meta_values) {
        d->n = d->n_meta = 0;
        oar_dict_free(d);
        return NULL;
    }
    return d;
}

void oar_dict_free(oar_tensor_dict *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        free(d->names[i]);
        oar_tensor_unref(d->tensors[i]);
    }
    for (int i = 0; i < d->n_meta; i++) {
        free(d->meta_keys[i]);
        free(d->meta_values[i]);
    }
    free(d->names);
    free(d->tensors);
    free(d->by_name);
    free(d->meta_keys);
    free(d->meta_values);
    free(d);
}

/* qsort has no context argument, so the index is sorted through (name, index) pairs. */
typedef struct entry {
    const char *name;
    int index;
} entry;

static int cmp_entry(const void *a, const void *b) {
    const entry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

oar_status oar_dict_index(oar_tensor_dict *d, const char *who, const char *label) {
    int dup = oar_io_find_duplicate((const char *const *)d->meta_keys, d->n_meta);
    if (dup >= 0)
        return oar_error(OAR_ERR_FORMAT, "%s: %s: the metadata key '%.200s' appears twice", who, label,
                         d->meta_keys[dup]);
    if (d->n == 0) return OAR_OK;
    entry *e = malloc(sizeof(*e) * (size_t)d->n);
    if (!e) return oar_error(OAR_ERR_OOM, "%s: out of memory indexing %d tensors", who, d->n);
    for (int i = 0; i < d->n; i++) e[i] = (entry){d->names[i], i};
    qsort(e, (size_t)d->n, sizeof *e, cmp_entry);
    oar_status st = OAR_OK;
    for (int i = 0; i < d->n; i++) {
        if (i && !strcmp(e[i].name, e[i - 1].name) && st == OAR_OK)
            st = oar_error(OAR_ERR_FORMAT, "%s: %s: the tensor name '%.200s' appears twice", who, label, e[i].name);
        d->by_name[i] = e[i].index;
    }
    free(e);
    return st;
}

int oar_dict_size(const oar_tensor_dict *d) { return d ? d->n : 0; }

oar_tensor *oar_dict_at(oar_tensor_dict *d, int i, const char **name) {
    if (!d || i < 0 || i >= d->n) {
        oar_error(OAR_ERR_INVALID_ARG, "dict_at: expected an index in [0, %d), got %d", d ? d->n : 0, i);
        return NULL;
    }
    if (name) *name = d->names[i];
    return d->tensors[i];
}

oar_tensor *oar_dict_get(oar_tensor_dict *d, const char *name) {
    if (!d || !name) return NULL;
    int lo = 0, hi = d->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(d->names[d->by_name[mid]], name);
        if (c == 0) return d->tensors[d->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *oar_dict_meta(const oar_tensor_dict *d, const char *key) {
    if (!d || !key) return NULL;
    for (int i = 0; i < d->n_meta; i++)
        if (!strcmp(d->meta_keys[i], key)) return d->meta_values[i];
    return NULL;
}

int oar_dict_meta_size(const oar_tensor_dict *d) { return d ? d->n_meta : 0; }

const char *oar_dict_meta_at(const oar_tensor_dict *d, int i, const char **key) {
    if (!d || i < 0 || i >= d->n_meta) {
        oar_error(OAR_ERR_INVALID_ARG, "dict_meta_at: expected an index in [0, %d), got %d", d ? d->n_meta : 0, i);
        return NULL;
    }
    if (key) *key = d->meta_keys[i];
    return d->meta_values[i];
}

/* safetensors dtype names, indexed by oar_dtype. */
static const char *const st_names[OAR_DTYPE_COUNT] = {
    [OAR_F32] = "F32", [OAR_F64] = "F64", [OAR_F16] = "F16", [OAR_BF16] = "BF16", [OAR_I8] = "I8",
    [OAR_U8] = "U8",   [OAR_I32] = "I32", [OAR_I64] = "I64", [OAR_BOOL] = "BOOL", [OAR_I16] = "I16",
    [OAR_U16] = "U16", [OAR_U32] = "U32", [OAR_U64] = "U64",
    /* float8 as safetensors names them; f4e2m1 and the 4- and 2-bit integers have no name
     * (safetensors' F4 is packed, two to a byte), so saving them is refused */
    [OAR_F8E4M3FN] = "F8_E4M3", [OAR_F8E4M3FNUZ] = "F8_E4M3FNUZ", [OAR_F8E5M2] = "F8_E5M2",
    [OAR_F8E5M2FNUZ] = "F8_E5M2FNUZ", [OAR_F8E8M0] = "F8_E8M0",
};
_Static_assert(sizeof st_names / sizeof *st_names == OAR_DTYPE_COUNT, "a safetensors name per dtype");

/* NULL for a dtype safetensors cannot hold */
const char *oar_st_dtype_name(oar_dtype dt) { return oar_dtype_valid(dt) ? st_names[dt] : "?"; }

bool oar_st_dtype_parse(const char *name, oar_dtype *dt) {
    for (int i = 0; i < OAR_DTYPE_COUNT; i++)
        if (st_names[i] && !strcmp(name, st_names[i])) {
            *dt = (oar_dtype)i;
            return true;
        }
    return false;
}
