/* The data cache sizes of this CPU (oar_get_cpu_caches, include/oar.h), for the choices that
 * are sized to a cache (the batch tiles' slices, graph/batch_tiles.c).
 *
 * Linux's sysfs first (cpu0's cache/index* entries: the size of one instance of each level,
 * as the kernel read it from the CPU's own description), else CPUID's deterministic cache
 * leaves (4 on Intel, 0x8000001D on AMD), else common sizes. Not sysconf(_SC_LEVEL3_...):
 * glibc computes it and gave 384 MiB for this VM's 32 MiB L3. A test can set the sizes
 * (oar_set_cpu_caches) to check that a choice follows them. */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define OAR_X86 1
#endif

static const oar_cpu_caches DEFAULTS = {.l1d = 32 << 10, .l2 = 1 << 20, .l3 = 8 << 20};

/* "48K", "1024K", "32M" -> bytes; 0 if unreadable */
static int64_t parse_size(const char *s) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (!end || end == s || v <= 0) return 0;
    if (*end == 'K') v <<= 10;
    else if (*end == 'M') v <<= 20;
    else if (*end == 'G') v <<= 30;
    return v;
}

static bool read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* level 1 data / 2 / 3 into c from sysfs; true when any was found */
static bool from_sysfs(oar_cpu_caches *c) {
    bool any = false;
    for (int i = 0; i < 16; i++) {
        char path[96], level[16], type[32], size[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!read_line(path, level, sizeof level)) break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!read_line(path, type, sizeof type) || strcmp(type, "Instruction") == 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        int64_t bytes = read_line(path, size, sizeof size) ? parse_size(size) : 0;
        if (bytes <= 0) continue;
        int l = atoi(level);
        if (l == 1) c->l1d = bytes, any = true;
        else if (l == 2) c->l2 = bytes, any = true;
        else if (l == 3) c->l3 = bytes, any = true;
    }
    return any;
}

static bool from_cpuid(oar_cpu_caches *c) {
#ifdef OAR_X86
    unsigned a, b, cx, d, leaf = 4;
    if (__get_cpuid(0x80000000, &a, &b, &cx, &d) && a >= 0x8000001D && __get_cpuid_count(0x8000001D, 0, &a, &b, &cx, &d) &&
        (a & 31) != 0)
        leaf = 0x8000001D; /* AMD's copy of leaf 4 */
    bool any = false;
    for (unsigned i = 0; i < 16; i++) {
        if (!__get_cpuid_count(leaf, i, &a, &b, &cx, &d)) break;
        unsigned type = a & 31, level = (a >> 5) & 7;
        if (type == 0) break;
        if (type == 2) continue; /* instructions */
        int64_t bytes = (int64_t)((b >> 22) + 1) * (((b >> 12) & 1023) + 1) * ((b & 4095) + 1) * ((int64_t)cx + 1);
        if (level == 1) c->l1d = bytes, any = true;
        else if (level == 2) c->l2 = bytes, any = true;
        else if (level == 3) c->l3 = bytes, any = true;
    }
    return any;
#else
    (void)c;
    return false;
#endif
}

static oar_cpu_caches g_detected;
static int g_detected_ready; /* release-stored after g_detected */
static oar_cpu_caches g_set;
static int g_set_on;          /* 1 while a test's sizes are in force */

oar_cpu_caches oar_cpu_caches_detected(void) {
    if (!__atomic_load_n(&g_detected_ready, __ATOMIC_ACQUIRE)) {
        oar_cpu_caches c = DEFAULTS; /* a level neither source names keeps its default */
        if (!from_sysfs(&c)) from_cpuid(&c);
        g_detected = c; /* idempotent: racing threads write the same values */
        __atomic_store_n(&g_detected_ready, 1, __ATOMIC_RELEASE);
    }
    return g_detected;
}

oar_cpu_caches oar_get_cpu_caches(void) {
    if (__atomic_load_n(&g_set_on, __ATOMIC_ACQUIRE)) return g_set;
    return oar_cpu_caches_detected();
}

oar_status oar_set_cpu_caches(const oar_cpu_caches *c) {
    if (!c) {
        __atomic_store_n(&g_set_on, 0, __ATOMIC_RELEASE);
        return OAR_OK;
    }
    if (c->l1d <= 0 || c->l2 <= 0 || c->l3 <= 0)
        return oar_error(OAR_ERR_INVALID_ARG,
                         "oar_set_cpu_caches: expected positive sizes in bytes, got l1d %lld, l2 %lld, l3 %lld; "
                         "pass NULL to go back to the detected sizes",
                         (long long)c->l1d, (long long)c->l2, (long long)c->l3);
    g_set = *c;
    __atomic_store_n(&g_set_on, 1, __ATOMIC_RELEASE);
    return OAR_OK;
}
