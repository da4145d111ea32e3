/*
 * window.c - the plugin's run: vCPU set-up, the region's begin and end (a reset of the plugin
 * with every vCPU stopped: the callbacks of the new mode, the first or the last rows of the
 * window), QEMU's translation flushes, and the exit.
 */
#include <string.h>

#include "tracer.h"

/* The gdb names of the registers the plugin reads, by R_* (tracer.h). */
static const char *REG_NAMES[R_N] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp",
                                     "rsp", "r8",  "r9",  "r10", "gs_base", "k_gs_base", "cr3",
                                     "rip"};

static void vcpu_init(qemu_plugin_id_t id, unsigned int cpu)
{
    VCPU *vs = &S.vcpus[cpu];
    if (vs->scratch) { /* registered again after a reset */
        return;
    }
    vs->index = cpu;
    vs->scratch = g_byte_array_new();
    /* One host thread setting up two vCPUs: round-robin TCG (callbacks.c: vcpu_running). */
    vs->thread = g_thread_self();
    for (unsigned i = 0; i < S.nvcpus; i++) {
        S.rr |= i != cpu && S.vcpus[i].thread == vs->thread;
    }
    GArray *regs = qemu_plugin_get_registers();
    for (guint i = 0; i < regs->len; i++) {
        qemu_plugin_reg_descriptor *d = &g_array_index(regs, qemu_plugin_reg_descriptor, i);
        for (int r = 0; r < R_N; r++) {
            if (!strcmp(d->name, REG_NAMES[r])) {
                vs->reg[r] = d->handle;
            }
        }
        if (!strcmp(d->name, REG_NAMES[R_RIP])) {
            S.have_rip = true;
        }
    }
    g_array_free(regs, TRUE);
}

static void at_exit(qemu_plugin_id_t id, void *p);

static void block_free(gpointer p)
{
    Block *b = p;
    g_free(b->sizes);
    g_free(b->paddrs);
    g_free(b->flags);
    if (b->variants) { /* the variants themselves are in S.live */
        g_hash_table_destroy(b->variants);
    }
    g_free(b);
}

/* QEMU dropped every translation (vCPUs are stopped): free their Blocks but the pending ones,
 * which still have to be counted, so that long runs do not accumulate them. */
static void on_flush(qemu_plugin_id_t id)
{
    g_mutex_lock(&S.lock);
    GPtrArray *keep = g_ptr_array_new();
    for (guint i = 0; i < S.live->len; i++) {
        Block *b = g_ptr_array_index(S.live, i);
        bool pending = false;
        for (unsigned v = 0; v < S.nvcpus && !pending; v++) {
            pending = S.vcpus[v].pending == b;
        }
        if (pending) {
            /* only counted from now on; its variants (in S.live) are freed with the rest */
            if (b->variants) {
                g_hash_table_destroy(b->variants);
                b->variants = NULL;
            }
            g_ptr_array_add(keep, b);
        } else {
            block_free(b);
        }
    }
    g_ptr_array_free(S.live, TRUE);
    S.live = keep;
    for (unsigned v = 0; v < S.nvcpus; v++) {
        if (S.vcpus[v].vcache) {
            memset(S.vcpus[v].vcache, 0, VCACHE_N * sizeof(VCacheEntry));
        }
    }
    g_mutex_unlock(&S.lock);
}

void register_callbacks(void)
{
    qemu_plugin_register_vcpu_init_cb(S.id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(S.id, vcpu_tb_trans);
    qemu_plugin_register_flush_cb(S.id, on_flush);
    qemu_plugin_register_atexit_cb(S.id, at_exit, NULL);
}

/* Count the last started block of every vCPU and flush everything (vCPUs are stopped). */
static void close_window(void)
{
    for (unsigned i = 0; i < S.nvcpus; i++) {
        VCPU *vs = &S.vcpus[i];
        if (vs->pending) {
            vs->icount += vs->pending->ninsn;
            vs->pending = NULL;
        }
        flush_vcpu(vs);
    }
}

static Mode next_mode;

/* Runs with every vCPU stopped, after QEMU flushed its translations. */
static void on_reset(qemu_plugin_id_t id)
{
    Mode was = S.mode;
    S.mode = next_mode;
    S.reset_pending = false;
    register_callbacks();
    if (was == MODE_LIGHT && next_mode == MODE_FULL) {
        /* ROI begin: every vCPU starts at its next block boundary. */
        S.n_windows++;
        S.vcpus_done = 0;
        for (unsigned i = 0; i < S.nvcpus; i++) {
            S.vcpus[i].pending = NULL;
            S.vcpus[i].done = false;
            S.vcpus[i].window_start = S.vcpus[i].icount;
        }
        VCPU *vs = &S.vcpus[S.begin_vcpu];
        marker_row(vs, 0, S.begin_value, S.begin_thread, S.begin_cr3, vs->icount);
        S.tracing = true;
    } else if (was == MODE_FULL && next_mode == MODE_LIGHT) {
        /* ROI end: write everything now, so that nothing is left for the exit path and the
         * trace is complete even if the guest is then killed. */
        close_window();
        writer_drain();
        if (S.roi_insns && S.vcpus_done == S.nvcpus) {
            S.n_bound_ends++; /* the host polls this (README: roi_insns) */
        }
    }
    write_plugin_json(false);
}

void request_reset(Mode next)
{
    g_mutex_lock(&S.lock);
    bool go = !S.reset_pending;
    /* An end must not be lost to a pending re-instrumentation (an IDT change). */
    if (go || next == MODE_LIGHT) {
        S.reset_pending = true;
        next_mode = next;
    }
    g_mutex_unlock(&S.lock);
    if (go) {
        qemu_plugin_reset(S.id, on_reset);
    }
}

/* Count what is pending, drain the writer and write the final plugin.json; runs once. */
void finish(void)
{
    static bool done;
    if (done) {
        return;
    }
    done = true;
    S.open_at_exit = S.tracing;
    S.tracing = false;
    /* The bound ended the region but QEMU exited before on_reset ran: count it here. */
    if (S.roi_insns && S.vcpus_done == S.nvcpus && S.mode == MODE_FULL) {
        S.n_bound_ends++;
    }
    close_window();
    writer_stop();
    write_plugin_json(true);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    finish();
}
