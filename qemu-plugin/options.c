/*
 * options.c - the plugin's options (README: Options), the symbol map it reads them with, and
 * the output directory it writes into. Every refusal is one line on stderr naming the option.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracer.h"

static bool parse_size(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || end == v) {
        return false;
    }
    switch (*end) {
    case 'k': case 'K': x <<= 10; end++; break;
    case 'm': case 'M': x <<= 20; end++; break;
    case 'g': case 'G': x <<= 30; end++; break;
    }
    *out = x;
    return *end == '\0';
}

/* A plain positive decimal integer (no sign, spaces or suffix). */
static bool parse_count(const char *v, uint64_t *out)
{
    if (*v < '0' || *v > '9') {
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end != '\0' || x == 0) {
        return false;
    }
    *out = x;
    return true;
}

bool load_sysmap(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "pysched-trace: sysmap=%s: %s\n", path, strerror(errno));
        return false;
    }
    char line[512], type[8], name[400];
    unsigned long long addr;
    uint64_t pcpu_hot = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%llx %7s %399s", &addr, type, name) != 3) {
            continue;
        }
        if (!strcmp(name, "idt_table")) {
            S.sym_idt = addr;
        } else if (!strcmp(name, "current_task")) {
            S.sym_current = addr;
            S.have_current = true;
        } else if (!strcmp(name, "pcpu_hot")) {
            pcpu_hot = addr;
        } else if (!strcmp(name, "__switch_to")) {
            S.sym_switch_to = addr;
        } else if (!strcmp(name, "entry_SYSCALL_64")) {
            S.map_entry = addr;
        } else if (!strcmp(name, "_stext")) {
            S.map_stext = addr;
        } else if (!strcmp(name, "_etext")) {
            S.map_etext = addr;
        } else if (!strcmp(name, "_sinittext")) {
            S.map_sinit = addr;
        } else if (!strcmp(name, "_einittext")) {
            S.map_einit = addr;
        } else if (!strcmp(name, "__per_cpu_offset")) {
            S.sym_percpu = addr;
        }
        for (int k = WAKE_TTWU; k < WAKE_N; k++) {
            if (!strcmp(name, WAKE_SYMBOLS[k])) {
                S.sym_wake[k] = addr;
            }
        }
        devreq_sysmap_line(name, type, addr);
    }
    fclose(f);
    devreq_sysmap_done();
    if (!S.have_current && pcpu_hot) { /* kernels >= 6.2: current_task is pcpu_hot's first field */
        S.sym_current = pcpu_hot;
        S.have_current = true;
    }
    const char *missing = !S.sym_idt ? "idt_table" : !S.have_current ? "current_task"
                          : !S.sym_switch_to ? "__switch_to" : NULL;
    if (missing) {
        fprintf(stderr, "pysched-trace: sysmap=%s: symbol %s not found\n", path, missing);
        return false;
    }
    return true;
}

bool parse_options(int argc, char **argv)
{
    S.rows = 16777216;
    S.zstd = 1;
    S.exec_zstd = 9;
    for (int i = 0; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "pysched-trace: option '%s' is not key=value\n", argv[i]);
            return false;
        }
        g_autofree char *key = g_strndup(argv[i], eq - argv[i]);
        const char *val = eq + 1;
        uint64_t x;
        if (!strcmp(key, "out")) {
            S.out = g_strdup(val);
        } else if (!strcmp(key, "sysmap")) {
            S.sysmap = g_strdup(val);
        } else if (!strcmp(key, "roi")) {
            if (strcmp(val, "marker") && strcmp(val, "all")) {
                fprintf(stderr, "pysched-trace: roi=%s: expected 'marker' or 'all'\n", val);
                return false;
            }
            S.roi_all = !strcmp(val, "all");
        } else if (!strcmp(key, "data")) {
            if (!qemu_plugin_bool_parse(key, val, &S.data)) {
                fprintf(stderr, "pysched-trace: data=%s: expected on or off\n", val);
                return false;
            }
        } else if (!strcmp(key, "rows")) {
            if (!parse_size(val, &x) || x < 1024 || x > (1u << 30)) {
                fprintf(stderr, "pysched-trace: rows=%s: expected a count from 1024 to 2^30\n",
                        val);
                return false;
            }
            S.rows = x;
        } else if (!strcmp(key, "zstd")) {
            if (!parse_size(val, &x) || x < 1 || x > 22) {
                fprintf(stderr, "pysched-trace: zstd=%s: expected a level from 1 to 22\n", val);
                return false;
            }
            S.zstd = (int)x;
        } else if (!strcmp(key, "exec_zstd")) {
            if (!parse_size(val, &x) || x < 1 || x > 22) {
                fprintf(stderr, "pysched-trace: exec_zstd=%s: expected a level from 1 to 22\n",
                        val);
                return false;
            }
            S.exec_zstd = (int)x;
        } else if (!strcmp(key, "ram")) {
            if (!parse_size(val, &S.ram)) {
                fprintf(stderr, "pysched-trace: ram=%s: expected a size such as 512M\n", val);
                return false;
            }
        } else if (!strcmp(key, "roi_insns")) {
            if (!parse_count(val, &S.roi_insns)) {
                fprintf(stderr, "pysched-trace: roi_insns=%s: expected a positive instruction "
                        "count, a plain integer such as 20000000\n", val);
                return false;
            }
        } else {
            fprintf(stderr, "pysched-trace: unknown option '%s' (known: out, sysmap, roi, data, "
                    "rows, zstd, exec_zstd, ram, roi_insns)\n", key);
            return false;
        }
    }
    if (S.roi_insns && S.roi_all) {
        fprintf(stderr, "pysched-trace: roi_insns=%" PRIu64 ": needs roi=marker (with roi=all "
                "there is no region to end)\n", S.roi_insns);
        return false;
    }
    if (!S.out) {
        fprintf(stderr, "pysched-trace: option out=DIR is required\n");
        return false;
    }
    return true;
}

/* Create the output directory and its table folders; refuse one that already holds a trace. */
bool prepare_out(void)
{
    if (g_mkdir_with_parents(S.out, 0755) != 0) {
        fprintf(stderr, "pysched-trace: out=%s: cannot create directory: %s\n", S.out,
                strerror(errno));
        return false;
    }
    for (int t = 0; t < T_N; t++) {
        if (t == T_MEM && !S.data) {
            continue; /* no empty mem/ without data=on */
        }
        g_autofree char *d = g_strdup_printf("%s/%s", S.out, TABLES[t].name);
        GDir *dir = g_dir_open(d, 0, NULL);
        if (dir) {
            bool nonempty = g_dir_read_name(dir) != NULL;
            g_dir_close(dir);
            if (nonempty) {
                fprintf(stderr, "pysched-trace: out=%s: already holds a trace (%s/ is not "
                        "empty)\n", S.out, TABLES[t].name);
                return false;
            }
        }
        if (g_mkdir_with_parents(d, 0755) != 0 || access(d, W_OK) != 0) {
            fprintf(stderr, "pysched-trace: out=%s: cannot write %s: %s\n", S.out, d,
                    strerror(errno));
            return false;
        }
    }
    return true;
}
