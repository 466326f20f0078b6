/* CRC32C (Castagnoli, the polynomial of iSCSI, ext4 and Snappy framing): the checksum oar
 * stores with the data of every safetensors file it writes. Chosen over CRC32 (zlib) because
 * x86-64 computes it in hardware (SSE4.2) and its error detection is better for long data;
 * over xxHash because a CRC is defined bit by bit in the standard literature, so another
 * reader can verify it with any library. The portable path is slice-by-8 (eight 256-entry
 * tables, 8 bytes per step, about 1-2 GB/s); the SSE4.2 path (a crc32 instruction per 8 bytes)
 * is used when the CPU has it. Both give the same value: tests/test_io_checksum.c checks them
 * against the standard check value and each other. */
#include "base.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define POLY 0x82F63B78u /* 0x1EDC6F41 bit-reversed: the reflected form CRC32C uses */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    /* table[j][i]: the CRC of byte i followed by j zero bytes, so 8 bytes fold in one step */
    for (uint32_t i = 0; i < 256; i++)
        for (int j = 1; j < 8; j++) table[j][i] = (table[j - 1][i] >> 8) ^ table[0][table[j - 1][i] & 0xFF];
}

uint32_t oar_crc32c_portable(uint32_t crc, const void *data, size_t n) {
    pthread_once(&table_once, make_tables);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (; n && ((uintptr_t)p & 7); n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    for (; n >= 8; n -= 8, p += 8) {
        /* little-endian assembly of the 8 bytes, so the result does not depend on the host */
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
            table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
    }
    for (; n; n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    for (; n && ((uintptr_t)p & 7); n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    for (; n; n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

static bool have_sse42(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("sse4.2");
    }
    return cached;
}
#endif

uint32_t oar_crc32c(uint32_t crc, const void *data, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_sse42()) return crc32c_sse42(crc, data, n);
#endif
    return oar_crc32c_portable(crc, data, n);
}
