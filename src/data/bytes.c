/* Reads a whole file into memory once. Gzip is recognised by its magic bytes (not the file
 * name) and inflated through zlib when oar was built with it; every failure names the file
 * and, for damaged gzip data, the compressed byte where it went wrong. */
#include "data/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef OAR_HAVE_ZLIB
#include <zlib.h>
#endif

void oar_bytes_free(oar_bytes *b) {
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->size = 0;
}

/* Raw contents, plus one spare byte for the terminating 0. */
static oar_status read_raw(const char *what, const char *path, oar_bytes *out) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return oar_error(OAR_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = oar_realloc(NULL, cap);
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break; /* end of file or an error, told apart below */
        uint8_t *grown = oar_realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    if (!buf) {
        fclose(f);
        oar_error_prefix("%s: reading '%s'", what, path);
        return OAR_ERR_OOM;
    }
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(buf);
        return oar_error(OAR_ERR_IO, "%s: read error in '%s' after %zu bytes: %s", what, path, n,
                         strerror(e));
    }
    fclose(f);
    buf[n] = 0;
    out->data = buf;
    out->size = n;
    return OAR_OK;
}

#ifdef OAR_HAVE_ZLIB
/* Inflates every gzip member of in (files made by concatenating .gz files are valid gzip). */
static oar_status inflate_gzip(const char *what, const char *path, const oar_bytes *in, oar_bytes *out) {
    /* The trailer's ISIZE is the uncompressed size mod 2^32: a good first guess for the buffer. */
    size_t cap = in->size * 4 + 1;
    if (in->size >= 18) {
        const uint8_t *t = in->data + in->size - 4;
        size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
        if (isize >= in->size / 2) cap = isize + 1;
    }
    uint8_t *buf = oar_realloc(NULL, cap);
    if (!buf) return OAR_ERR_OOM;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
        free(buf);
        return oar_error(OAR_ERR_OOM, "%s: zlib could not start inflating '%s'", what, path);
    }
    size_t in_pos = 0, n = 0;
    oar_status st = OAR_OK;
    for (;;) {
        if (cap - n < 2) { /* keep one byte free for the terminating 0 */
            uint8_t *grown = oar_realloc(buf, cap * 2);
            if (!grown) {
                st = OAR_ERR_OOM;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        size_t in_left = in->size - in_pos, out_left = cap - 1 - n;
        zs.next_in = in->data + in_pos;
        zs.avail_in = in_left > 0x40000000u ? 0x40000000u : (uInt)in_left;
        zs.next_out = buf + n;
        zs.avail_out = out_left > 0x40000000u ? 0x40000000u : (uInt)out_left;
        uInt avail_in0 = zs.avail_in, avail_out0 = zs.avail_out;
        int rc = inflate(&zs, Z_NO_FLUSH);
        in_pos += avail_in0 - zs.avail_in;
        n += avail_out0 - zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (in_pos == in->size) break;
            /* another member follows, or garbage does */
            if (in->size - in_pos >= 2 && in->data[in_pos] == 0x1f && in->data[in_pos + 1] == 0x8b) {
                inflateReset(&zs);
                continue;
            }
            st = oar_error(OAR_ERR_FORMAT,
                           "%s: '%s': %zu unexpected bytes after the end of the gzip data at "
                           "compressed byte %zu; expected the file to end there",
                           what, path, in->size - in_pos, in_pos);
            break;
        }
        if (rc == Z_OK) continue;
        if (rc == Z_BUF_ERROR && zs.avail_out == 0) continue; /* grow and go on */
        if (rc == Z_BUF_ERROR && in_pos == in->size) {
            st = oar_error(OAR_ERR_FORMAT,
                           "%s: '%s' is truncated: the gzip data ends at compressed byte %zu "
                           "(%zu bytes inflated) before its end-of-stream marker",
                           what, path, in_pos, n);
            break;
        }
        if (rc == Z_MEM_ERROR) {
            st = oar_error(OAR_ERR_OOM, "%s: zlib ran out of memory inflating '%s'", what, path);
            break;
        }
        st = oar_error(OAR_ERR_FORMAT,
                       "%s: '%s' has corrupted gzip data near compressed byte %zu (%zu bytes "
                       "inflated): %s", what, path, in_pos, n, zs.msg ? zs.msg : "invalid data");
        break;
    }
    inflateEnd(&zs);
    if (st != OAR_OK) {
        if (st == OAR_ERR_OOM) oar_error_prefix("%s: inflating '%s'", what, path);
        free(buf);
        return st;
    }
    buf[n] = 0;
    out->data = buf;
    out->size = n;
    return OAR_OK;
}
#endif

oar_status oar_read_file(const char *what, const char *path, oar_bytes *out) {
    out->data = NULL;
    out->size = 0;
    if (!path) return oar_error(OAR_ERR_INVALID_ARG, "%s: the file path is NULL", what);
    oar_bytes raw;
    oar_status st = read_raw(what, path, &raw);
    if (st != OAR_OK) return st;
    if (raw.size < 2 || raw.data[0] != 0x1f || raw.data[1] != 0x8b) {
        *out = raw;
        return OAR_OK;
    }
#ifdef OAR_HAVE_ZLIB
    st = inflate_gzip(what, path, &raw, out);
    oar_bytes_free(&raw);
    return st;
#else
    oar_bytes_free(&raw);
    return oar_error(OAR_ERR_UNSUPPORTED,
                     "%s: '%s' is gzip-compressed, but oar was built without zlib; decompress it "
                     "first (gunzip -k) or install zlib (zlib1g-dev) and rebuild",
                     what, path);
#endif
}
