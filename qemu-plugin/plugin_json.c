/*
 * plugin_json.c - plugin.json: the options, what the plugin found (symbols, the kernel's slide
 * and physical base, the RAM layout) and its counters, rewritten at every region begin and end
 * and, with "final": true, at exit (README: plugin.json).
 */
#include <inttypes.h>

#include "tracer.h"

void write_plugin_json(bool final)
{
    GString *s = g_string_new("{\n");
    g_string_append_printf(s, "  \"schema_version\": %s,\n  \"final\": %s,\n", SCHEMA_VERSION,
                           final ? "true" : "false");
    g_string_append_printf(s, "  \"options\": {\"out\": \"%s\", \"sysmap\": \"%s\", "
                           "\"roi\": \"%s\", \"data\": %s, \"rows\": %zu, \"zstd\": %d, "
                           "\"exec_zstd\": %d, \"ram\": %" PRIu64 ", \"roi_insns\": %" PRIu64
                           "},\n",
                           S.out, S.sysmap ? S.sysmap : "", S.roi_all ? "all" : "marker",
                           S.data ? "true" : "false", S.rows, S.zstd, S.exec_zstd, S.ram,
                           S.roi_insns);
    g_string_append_printf(s, "  \"symbols\": {\"idt_table\": %" PRIu64 ", \"current_task\": %"
                           PRIu64 ", \"__switch_to\": %" PRIu64, S.sym_idt, S.sym_current,
                           S.sym_switch_to);
    for (int k = WAKE_TTWU; k < WAKE_N; k++) {
        g_string_append_printf(s, ", \"%s\": %" PRIu64, WAKE_SYMBOLS[k], S.sym_wake[k]);
    }
    g_string_append(s, "},\n");
    devreq_json(s);
    g_string_append_printf(s, "  \"ram_base_calibrated\": %s,\n  \"ram_base_mismatches\": %"
                           PRIu64 ",\n", S.ram_base_set ? "true" : "false", S.ram_base_mismatch);
    if (S.sysmap) {
        const char *reason = S.slide_found ? "" : !S.map_entry
            ? "the symbol map has no entry_SYSCALL_64" : "no user system call was seen yet";
        g_string_append_printf(s, "  \"kaslr\": {\"found\": %s, \"virtual_slide\": %" PRIu64
                               ", \"verified_by_idt\": %s, \"idt_handlers_outside_text\": %"
                               PRIu64 ", \"reason\": \"%s\"},\n",
                               S.slide_found ? "true" : "false", S.slide,
                               S.slide_verified ? "true" : "false", S.idt_outside_text, reason);
    }
    g_string_append_printf(s, "  \"phys_base_found\": %s,\n  \"phys_base\": %" PRIu64
                           ",\n  \"kernel_phys_start\": %" PRIu64 ",\n  \"lowmem\": %" PRIu64
                           ",\n  \"pti_walk_reads\": %" PRIu64 ",\n",
                           S.phys_base_set ? "true" : "false", S.phys_base,
                           (uint64_t)(S.phys_base_set && S.map_stext
                               ? S.map_stext + S.slide - KTEXT_START + S.phys_base : 0),
                           S.lowmem, S.pti_reads);
    g_string_append_printf(s, "  \"vcpus\": %u,\n  \"windows\": %" PRIu64 ",\n  \"blocks\": %"
                           PRIu64 ",\n  \"idt_reads\": %" PRIu64 ",\n  \"idt_shared_handlers\": %"
                           PRIu64 ",\n  \"iret_to_self\": %" PRIu64 ",\n  \"parts\": %" PRIu64
                           ",\n", S.nvcpus, S.n_windows, S.n_blocks, S.n_idt_reads,
                           S.n_shared_handlers, S.n_iret_self, S.n_parts);
    uint64_t rip_reads = 0, rip_bad = 0;
    for (unsigned i = 0; i < S.nvcpus; i++) {
        rip_reads += S.vcpus[i].rip_reads;
        rip_bad += S.vcpus[i].rip_bad;
    }
    g_string_append_printf(s, "  \"user_pcs\": \"%s\",\n  \"user_variants\": %" PRIu64
                           ",\n  \"user_rip_reads\": %" PRIu64 ",\n  \"user_rip_offset_mismatches\": %"
                           PRIu64 ",\n", S.have_rip ? "run" : "translated", S.n_variants,
                           rip_reads, rip_bad);
    g_string_append_printf(s, "  \"round_robin\": %s,\n  \"vcpu_unresolved\": %" PRIu64 ",\n",
                           S.rr ? "true" : "false", S.n_rr_unresolved);
    g_string_append_printf(s, "  \"recording\": %s,\n  \"roi_insns_ends\": %" PRIu64 ",\n",
                           S.tracing || S.open_at_exit ? "true" : "false", S.n_bound_ends);
    g_string_append(s, "  \"icount\": [");
    for (unsigned i = 0; i < S.nvcpus; i++) {
        g_string_append_printf(s, "%s%" PRIu64, i ? ", " : "", S.vcpus[i].icount);
    }
    g_string_append(s, "],\n  \"window_icount\": [");
    for (unsigned i = 0; i < S.nvcpus; i++) {
        g_string_append_printf(s, "%s%" PRIu64, i ? ", " : "",
                               S.vcpus[i].icount - S.vcpus[i].window_start);
    }
    g_string_append(s, "],\n  \"bound_stop_ns\": [");
    g_mutex_lock(&S.lock);
    for (unsigned i = 0; i < S.nvcpus; i++) {
        GArray *a = S.vcpus[i].stops_ns;
        g_string_append(s, i ? ", [" : "[");
        for (guint k = 0; k < a->len; k++) {
            g_string_append_printf(s, "%s%" PRIu64, k ? ", " : "", g_array_index(a, uint64_t, k));
        }
        g_string_append(s, "]");
    }
    g_mutex_unlock(&S.lock);
    g_string_append(s, "]\n}\n");
    char *path = g_strdup_printf("%s/plugin.json", S.out);
    g_file_set_contents(path, s->str, s->len, NULL);
    g_free(path);
    g_string_free(s, TRUE);
}
