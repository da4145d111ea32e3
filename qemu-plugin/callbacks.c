/*
 * callbacks.c - what runs while the guest executes: the callbacks translate.c registers on
 * every block and on the instructions that raise events. They append to the vCPU's exec stream
 * and event tables (per-vCPU state, no lock on the hot path) and end the region at roi_insns.
 */
#include <string.h>

#include "tracer.h"

/* ---------------------------------------------------------------------------------------- */
/* Which vCPU a callback runs for                                                            */

/*
 * CPU, the index QEMU passes; but under round-robin TCG with more than one vCPU (S.rr) the vCPU
 * that runs now (introspect.c: rr_running; USER: the block or instruction is user code). When
 * that cannot be told, CPU's, counted while recording (plugin.json: vcpu_unresolved).
 */
static inline VCPU *vcpu_running(unsigned int cpu, bool user)
{
    VCPU *vs = &S.vcpus[cpu];
    if (__builtin_expect(!S.rr, 1)) {
        return vs;
    }
    VCPU *run = rr_running(vs, user);
    if (!run) {
        run = vs;
        S.n_rr_unresolved += S.tracing;
    }
    S.rr_last = run;
    return run;
}

/* The vCPU whose after_syscall pairs a `syscall` with the kernel block that follows it (the
 * slide probe): CPU's; under round-robin TCG the one thread's, kept in vCPU 0 (the per-CPU
 * offsets that tell vCPUs apart are read through the slide this finds). */
static inline VCPU *slide_vcpu(unsigned int cpu)
{
    return &S.vcpus[S.rr ? 0 : cpu];
}

/* ---------------------------------------------------------------------------------------- */
/* The exec stream and the roi_insns bound                                                   */

/* The code of block X after block PREV, which the front of PREV's list did not predict (or the
 * part's first block, FIRST): its place in the list, or EXEC_SUCCESSORS plus the zigzag form
 * of the difference of the ids; X moves to the front of the list (README: exec). */
static uint32_t exec_learn(VCPU *vs, uint32_t prev, uint32_t x, bool first)
{
    int64_t d = (int64_t)x - (first ? 0 : (int64_t)prev);
    uint32_t explicit_code = EXEC_SUCCESSORS + (uint32_t)(d >= 0 ? 2 * d : -2 * d - 1);
    if (first) {
        return explicit_code;
    }
    if (prev >= vs->succ_cap) {
        uint32_t cap = MAX(MAX(prev + 1, vs->succ_cap * 2), 4096u);
        vs->succ = g_renew(Successors, vs->succ, cap);
        memset(vs->succ + vs->succ_cap, 0, (cap - vs->succ_cap) * sizeof(Successors));
        vs->succ_cap = cap;
    }
    Successors *s = &vs->succ[prev];
    if (s->gen != vs->exec_gen) {
        s->gen = vs->exec_gen;
        for (int j = 0; j < EXEC_SUCCESSORS; j++) {
            s->next[j] = EXEC_NONE;
        }
    }
    int rank = 0;
    for (int j = 1; j < EXEC_SUCCESSORS; j++) {
        if (s->next[j] == x) {
            rank = j;
            break;
        }
    }
    for (int j = rank ? rank : EXEC_SUCCESSORS - 1; j > 0; j--) {
        s->next[j] = s->next[j - 1];
    }
    s->next[0] = x;
    return rank ? (uint32_t)rank : explicit_code;
}

/*
 * Append a block to the exec stream in the successor encoding (README: exec): when the block
 * that ran before it was last followed by this one, the last row's run grows; otherwise a row
 * (its code, run 0) starts and the successor list learns it. Each part starts with empty lists
 * (a new generation), so that it decodes on its own, and holds at most `rows` decoded rows.
 */
static inline void exec_append(VCPU *vs, Block *b)
{
    Buf *e = &vs->buf[T_EXEC];
    uint32_t p = vs->exec_prev;
    if (e->n == 0) {
        vs->exec_gen++;
    }
    if (e->n && p < vs->succ_cap && vs->succ[p].gen == vs->exec_gen &&
        vs->succ[p].next[0] == b->id) {
        COL(e, EX_RUN, uint32_t)[e->n - 1]++;
    } else {
        uint32_t code = exec_learn(vs, p, b->id, e->n == 0);
        size_t r = e->n++;
        COL(e, EX_CODE, uint32_t)[r] = code;
        COL(e, EX_RUN, uint32_t)[r] = 0;
    }
    vs->exec_prev = b->id;
    vs->exec_rows++;
    vs->pending = b;
    if (++vs->exec_part_rows == e->cap) {
        flush_vcpu(vs);
    }
}

