/* The one CPU feature switch (docs/cpu-isa.md): what this CPU has, and the cap every runtime
 * CPU choice in oar reads: which kernels register as usable, the GEMM backend rule, the
 * direct-conv rule, tile widths, and (through dnnl_engine.c) the ISA oneDNN may use.
 *
 * The cap is one atomic int, resolved on first use from OAR_CPU_ISA, else the best the CPU
 * has. Kernels read it at dispatch time, not at registration, so oar_set_cpu_isa takes effect
 * for every op dispatched afterwards without re-registering anything. */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define OAR_X86 1
#endif

static const char *const NAMES[] = {"generic", "avx2", "avx512"};

const char *oar_cpu_isa_name(oar_cpu_isa isa) {
    return (unsigned)isa <= OAR_CPU_ISA_AVX512 ? NAMES[isa] : "unknown";
}

oar_status oar_cpu_isa_from_name(const char *name, oar_cpu_isa *out) {
    for (int i = 0; i <= OAR_CPU_ISA_AVX512; i++)
        if (name && !strcasecmp(name, NAMES[i])) {
            *out = (oar_cpu_isa)i;
            return OAR_OK;
        }
    return oar_error(OAR_ERR_INVALID_ARG, "cpu isa: expected one of generic, avx2, avx512, got '%s'",
                     name ? name : "(null)");
}

/* ---- what the CPU has, detected once */
typedef struct cpu_facts {
    oar_cpu_isa native;
    char flags[160];
    char model[64];
} cpu_facts;

static cpu_facts g_facts;
static int g_facts_ready; /* 0 no, 1 yes (release-stored after the fields) */

static void append_flag(char *buf, size_t cap, const char *flag, bool has) {
    if (!has) return;
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%s", n ? " " : "", flag);
}

static void trim(char *s) {
    size_t start = strspn(s, " "), n = strlen(s);
    while (n > start && s[n - 1] == ' ') n--;
    memmove(s, s + start, n - start);
    s[n - start] = '\0';
}

static void detect(cpu_facts *f) {
    memset(f, 0, sizeof *f);
    f->native = OAR_CPU_ISA_GENERIC;
#ifdef OAR_X86
    __builtin_cpu_init();
    /* The flags oar's kernels and its libraries (oneDNN's avx512_core needs bw, vl, dq) decide on. */
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
    struct { const char *name; bool has; } fl[] = {
        {"sse4.2", __builtin_cpu_supports("sse4.2")}, {"avx", __builtin_cpu_supports("avx")},
        {"fma", __builtin_cpu_supports("fma")},       {"f16c", false},
        {"avx2", __builtin_cpu_supports("avx2")},     {"avx512f", __builtin_cpu_supports("avx512f")},
        {"avx512bw", __builtin_cpu_supports("avx512bw")}, {"avx512vl", __builtin_cpu_supports("avx512vl")},
        {"avx512dq", __builtin_cpu_supports("avx512dq")}, {"avx512_vnni", false}, {"avx512_bf16", false},
    };
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) fl[3].has = (c >> 29) & 1; /* F16C: leaf 1, ecx bit 29 */
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) fl[9].has = (c >> 11) & 1; /* AVX512_VNNI: ecx 11 */
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) fl[10].has = (a >> 5) & 1; /* AVX512_BF16: eax 5 */
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) append_flag(f->flags, sizeof f->flags, fl[i].name, fl[i].has);
    f->native = avx512 ? OAR_CPU_ISA_AVX512 : avx2 ? OAR_CPU_ISA_AVX2 : OAR_CPU_ISA_GENERIC;
    unsigned brand[12];
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002 + i, &brand[4 * i], &brand[4 * i + 1], &brand[4 * i + 2], &brand[4 * i + 3]);
        memcpy(f->model, brand, sizeof brand);
        f->model[sizeof brand] = '\0';
        trim(f->model);
    }
#endif
}

static const cpu_facts *facts(void) {
    if (!__atomic_load_n(&g_facts_ready, __ATOMIC_ACQUIRE)) {
        cpu_facts f; /* detection is idempotent: racing threads write the same values */
        detect(&f);
        g_facts = f;
        __atomic_store_n(&g_facts_ready, 1, __ATOMIC_RELEASE);
    }
    return &g_facts;
}

oar_cpu_isa oar_cpu_isa_native(void) { return facts()->native; }

/* ---- the cap: -1 until resolved */
static int g_cap = -1;

/* OAR_CPU_ISA, or the native ISA. A library has no caller to hand a status to here, so a bad
 * value is reported on stderr and ignored; the oar command checks the variable itself first
 * (tools/oar/main.c) and refuses to run with a bad one. */
static int cap_from_env(void) {
    oar_cpu_isa native = oar_cpu_isa_native(), want;
    const char *env = getenv("OAR_CPU_ISA");
    if (!env || !*env) return native;
    if (oar_cpu_isa_from_name(env, &want) != OAR_OK) {
        fprintf(stderr, "oar: OAR_CPU_ISA: expected generic, avx2 or avx512, got '%s'; using %s, the best this CPU has\n",
                env, oar_cpu_isa_name(native));
        oar_clear_error();
        return native;
    }
    if (want > native) {
        fprintf(stderr, "oar: OAR_CPU_ISA=%s: this CPU has at most %s; using %s\n", env, oar_cpu_isa_name(native),
                oar_cpu_isa_name(native));
        return native;
    }
    return want;
}

oar_cpu_isa oar_get_cpu_isa(void) {
    int cap = __atomic_load_n(&g_cap, __ATOMIC_RELAXED);
    if (OAR_LIKELY(cap >= 0)) return (oar_cpu_isa)cap;
    int expected = -1;
    cap = cap_from_env();
    if (!__atomic_compare_exchange_n(&g_cap, &expected, cap, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        cap = expected; /* oar_set_cpu_isa or another thread got there first */
    return (oar_cpu_isa)cap;
}

oar_status oar_set_cpu_isa(oar_cpu_isa isa) {
    if ((unsigned)isa > OAR_CPU_ISA_AVX512)
        return oar_error(OAR_ERR_INVALID_ARG,
                         "oar_set_cpu_isa: expected OAR_CPU_ISA_GENERIC, _AVX2 or _AVX512, got %d", (int)isa);
    oar_cpu_isa native = oar_cpu_isa_native();
    if (isa > native)
        return oar_error(OAR_ERR_UNSUPPORTED,
                         "oar_set_cpu_isa: this CPU (%s) lacks %s; it has at most %s (flags: %s); ask for %s or "
                         "lower",
                         facts()->model[0] ? facts()->model : "unknown model", oar_cpu_isa_name(isa),
                         oar_cpu_isa_name(native), facts()->flags[0] ? facts()->flags : "none",
                         oar_cpu_isa_name(native));
    __atomic_store_n(&g_cap, (int)isa, __ATOMIC_RELAXED);
    return OAR_OK;
}

const char *oar_cpu_model(void) { return facts()->model; }
const char *oar_cpu_flags(void) { return facts()->flags; }
