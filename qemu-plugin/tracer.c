/*
 * tracer.c - pysched's full-system tracer: a QEMU TCG plugin (API v4) that records, for every
 * vCPU of an x86_64 Linux guest, the retired block stream with guest-physical frames, system
 * calls, interrupts/exceptions, context switches, wake-ups and ROI markers into Parquet tables.
 *
 * This file: includes, version, the state, install; tracer.h lists the files that do the rest
 * (options, tables and writer, guest introspection, translation, callbacks, the region's
 * windows and exit, plugin.json). See README.md beside it for the tables and how events are
 * derived.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib.h>
#include <qemu-plugin.h>

#include "tracer.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* ---------------------------------------------------------------------------------------- */
/* State                                                                                     */

TracerState S;

const char *const WAKE_SYMBOLS[WAKE_N] = {
    [WAKE_TTWU] = "try_to_wake_up", [WAKE_NEW] = "wake_up_new_task",
    [WAKE_DONE] = "ttwu_do_wakeup"};

/* ---------------------------------------------------------------------------------------- */
/* Install                                                                                   */

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    if (!info->system_emulation || strcmp(info->target_name, "x86_64") != 0) {
        fprintf(stderr, "pysched-trace: needs qemu-system-x86_64 (got %s%s)\n",
                info->target_name, info->system_emulation ? "" : " user mode");
        return -1;
    }
    if (!parse_options(argc, argv) || (S.sysmap && !load_sysmap(S.sysmap)) || !prepare_out()) {
        return -1;
    }
    /* A map without entry_SYSCALL_64 gives no way to find a slide: its addresses are used as
     * they are (a kernel booted with nokaslr), and plugin.json says the slide was not found. */
    S.syms_ready = !S.map_entry;
    S.lowmem = S.ram >= Q35_SPLIT ? Q35_LOWMEM : S.ram;
    S.id = id;
    clock_gettime(CLOCK_MONOTONIC, &S.t0);
    g_mutex_init(&S.lock);
    g_mutex_init(&S.flow_lock);
    g_cond_init(&S.flow_cond);
    S.entry_kind = g_hash_table_new(g_direct_hash, g_direct_equal);
    S.live = g_ptr_array_new();
    S.nvcpus = info->system.max_vcpus;
    S.vcpus = g_new0(VCPU, S.nvcpus);
    S.percpu = g_new0(uint64_t, S.nvcpus);
    for (unsigned i = 0; i < S.nvcpus; i++) {
        VCPU *vs = &S.vcpus[i];
        vs->stops_ns = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        buf_alloc(&vs->buf[T_EXEC], T_EXEC, S.rows);
        for (int t = T_SYSCALLS; t <= T_DEVREQS; t++) {
            buf_alloc(&vs->buf[t], t, EVENT_ROWS);
        }
        if (S.data) {
            buf_alloc(&vs->buf[T_MEM], T_MEM, MEM_ROWS);
        }
    }
    buf_alloc(&S.statics[0], T_BLOCKS, EVENT_ROWS);
    buf_alloc(&S.statics[1], T_INSNS, 4 * EVENT_ROWS);
    /* QEMU runs plugin exit callbacks from an atexit() handler registered before the plugin
     * was loaded, i.e. after Arrow's own static destructors: set up Arrow now and register our
     * own handler after it, so the last parts are written while Arrow still works. */
    if (!writer_warmup()) {
        return -1;
    }
    atexit(finish);
    writer_start();
    S.mode = S.roi_all ? MODE_FULL : MODE_LIGHT;
    S.tracing = S.roi_all;
    S.n_windows = S.roi_all ? 1 : 0;
    register_callbacks();
    write_plugin_json(false);
    return 0;
}