/* This vCPU has retired roi_insns instructions in the window: it stops recording, and the last
 * vCPU to get there ends the region as the end marker would. */
static void bound_stop(VCPU *vs)
{
    vs->done = true;
    vs->pending = NULL;
    /* After this vCPU's last row: pysched check needs when it stopped (README: plugin.json). */
    uint64_t t = now_ns();
    g_mutex_lock(&S.lock);
    g_array_append_val(vs->stops_ns, t);
    g_mutex_unlock(&S.lock);
    if (__atomic_add_fetch(&S.vcpus_done, 1, __ATOMIC_ACQ_REL) == S.nvcpus) {
        S.tracing = false;
        request_reset(MODE_LIGHT);
    }
}

/* Called once the previous block is counted, before anything of the next one is recorded:
 * true when this vCPU records nothing more (so the bound is checked at block granularity). */
static inline bool bound_reached(VCPU *vs)
{
    if (vs->done) {
        return true;
    }
    if (!S.roi_insns || vs->icount - vs->window_start < S.roi_insns) {
        return false;
    }
    bound_stop(vs);
    return true;
}

/* ---------------------------------------------------------------------------------------- */
/* Block callbacks                                                                           */

/* A user `syscall` is about to run (light mode; in full mode vcpu_insn_exec does this). */
void vcpu_syscall_seen(unsigned int cpu, void *udata)
{
    slide_vcpu(cpu)->after_syscall = true;
}

/* A kernel block at the map's entry_SYSCALL_64 plus a multiple of 2 MiB starts. */
void vcpu_slide_probe(unsigned int cpu, void *udata)
{
    VCPU *vs = slide_vcpu(cpu);
    if (vs->after_syscall && !S.slide_found) {
        slide_found(vs, (uint64_t)(uintptr_t)udata);
    }
    vs->after_syscall = false;
}

/* The common case: a block starts. */
void vcpu_tb_exec(unsigned int cpu, void *udata)
{
    if (!S.tracing) {
        return;
    }
    VCPU *vs = vcpu_running(cpu, ((Block *)udata)->user);
    if (vs->pending) {
        vs->icount += vs->pending->ninsn;
        vs->pending = NULL;
    }
    if (bound_reached(vs)) {
        return;
    }
    exec_append(vs, (Block *)udata);
}

/*
 * User block B runs at VA, not where it was translated: QEMU shares one translation among all
 * virtual addresses of its physical page (PC-relative blocks), so another process may run it
 * at another page. Return the variant of B at VA: made once (a new id, the same instructions
 * and frames at VA; under S.lock, in B's table) and found again in the vCPU's cache without
 * the lock.
 */
static Block *variant_of(VCPU *vs, Block *b, uint64_t va)
{
    if (!vs->vcache) {
        vs->vcache = g_new0(VCacheEntry, VCACHE_N);
    }
    VCacheEntry *e = &vs->vcache[(((uintptr_t)b >> 4) ^ (va >> 12)) % VCACHE_N];
    if (e->base == b && e->variant->vaddr == va) {
        return e->variant;
    }
    g_mutex_lock(&S.lock);
    if (!b->variants) {
        b->variants = g_hash_table_new(g_direct_hash, g_direct_equal);
    }
    Block *v = g_hash_table_lookup(b->variants, GSIZE_TO_POINTER(va));
    if (!v) {
        v = g_new0(Block, 1);
        v->id = S.next_block++;
        v->ninsn = b->ninsn;
        v->vaddr = va;
        v->vector = -1;
        v->user = true;
        v->nbytes = b->nbytes;
        v->frame = b->frame;
        v->sizes = g_memdup2(b->sizes, b->ninsn);
        emit_static_rows(v, b->paddrs, b->flags);
        g_hash_table_insert(b->variants, GSIZE_TO_POINTER(va), v);
        g_ptr_array_add(S.live, v);
        S.n_variants++;
    }
    g_mutex_unlock(&S.lock);
    e->base = b;
    e->variant = v;
    return v;
}

