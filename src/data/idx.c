/* IDX files (the MNIST format): big-endian header, then unsigned bytes. Both files are read
 * into memory once and checked completely (magic, dims, size against the header) before the
 * dataset exists, so sample access cannot fail later. */
#include "data/data.h"

#include <stdlib.h>

typedef struct idx_dataset {
    oar_dataset base;
    oar_bytes images, labels;
    const uint8_t *pixels, *label_bytes;
    float scale[256]; /* byte -> byte / 255, exactly as a division would give */
} idx_dataset;

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Validates one file: unsigned-byte data with `ndim` dims whose sizes match the file size.
 * kind is "images" or "labels", for messages. */
static oar_status check_idx(const char *path, const oar_bytes *b, int ndim, const char *kind,
                            uint32_t dims[3]) {
    uint32_t want = 0x0800u | (uint32_t)ndim;
    if (b->size < 4)
        return oar_error(OAR_ERR_FORMAT, "idx: '%s' is truncated: %zu bytes, expected at least a "
                         "4-byte magic number for %s", path, b->size, kind);
    uint32_t magic = be32(b->data);
    if (magic != want) {
        const char *hint;
        if (magic == 0x0801u && ndim == 3) hint = "; this is a label file: are the arguments swapped?";
        else if (magic == 0x0803u && ndim == 1) hint = "; this is an image file: are the arguments swapped?";
        else if ((magic & 0xFFFF0000u) == 0) hint = "; an IDX file, but of another data type or rank";
        else hint = "; this is not an IDX file";
        return oar_error(OAR_ERR_FORMAT, "idx: '%s': bad magic number 0x%08x at byte 0; expected "
                         "0x%08x for %s (unsigned bytes, %d dims)%s",
                         path, magic, want, kind, ndim, hint);
    }
    size_t header = 4 + 4 * (size_t)ndim;
    if (b->size < header)
        return oar_error(OAR_ERR_FORMAT, "idx: '%s' is truncated in its header: %zu bytes, expected "
                         "%zu (magic and %d sizes)", path, b->size, header, ndim);
    uint64_t per_item = 1;
    for (int k = 0; k < ndim; k++) {
        dims[k] = be32(b->data + 4 + 4 * k);
        if (k > 0) {
            if (dims[k] == 0)
                return oar_error(OAR_ERR_FORMAT, "idx: '%s': size %d (at byte %d) is 0; expected "
                                 "images of at least 1x1", path, k, 4 + 4 * k);
            per_item *= dims[k]; /* two 32-bit factors cannot overflow 64 bits */
        }
    }
    uint64_t n = dims[0];
    if (n > (UINT64_MAX - header) / per_item || n * per_item > SIZE_MAX - header)
        return oar_error(OAR_ERR_FORMAT, "idx: '%s': the header's sizes describe more data than "
                         "memory can address", path);
    uint64_t expected = header + n * per_item;
    if (b->size < expected)
        return oar_error(OAR_ERR_FORMAT, "idx: '%s' is truncated: the header says %llu %s of %llu "
                         "bytes each, so %llu bytes in all, but the data ends at byte %zu",
                         path, (unsigned long long)n, kind, (unsigned long long)per_item,
                         (unsigned long long)expected, b->size);
    if (b->size > expected)
        return oar_error(OAR_ERR_FORMAT, "idx: '%s': %zu unexpected bytes after byte %llu, where "
                         "the header's %llu %s end", path, b->size - (size_t)expected,
                         (unsigned long long)expected, (unsigned long long)n, kind);
    return OAR_OK;
}

static oar_status idx_copy(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target) {
    const idx_dataset *s = (const idx_dataset *)d;
    const uint8_t *px = s->pixels + i * d->in_numel;
    float *x = input;
    for (int64_t k = 0; k < d->in_numel; k++) x[k] = s->scale[px[k]];
    *(int64_t *)target = s->label_bytes[i];
    return OAR_OK;
}

static void idx_destroy(oar_dataset *d) {
    idx_dataset *s = (idx_dataset *)d;
    oar_bytes_free(&s->images);
    oar_bytes_free(&s->labels);
    free(s);
}

static const oar_dataset_vt idx_vt = {idx_copy, idx_destroy};

oar_dataset *oar_dataset_idx(const char *images_path, const char *labels_path) {
    if (!images_path || !labels_path) {
        oar_error(OAR_ERR_INVALID_ARG, "dataset_idx: expected two file paths, got NULL");
        return NULL;
    }
    idx_dataset *s = OAR_NEW(idx_dataset);
    if (!s) return NULL;
    uint32_t idims[3] = {0}, ldims[3] = {0};
    oar_status st = oar_read_file("idx", images_path, &s->images);
    if (st == OAR_OK) st = check_idx(images_path, &s->images, 3, "images", idims);
    if (st == OAR_OK) st = oar_read_file("idx", labels_path, &s->labels);
    if (st == OAR_OK) st = check_idx(labels_path, &s->labels, 1, "labels", ldims);
    if (st == OAR_OK && idims[0] != ldims[0])
        st = oar_error(OAR_ERR_FORMAT, "idx: '%s' holds %u images but '%s' holds %u labels; "
                       "expected one label per image", images_path, idims[0], labels_path, ldims[0]);
    int64_t shape[3] = {1, idims[1], idims[2]};
    if (st == OAR_OK)
        st = oar_dataset_init(&s->base, &idx_vt, (int64_t)idims[0], OAR_F32, shape, 3, OAR_I64, NULL, 0);
    if (st != OAR_OK) {
        idx_destroy(&s->base);
        return NULL;
    }
    s->pixels = s->images.data + 16;
    s->label_bytes = s->labels.data + 8;
    for (int v = 0; v < 256; v++) s->scale[v] = (float)v / 255.0f;
    return &s->base;
}
