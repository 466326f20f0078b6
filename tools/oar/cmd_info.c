/* `oar info [--json]`: the facts a bug report needs. The CPU (model, the flags that matter,
 * the best ISA it has, the cap in use and where it came from), each optional library with its
 * version and what it runs (OpenBLAS's core type, oneDNN's ISA), and the thread count. Uses
 * the public API only. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The OPENBLAS_CORETYPE that keeps OpenBLAS at or below a cap (docs/cpu-isa.md). */
static const char *coretype_for(oar_cpu_isa isa) {
    return isa == OAR_CPU_ISA_GENERIC ? "Nehalem" : isa == OAR_CPU_ISA_AVX2 ? "Haswell" : "SkylakeX";
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned)(unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

/* The flags as a JSON list: they are space-separated words. */
static void json_words(const char *s) {
    putchar('[');
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (n++) printf(", ");
        json_string(w);
    }
    putchar(']');
}

static const char *isa_source(void) {
    const char *env = getenv("OAR_CPU_ISA");
    return env && *env ? "OAR_CPU_ISA" : "default: the best this CPU has";
}

static void print_json(const oar_library_info *libs, int n) {
    oar_cpu_isa cap = oar_get_cpu_isa();
    printf("{\"version\": ");
    json_string(oar_version());
    printf(", \"cpu\": {\"model\": ");
    json_string(oar_cpu_model());
    printf(", \"flags\": ");
    json_words(oar_cpu_flags());
    printf(", \"native_isa\": ");
    json_string(oar_cpu_isa_name(oar_cpu_isa_native()));
    printf(", \"isa\": ");
    json_string(oar_cpu_isa_name(cap));
    printf(", \"isa_source\": ");
    json_string(isa_source());
    oar_cpu_caches c = oar_get_cpu_caches();
    printf(", \"caches\": {\"l1d\": %lld, \"l2\": %lld, \"l3\": %lld}", (long long)c.l1d, (long long)c.l2,
           (long long)c.l3);
    printf("}, \"amp\": {\"bf16\": ");
    json_string(oar_amp_cpu_path(OAR_BF16));
    printf(", \"f16\": ");
    json_string(oar_amp_cpu_path(OAR_F16));
    printf("}, \"threads\": %d, \"libraries\": [", oar_get_num_threads());
    for (int i = 0; i < n; i++) {
        const oar_library_info *l = &libs[i];
        printf("%s\n  {\"name\": ", i ? "," : "");
        json_string(l->name);
        printf(", \"found\": %s, \"version\": ", l->found ? "true" : "false");
        json_string(l->version);
        printf(", \"detail\": ");
        json_string(l->detail);
        printf(", \"isa\": ");
        if (l->isa >= 0) json_string(oar_cpu_isa_name((oar_cpu_isa)l->isa));
        else printf("null");
        printf(", \"above_cap\": %s}", l->isa > (int)cap ? "true" : "false");
    }
    printf("]}\n");
}

static void print_text(const oar_library_info *libs, int n) {
    oar_cpu_isa cap = oar_get_cpu_isa();
    printf("oar %s\n", oar_version());
    printf("cpu:      %s\n", oar_cpu_model()[0] ? oar_cpu_model() : "(model unknown)");
    printf("flags:    %s\n", oar_cpu_flags()[0] ? oar_cpu_flags() : "(none of those oar uses)");
    printf("isa:      %s (cap; %s); the CPU has %s\n", oar_cpu_isa_name(cap), isa_source(),
           oar_cpu_isa_name(oar_cpu_isa_native()));
    oar_cpu_caches c = oar_get_cpu_caches();
    printf("caches:   L1d %lld KiB, L2 %lld KiB (a core's), L3 %lld KiB\n", (long long)(c.l1d >> 10),
           (long long)(c.l2 >> 10), (long long)(c.l3 >> 10));
    printf("threads:  %d\n", oar_get_num_threads());
    printf("amp:      bf16 %s; f16 %s\n", oar_amp_cpu_path(OAR_BF16), oar_amp_cpu_path(OAR_F16));
    printf("libraries:\n");
    for (int i = 0; i < n; i++) {
        const oar_library_info *l = &libs[i];
        if (!l->found) {
            printf("  %-9s not found at build time\n", l->name);
            continue;
        }
        printf("  %-9s %-10s %s\n", l->name, l->version[0] ? l->version : "?", l->detail);
        if (l->isa > (int)cap)
            printf("  %-9s note: runs %s code, above the cap %s; %s\n", "", oar_cpu_isa_name((oar_cpu_isa)l->isa),
                   oar_cpu_isa_name(cap),
                   strcmp(l->name, "OpenBLAS") == 0
                       ? "OpenBLAS chooses when it loads: start with OPENBLAS_CORETYPE set"
                       : "oneDNN fixed its cap at first use");
        if (l->isa > (int)cap && strcmp(l->name, "OpenBLAS") == 0)
            printf("  %-9s (OPENBLAS_CORETYPE=%s for %s)\n", "", coretype_for(cap), oar_cpu_isa_name(cap));
    }
}

int oar_cmd_info(int argc, char **argv) {
    static const cli_flag flags[] = {{"--json", CLI_NONE}};
    if (cli_check_flags("info", argc, argv, flags, CLI_N_FLAGS(flags), 0)) return 2;
    oar_library_info libs[16];
    int n = oar_library_count();
    if (n > 16) n = 16;
    for (int i = 0; i < n; i++)
        if (oar_library_info_get(i, &libs[i]) != OAR_OK) {
            fprintf(stderr, "oar info: %s\n", oar_last_error());
            return 1;
        }
    if (cli_has_flag(argc, argv, "--json")) print_json(libs, n);
    else print_text(libs, n);
    return 0;
}