/*
 * A user-mode block starts (registered with register access). Its virtual page is the one of
 * the previous block when that was a user block on the same frame (no kernel entry between
 * them, so the same address space: the common case costs no register read); otherwise rip is
 * read. A process that maps one frame at two virtual pages and jumps between them without
 * entering the kernel is not told apart (README: user PCs).
 */
void vcpu_tb_exec_user(unsigned int cpu, void *udata)
{
    if (!S.tracing) {
        return;
    }
    VCPU *vs = vcpu_running(cpu, true);
    Block *b = udata, *prev = vs->pending;
    if (prev) {
        vs->icount += prev->ninsn;
        vs->pending = NULL;
    }
    if (bound_reached(vs)) {
        return;
    }
    if (!prev || !prev->user || prev->frame != b->frame || b->frame == PADDR_UNKNOWN) {
        uint64_t rip = reg_read(vs, R_RIP);
        vs->rip_reads++;
        if ((rip & PAGE_MASK_4K) != (b->vaddr & PAGE_MASK_4K)) {
            vs->rip_bad++; /* not where this block starts: keep the translated address */
            rip = b->vaddr;
        }
        vs->upage = rip & ~PAGE_MASK_4K;
    }
    uint64_t va = vs->upage | (b->vaddr & PAGE_MASK_4K);
    exec_append(vs, va == b->vaddr ? b : variant_of(vs, b, va));
}

/* How many instructions of block B retired before the one at RIP (all when RIP is not in B). */
static uint32_t retired_before(const Block *b, uint64_t rip)
{
    uint64_t va = b->vaddr;
    for (uint32_t i = 0; i < b->ninsn; i++) {
        if (va == rip) {
            return i;
        }
        va += b->sizes[i];
    }
    return b->ninsn;
}

/* The address of the IDX-th instruction of block B (0 without a block). */
static uint64_t insn_pc(const Block *b, unsigned idx)
{
    uint64_t pc = b ? b->vaddr : 0;
    for (unsigned i = 0; b && i < idx; i++) {
        pc += b->sizes[i];
    }
    return pc;
}

/* One interrupts row: an entry (kind 0) or a return (kind 1); see README.md for the columns. */
static void interrupt_row(VCPU *vs, uint64_t icount, int kind, uint64_t thread, int16_t vector,
                          uint64_t error_code, bool user, uint64_t pc, uint64_t handler,
                          uint32_t block_retired)
{
    Buf *t = &vs->buf[T_INTERRUPTS];
    size_t r = ev_row(vs, T_INTERRUPTS, icount);
    COL(t, IR_KIND, uint8_t)[r] = kind;
    COL(t, IR_THREAD, uint64_t)[r] = thread;
    COL(t, IR_CR3, uint64_t)[r] = event_cr3(vs);
    COL(t, IR_VECTOR, int16_t)[r] = vector;
    COL(t, IR_ERROR_CODE, uint64_t)[r] = error_code;
    COL(t, IR_USER, uint8_t)[r] = user;
    COL(t, IR_PC, uint64_t)[r] = pc;
    COL(t, IR_HANDLER, uint64_t)[r] = handler;
    COL(t, IR_BLOCK_RETIRED, uint32_t)[r] = block_retired;
}

/*
 * The first block of an interrupt handler starts: count what the interrupted block retired and
 * record the entry. Returns false when the bound stops this vCPU here; the entry is recorded
 * all the same, because it tells how much of the last recorded block retired.
 */
static bool interrupt_entry(VCPU *vs, Block *b)
{
    int v = b->vector;
    uint64_t rsp = reg_read(vs, R_RSP);
    uint64_t frame[3] = {0, 0, 0};
    bool ok = mem_read(vs, rsp, frame, sizeof(frame));
    int k = vector_has_error_code(v) ? 1 : 0;
    uint64_t err = k ? frame[0] : 0, rip = frame[k], cs = frame[k + 1];
    bool user = ok && (cs & 3) == 3;

    /* Only synchronous exceptions cut a block short: QEMU delivers interrupts between blocks. */
    uint32_t retired = BLOCK_NONE;
    if (vs->pending) {
        retired = vs->pending->ninsn;
        if (ok && v < 32 && v != 2) {
            retired = retired_before(vs->pending, rip);
        }
        vs->icount += retired;
        vs->pending = NULL;
    }
    if (v == 0x80) { /* recorded as a system call by the int 0x80 instruction callback */
        return !bound_reached(vs);
    }
    uint64_t thread = read_thread(vs);
    if (user) {
        entry_kind_set(thread, ENTRY_INTERRUPT);
    }
    interrupt_row(vs, vs->icount, 0, thread, (int16_t)v, err, user, rip, b->vaddr, retired);
    return !bound_reached(vs);
}

