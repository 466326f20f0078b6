/* Checksums of the data in the safetensors files oar writes (models, checkpoints, exported
 * weights). A flipped byte in weight data is still a well-formed file: without a checksum it
 * loads and silently computes something else. Each tensor's bytes, as stored (row-major,
 * little-endian), get a CRC32C recorded in the header's "__metadata__" under
 * "oar.crc32c.<tensor name>" (8 hex digits); other safetensors readers ignore metadata. One
 * checksum per tensor, rather than one for the whole data section, lets the error name the
 * damaged tensor. Files without checksums (older oar, other writers) load unchecked. */
#include "io/io.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* -1: not read yet; 0: skip; 1: verify */
static atomic_int g_verify = -1;

bool oar_io_verify_checksums(void) {
    int v = atomic_load(&g_verify);
    if (v < 0) {
        const char *env = getenv("OAR_SKIP_CHECKSUM");
        int want = !(env && *env && strcmp(env, "0") != 0);
        int expected = -1;
        atomic_compare_exchange_strong(&g_verify, &expected, want); /* a call of the setter wins */
        v = atomic_load(&g_verify);
    }
    return v == 1;
}

void oar_set_verify_checksums(bool verify) { atomic_store(&g_verify, verify ? 1 : 0); }

bool oar_io_is_checksum_key(const char *key) {
    return key && !strncmp(key, OAR_IO_CRC_PREFIX, strlen(OAR_IO_CRC_PREFIX));
}

oar_status oar_io_tensor_crc32c(const oar_tensor *t, uint32_t *out) {
    *out = 0;
    if (t->numel == 0) return OAR_OK;
    size_t es = oar_dtypes[t->dtype].size, nbytes = (size_t)t->numel * es;
    oar_status cst = OAR_OK;
    oar_tensor *c = oar_io_host_copy(t, &cst); /* GPU tensors are checked from a host copy */
    if (cst != OAR_OK) return cst;
    const unsigned char *src = (const unsigned char *)oar_tensor_ptr(c ? c : t);
    if (oar_io_host_is_le() || es == 1) {
        *out = oar_crc32c(0, src, nbytes);
    } else { /* the file holds little-endian bytes: checksum those */
        unsigned char tmp[4096];
        size_t per = sizeof tmp / es * es;
        uint32_t crc = 0;
        for (size_t off = 0; off < nbytes; off += per) {
            size_t n = nbytes - off < per ? nbytes - off : per;
            memcpy(tmp, src + off, n);
            oar_io_swap_bytes(tmp, n / es, es);
            crc = oar_crc32c(crc, tmp, n);
        }
        *out = crc;
    }
    oar_tensor_unref(c);
    return OAR_OK;
}

bool oar_io_parse_crc(const char *text, uint32_t *out) {
    if (!text || strlen(text) != 8) return false;
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char ch = text[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return true;
}
