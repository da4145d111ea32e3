/*
 * translate.c - a new translation block: what it is (its instructions, frames and flags, the
 * handler, __switch_to or wake-up function it starts), its rows in the static tables, and the
 * callbacks it gets (callbacks.c). In light mode (outside the region) only the ROI marker and,
 * until the kernel's slide is found, the system call entry are instrumented.
 */
#include "tracer.h"

/* The event an instruction raises, from its bytes (insns.flags, README: insns). */
static unsigned decode_flags(const uint8_t *p, size_t n)
{
    if (n == 2 && p[0] == 0x0f && p[1] == 0x05) {
        return F_SYSCALL;
    }
    if (n == 2 && p[0] == 0xcd && p[1] == 0x80) {
        return F_INT80;
    }
    if (n == 3 && p[0] == 0x48 && p[1] == 0x0f && p[2] == 0x07) {
        return F_SYSRET;
    }
    if (n == 2 && p[0] == 0x48 && p[1] == 0xcf) {
        return F_IRET;
    }
    if (n == 3 && p[0] == 0x48 && p[1] == 0x87 && p[2] == 0xdb) {
        return F_MARKER;
    }
    return 0;
}

/* An instruction of the kernel's iomap write functions (devreq.c): an `out` gets a callback
 * before it runs, any other a callback after each store it makes (a row when it reached I/O). */
static void instrument_devreq(struct qemu_plugin_insn *insn, size_t idx)
{
    uint8_t bytes[16];
    size_t sz = qemu_plugin_insn_data(insn, bytes, sizeof(bytes));
    uintptr_t port = devreq_port_ud(bytes, sz, (unsigned)idx);
    if (port) {
        qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_port_write, QEMU_PLUGIN_CB_R_REGS,
                                               (void *)port);
    } else {
        qemu_plugin_register_vcpu_mem_cb(insn, vcpu_io_store, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_W,
                                         (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn));
    }
}

void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t va = qemu_plugin_tb_vaddr(tb);
    if (n == 0) {
        return;
    }
    uint8_t bytes[16];

    g_mutex_lock(&S.lock);
    calibrate(va, qemu_plugin_insn_haddr(qemu_plugin_tb_get_insn(tb, 0)));
    /* Until the slide is found: probe blocks where entry_SYSCALL_64 may be (see above). */
    bool probe = S.map_entry && !S.slide_found && va >= KTEXT_START && va < KTEXT_END &&
                 (va - S.map_entry) % KASLR_ALIGN == 0;
    if (probe) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_slide_probe, QEMU_PLUGIN_CB_R_REGS,
                                             (void *)(uintptr_t)va);
    }
    if (S.mode == MODE_LIGHT) {
        bool want_syscalls = S.map_entry && !S.slide_found;
        g_mutex_unlock(&S.lock);
        for (size_t i = 0; i < n; i++) {
            struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
            size_t sz = qemu_plugin_insn_data(insn, bytes, sizeof(bytes));
            unsigned f = decode_flags(bytes, sz);
            if (f == F_MARKER) {
                qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_insn_exec,
                                                       QEMU_PLUGIN_CB_R_REGS,
                                                       INSN_UD(i, F_MARKER));
            } else if (f == F_SYSCALL && want_syscalls) {
                qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_syscall_seen,
                                                       QEMU_PLUGIN_CB_NO_REGS, NULL);
            }
        }
        return;
    }

    Block *b = g_new0(Block, 1);
    b->id = S.next_block++;
    b->ninsn = n;
    b->vaddr = va;
    b->sizes = g_new(uint8_t, n);
    gpointer vec = S.handlers ? g_hash_table_lookup(S.handlers, &va) : NULL;
    b->vector = vec ? (int16_t)(GPOINTER_TO_INT(vec) - 1) : -1;
    b->is_switch = S.syms_ready && S.sym_switch_to && va == S.sym_switch_to;
    b->wake = 0;
    for (int k = WAKE_TTWU; k < WAKE_N && S.syms_ready; k++) {
        if (S.sym_wake[k] && va == S.sym_wake[k]) {
            b->wake = (uint8_t)k;
        }
    }
    b->user = va < USER_END;
    S.n_blocks++;
    g_ptr_array_add(S.live, b);

    uint64_t paddrs[n];
    uint8_t flags[n];
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t sz = qemu_plugin_insn_data(insn, bytes, sizeof(bytes));
        flags[i] = (uint8_t)decode_flags(bytes, sz);
        b->sizes[i] = (uint8_t)qemu_plugin_insn_size(insn);
        b->nbytes += b->sizes[i];
        paddrs[i] = to_paddr(qemu_plugin_insn_haddr(insn));
    }
    b->frame = paddrs[0] == PADDR_UNKNOWN ? PADDR_UNKNOWN : paddrs[0] >> 12;
    emit_static_rows(b, paddrs, flags);
    bool user_cb = b->user && S.have_rip;
    if (user_cb) { /* what its variants copy */
        b->paddrs = g_memdup2(paddrs, sizeof(paddrs));
        b->flags = g_memdup2(flags, sizeof(flags));
    }
    g_mutex_unlock(&S.lock);

    if (b->vector >= 0 || b->is_switch || b->wake) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_tb_exec_special, QEMU_PLUGIN_CB_R_REGS, b);
    } else if (user_cb) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_tb_exec_user, QEMU_PLUGIN_CB_R_REGS, b);
    } else {
        /* Round-robin TCG: vcpu_running reads registers. */
        qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_tb_exec,
                                             S.rr ? QEMU_PLUGIN_CB_R_REGS : QEMU_PLUGIN_CB_NO_REGS,
                                             b);
    }
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (flags[i]) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_insn_exec, QEMU_PLUGIN_CB_R_REGS,
                                                   INSN_UD(i, flags[i]));
        }
        if (S.data) {
            qemu_plugin_register_vcpu_mem_cb(insn, vcpu_mem, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, GUINT_TO_POINTER(i));
        }
        if (!b->user && devreq_insn(qemu_plugin_insn_vaddr(insn))) {
            instrument_devreq(insn, i);
        }
    }
}