static void context_switch(VCPU *vs)
{
    Buf *t = &vs->buf[T_SWITCHES];
    size_t r = ev_row(vs, T_SWITCHES, vs->icount);
    COL(t, SW_PREV, uint64_t)[r] = reg_read(vs, R_RDI);
    COL(t, SW_NEXT, uint64_t)[r] = reg_read(vs, R_RSI);
    COL(t, SW_CR3, uint64_t)[r] = event_cr3(vs);
    /* The IDT is final long before user space runs; re-reading it now and then costs little. */
    if (vs->switches++ % IDT_REFRESH_SWITCHES == 0 && idt_refresh(vs)) {
        request_reset(MODE_FULL);
    }
}

/* A wake-up function of the kernel is entered: the task it is called for is its first argument
 * (rdi), but ttwu_do_wakeup(rq, p, ...)'s second (rsi). */
static void wakeup_row(VCPU *vs, int kind)
{
    Buf *t = &vs->buf[T_WAKEUPS];
    size_t r = ev_row(vs, T_WAKEUPS, vs->icount);
    COL(t, WK_WOKEN, uint64_t)[r] = reg_read(vs, kind == WAKE_DONE ? R_RSI : R_RDI);
    COL(t, WK_WAKER, uint64_t)[r] = read_thread(vs);
    COL(t, WK_KIND, uint8_t)[r] = (uint8_t)kind;
}

/* A block that starts an interrupt handler, __switch_to or a wake-up function (registered with
 * register access). */
void vcpu_tb_exec_special(unsigned int cpu, void *udata)
{
    if (!S.tracing) {
        return;
    }
    Block *b = udata;
    VCPU *vs = vcpu_running(cpu, b->user);
    if (vs->done) {
        return;
    }
    if (b->vector >= 0) {
        if (!interrupt_entry(vs, b)) {
            return;
        }
    } else {
        if (vs->pending) {
            vs->icount += vs->pending->ninsn;
            vs->pending = NULL;
        }
        if (bound_reached(vs)) {
            return;
        }
    }
    if (b->is_switch) {
        context_switch(vs);
    }
    if (b->wake) {
        wakeup_row(vs, b->wake);
    }
    exec_append(vs, b);
}

/* ---------------------------------------------------------------------------------------- */
/* Instruction and memory callbacks                                                          */

static void syscall_row(VCPU *vs, uint64_t icount, int kind, uint64_t thread, int abi,
                        int64_t nr, const uint64_t *args, int64_t ret, uint64_t pc, int matched)
{
    Buf *t = &vs->buf[T_SYSCALLS];
    size_t r = ev_row(vs, T_SYSCALLS, icount);
    COL(t, SC_KIND, uint8_t)[r] = kind;
    COL(t, SC_THREAD, uint64_t)[r] = thread;
    COL(t, SC_CR3, uint64_t)[r] = event_cr3(vs);
    COL(t, SC_ABI, uint8_t)[r] = abi;
    COL(t, SC_NR, int64_t)[r] = nr;
    for (int i = 0; i < 6; i++) {
        COL(t, SC_ARG0 + i, uint64_t)[r] = args ? args[i] : 0;
    }
    COL(t, SC_RET, int64_t)[r] = ret;
    COL(t, SC_PC, uint64_t)[r] = pc;
    COL(t, SC_MATCHED, uint8_t)[r] = matched;
}

void marker_row(VCPU *vs, int kind, uint64_t value, uint64_t thread, uint64_t cr3,
                       uint64_t icount)
{
    Buf *t = &vs->buf[T_MARKERS];
    size_t r = ev_row(vs, T_MARKERS, icount);
    COL(t, MK_KIND, uint8_t)[r] = kind;
    COL(t, MK_THREAD, uint64_t)[r] = thread;
    COL(t, MK_CR3, uint64_t)[r] = cr3;
    COL(t, MK_VALUE, uint64_t)[r] = value;
}

/* syscall, int 0x80, sysretq, iretq and the ROI marker: called before the instruction runs. */
void vcpu_insn_exec(unsigned int cpu, void *udata)
{
    unsigned flags = UD_FLAGS(udata), idx = UD_IDX(udata);
    VCPU *vs = vcpu_running(cpu, !(flags & (F_SYSRET | F_IRET)));
    uint64_t pc = insn_pc(vs->pending, idx);
    /* the event's icount counts this instruction */
    uint64_t icount = vs->icount + idx + 1;
    if (flags & F_SYSCALL) {
        slide_vcpu(vs->index)->after_syscall = true;
    }

    if (flags & F_MARKER) {
        uint64_t cmd = reg_read(vs, R_RAX) & 0xffffffffu, value = reg_read(vs, R_RDI);
        if (cmd == MARK_BEGIN && !S.roi_all && S.mode == MODE_LIGHT) {
            /* Resolve what needs this vCPU's context now; the reset callback starts recording. */
            idt_refresh(vs);
            S.begin_vcpu = (int)vs->index;
            S.begin_value = value;
            S.begin_thread = read_thread(vs);
            S.begin_cr3 = event_cr3(vs);
            request_reset(MODE_FULL);
        } else if (S.tracing && !vs->done && (cmd == MARK_USER || cmd == MARK_BEGIN ||
                                              (cmd == MARK_END && S.roi_all))) {
            marker_row(vs, cmd == MARK_USER ? 2 : cmd == MARK_BEGIN ? 0 : 1, value,
                       read_thread(vs), event_cr3(vs), icount);
        } else if (S.tracing && cmd == MARK_END) {
            /* A vCPU stopped by roi_insns has no stream left to place the row in. */
            if (!vs->done) {
                marker_row(vs, 1, value, read_thread(vs), event_cr3(vs), icount);
            }
            S.tracing = false;
            request_reset(MODE_LIGHT);
        }
        return;
    }
    if (!S.tracing || vs->done) {
        return;
    }
    uint64_t thread = read_thread(vs);
    if (flags & (F_SYSCALL | F_INT80)) {
        uint64_t args[6];
        int64_t nr;
        if (flags & F_SYSCALL) {
            static const int regs64[6] = {R_RDI, R_RSI, R_RDX, R_R10, R_R8, R_R9};
            nr = (int64_t)reg_read(vs, R_RAX);
            for (int i = 0; i < 6; i++) {
                args[i] = reg_read(vs, regs64[i]);
            }
        } else {
            static const int regs32[6] = {R_RBX, R_RCX, R_RDX, R_RSI, R_RDI, R_RBP};
            nr = (int64_t)(reg_read(vs, R_RAX) & 0xffffffffu);
            for (int i = 0; i < 6; i++) {
                args[i] = reg_read(vs, regs32[i]) & 0xffffffffu;
            }
        }
        entry_kind_set(thread, ENTRY_SYSCALL);
        syscall_row(vs, icount, 0, thread, (flags & F_SYSCALL) ? 64 : 32, nr, args, 0, pc, 0);
    } else if (flags & F_SYSRET) {
        int k = entry_kind_take(thread);
        syscall_row(vs, icount, 1, thread, 64, -1, NULL, (int64_t)reg_read(vs, R_RAX), pc,
                    k == ENTRY_SYSCALL);
    } else if (flags & F_IRET) {
        uint64_t frame[2] = {0, 0};
        mem_read(vs, reg_read(vs, R_RSP), frame, sizeof(frame));
        if (frame[0] == pc + 2) { /* iret_to_self: serialising, not an interrupt return */
            __atomic_add_fetch(&S.n_iret_self, 1, __ATOMIC_RELAXED);
            return;
        }
        bool user = (frame[1] & 3) == 3;
        if (user && entry_kind_take(thread) == ENTRY_SYSCALL) {
            syscall_row(vs, icount, 1, thread, 0, -1, NULL, (int64_t)reg_read(vs, R_RAX), pc, 1);
            return;
        }
        interrupt_row(vs, icount, 1, thread, -1, 0, user, frame[0], pc, 0);
    }
}

void vcpu_mem(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    /* Under round-robin TCG: the vCPU of the block callback before (a block that QEMU ends at
     * an I/O access has none: the access runs alone, then the vCPU goes on). */
    VCPU *vs = S.rr && S.rr_last ? S.rr_last : &S.vcpus[cpu];
    if (!S.tracing || vs->done) {
        return;
    }
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    Buf *t = &vs->buf[T_MEM];
    size_t r = ev_row(vs, T_MEM, vs->icount + GPOINTER_TO_UINT(udata));
    COL(t, ME_PADDR, uint64_t)[r] =
        (hw && !qemu_plugin_hwaddr_is_io(hw)) ? qemu_plugin_hwaddr_phys_addr(hw) : PADDR_UNKNOWN;
    COL(t, ME_SIZE, uint8_t)[r] = 1u << qemu_plugin_mem_size_shift(info);
    COL(t, ME_STORE, uint8_t)[r] = qemu_plugin_mem_is_store(info);
}

/* ---------------------------------------------------------------------------------------- */
/* Device requests (devreq.c says which instructions get these)                             */

/* One device_requests row for the write instruction at PC, the IDX-th of the vCPU's pending
 * block: its icount counts the instruction. */
static void devreq_row(VCPU *vs, uint64_t pc, uint32_t idx, uint64_t paddr, int space,
                       unsigned size, uint64_t value, uint16_t region)
{
    Buf *t = &vs->buf[T_DEVREQS];
    size_t r = ev_row(vs, T_DEVREQS, vs->icount + idx + 1);
    COL(t, DR_PADDR, uint64_t)[r] = paddr;
    COL(t, DR_SPACE, uint8_t)[r] = (uint8_t)space;
    COL(t, DR_SIZE, uint8_t)[r] = (uint8_t)size;
    COL(t, DR_VALUE, uint64_t)[r] = value;
    COL(t, DR_REGION, uint16_t)[r] = region;
    COL(t, DR_PC, uint64_t)[r] = pc;
}

/*
 * A store of an iomap write function ran (UDATA: the instruction's address): a row when it
 * reached I/O. Under -icount QEMU runs an I/O access alone in a block of its own with only this
 * callback, after the block it was part of started (the vCPU's pending block), so the
 * instruction's place is found in the pending block by its address.
 */
void vcpu_io_store(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    VCPU *vs = S.rr && S.rr_last ? S.rr_last : &S.vcpus[cpu];
    if (!S.tracing || vs->done) {
        return;
    }
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw || !qemu_plugin_hwaddr_is_io(hw)) {
        return;
    }
    uint64_t pc = (uint64_t)(uintptr_t)udata;
    uint32_t idx = vs->pending ? retired_before(vs->pending, pc) : 0;
    qemu_plugin_mem_value v = qemu_plugin_mem_get_value(info);
    uint64_t value = v.type == QEMU_PLUGIN_MEM_VALUE_U8 ? v.data.u8
                   : v.type == QEMU_PLUGIN_MEM_VALUE_U16 ? v.data.u16
                   : v.type == QEMU_PLUGIN_MEM_VALUE_U32 ? v.data.u32 : v.data.u64;
    devreq_row(vs, pc, idx, qemu_plugin_hwaddr_phys_addr(hw), 0,
               1u << qemu_plugin_mem_size_shift(info), value,
               devreq_region(vs, qemu_plugin_hwaddr_device_name(hw)));
}

/* An `out` of an iomap write function is about to run: the port is its immediate or dx, the
 * value al, ax or eax. */
void vcpu_port_write(unsigned int cpu, void *udata)
{
    VCPU *vs = vcpu_running(cpu, false);
    if (!S.tracing || vs->done) {
        return;
    }
    uintptr_t ud = (uintptr_t)udata;
    unsigned idx = PORT_UD_IDX(ud), size = PORT_UD_SIZE(ud);
    uint64_t pc = insn_pc(vs->pending, idx);
    uint64_t port = PORT_UD_IMM(ud) ? PORT_UD_PORT(ud) : reg_read(vs, R_RDX) & 0xffff;
    uint64_t value = reg_read(vs, R_RAX) & (size == 4 ? 0xffffffffu : size == 2 ? 0xffff : 0xff);
    devreq_row(vs, pc, idx, port, 1, size, value, REGION_NONE);
}
