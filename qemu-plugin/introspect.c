/*
 * introspect.c - what the plugin reads of the guest: registers, guest memory (through QEMU, or
 * through the kernel's page table under page-table isolation), guest-physical addresses (the
 * RAM calibration), the kernel's slide (KASLR), the IDT and the running thread.
 */
#include <string.h>

#include "tracer.h"

/* ---------------------------------------------------------------------------------------- */
/* Registers and guest memory                                                                */

uint64_t reg_read(VCPU *vs, int r)
{
    if (!vs->reg[r]) {
        return 0;
    }
    g_byte_array_set_size(vs->scratch, 0);
    int n = qemu_plugin_read_register(vs->reg[r], vs->scratch);
    uint64_t v = 0;
    if (n > 0) {
        memcpy(&v, vs->scratch->data, MIN((size_t)n, sizeof(v)));
    }
    return v;
}

/* Host pointer of LEN bytes of guest RAM at guest-physical PA (the inverse of to_paddr), or
 * NULL when they are not known to be RAM (needs the calibration and ram=). */
static uint8_t *ram_host(uint64_t pa, size_t len)
{
    if (!S.ram_base_set || !S.ram) {
        return NULL;
    }
    uint64_t off;
    if (pa + len <= S.lowmem) {
        off = pa;
    } else if (pa >= GIB4) {
        off = S.lowmem + (pa - GIB4);
    } else {
        return NULL;
    }
    if (off + len > S.ram) {
        return NULL;
    }
    return (uint8_t *)(uintptr_t)(S.ram_base + off);
}

/*
 * Read kernel memory at VA through the kernel's page table, for a vCPU on the user page table
 * of page-table isolation (PTI): there CR3 is the kernel's PGD with bit 12 set (the user half
 * of an 8 KiB PGD pair; bit 11 of the PCID, when PCIDs are on, marks the user ASID), and the
 * kernel's per-CPU data, task structs and IDT are not mapped. A 4-level walk (the guest CPU has
 * no LA57) over guest RAM read through QEMU's host mapping of it; 1 GiB and 2 MiB pages are
 * followed. The read is racy like any read of live guest memory, as the API's own is.
 */
static bool kernel_walk_read(VCPU *vs, uint64_t va, void *dst, size_t len)
{
    uint64_t cr3 = reg_read(vs, R_CR3);
    if (!(cr3 & 0x1000)) {
        return false; /* not a PTI user CR3: the kernel's own table failed, nothing to add */
    }
    const uint64_t addr_mask = 0x000ffffffffff000ULL;
    uint8_t *out = dst;
    while (len) {
        uint64_t table = cr3 & addr_mask & ~0x1fffULL, pa = 0;
        bool ok = false;
        for (int level = 3; level >= 0; level--) {
            unsigned idx = (va >> (12 + 9 * level)) & 511;
            uint64_t *e = (uint64_t *)ram_host(table + 8 * idx, 8);
            if (!e) {
                return false;
            }
            uint64_t pte = __atomic_load_n(e, __ATOMIC_RELAXED);
            if (!(pte & 1)) {
                return false;
            }
            if (level == 0 || ((level == 1 || level == 2) && (pte & 0x80))) {
                uint64_t size = 1ULL << (12 + 9 * level);
                pa = (pte & addr_mask & ~(size - 1)) | (va & (size - 1));
                ok = true;
                break;
            }
            table = pte & addr_mask;
        }
        if (!ok) {
            return false;
        }
        size_t chunk = MIN(len, 0x1000 - (va & 0xfff));
        uint8_t *h = ram_host(pa, chunk);
        if (!h) {
            return false;
        }
        memcpy(out, h, chunk);
        out += chunk;
        va += chunk;
        len -= chunk;
    }
    __atomic_add_fetch(&S.pti_reads, 1, __ATOMIC_RELAXED);
    return true;
}

bool mem_read(VCPU *vs, uint64_t va, void *dst, size_t len)
{
    if (!qemu_plugin_read_memory_vaddr(va, vs->scratch, len)) {
        return va >= KERNEL_HALF && kernel_walk_read(vs, va, dst, len);
    }
    memcpy(dst, vs->scratch->data, len);
    return true;
}

/* The address space of an event: CR3, but for a vCPU on a PTI user page table the kernel's
 * CR3 of the same process (bit 12 and the user-PCID bit 11 cleared), as __switch_to and
 * kernel-mode events see it. PTI is recognised by a kernel read that needed the walk above
 * (the IDT is read at every region begin, from user mode). */
uint64_t event_cr3(VCPU *vs)
{
    uint64_t cr3 = reg_read(vs, R_CR3);
    /* PTI is on for the whole system or not at all, and kernel PGDs are then 8 KiB aligned:
     * once a walk was needed, bit 12 marks a user CR3. */
    if ((cr3 & 0x1000) && __atomic_load_n(&S.pti_reads, __ATOMIC_RELAXED)) {
        cr3 &= ~0x1800ULL;
    }
    return cr3;
}

/* The running task_struct: current_task through whichever GS base holds the kernel's. */
uint64_t read_thread(VCPU *vs)
{
    if (!S.have_current) {
        return 0;
    }
    uint64_t gs = reg_read(vs, R_GS_BASE);
    if (gs < KERNEL_HALF) {
        gs = reg_read(vs, R_K_GS_BASE);
    }
    uint64_t task = 0;
    if (gs < KERNEL_HALF || !mem_read(vs, gs + S.sym_current, &task, sizeof(task))) {
        return 0;
    }
    return task;
}

/* ---------------------------------------------------------------------------------------- */
/* Which vCPU runs: round-robin TCG                                                          */

/*
 * QEMU 10.0 running every vCPU on one host thread (round-robin TCG: -icount, or -accel
 * tcg,thread=single) gives the callbacks inside a translated block the index of the vCPU that
 * translated it, a constant of the translation (accel/tcg/plugin-gen.c, gen_cpu_index: without
 * CF_PARALLEL it assumes a single vCPU), while every vCPU executes the shared translations. With
 * more than one vCPU the index is then often another vCPU's. The vCPU that runs is the one whose
 * per-CPU offset (__per_cpu_offset[i], what Linux on x86_64 loads into the kernel's GS base) is
 * in GS, or in KERNEL_GS while user code runs; the registers are read from the running vCPU.
 * ANY is a vCPU whose register handles and scratch buffer may be used (one thread runs them
 * all); USER says which of the two to read first. Returns NULL when no per-CPU offset matches
 * (early in boot, or a map without __per_cpu_offset).
 */
VCPU *rr_running(VCPU *any, bool user)
{
    uint64_t gs = reg_read(any, user ? R_K_GS_BASE : R_GS_BASE);
    if (gs < KERNEL_HALF) {
        gs = reg_read(any, user ? R_GS_BASE : R_K_GS_BASE);
    }
    if (gs == S.rr_gs && S.rr_current) {
        return S.rr_current;
    }
    for (int pass = 0; pass < 2 && gs >= KERNEL_HALF; pass++) {
        for (unsigned i = 0; i < S.nvcpus; i++) {
            if (S.percpu[i] == gs) {
                S.rr_gs = gs;
                S.rr_current = &S.vcpus[i];
                return S.rr_current;
            }
        }
        /* Not among the offsets read so far: read them again (they are set during boot). */
        if (pass || !S.syms_ready || !S.sym_percpu ||
            !mem_read(any, S.sym_percpu, S.percpu, S.nvcpus * sizeof(uint64_t))) {
            break;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Guest-physical addresses: the RAM calibration                                            */

/* Guest-physical address of host pointer H into guest RAM (see README: calibration). Guest
 * RAM is one host allocation; on q35 its first `lowmem` bytes are at guest-physical 0 and the
 * rest at 4 GiB. */
uint64_t to_paddr(void *h)
{
    if (!h || !S.ram_base_set || (uint64_t)(uintptr_t)h < S.ram_base) {
        return PADDR_UNKNOWN;
    }
    uint64_t off = (uint64_t)(uintptr_t)h - S.ram_base;
    if (!S.ram) {
        return off < IDENT_HI ? off : PADDR_UNKNOWN; /* size unknown: the first 2 GiB only */
    }
    if (off >= S.ram) {
        return PADDR_UNKNOWN;
    }
    return off < S.lowmem ? off : GIB4 + (off - S.lowmem);
}

/* Called under S.lock for the first instruction of every translated block. */
void calibrate(uint64_t va, void *h)
{
    if (!h) {
        return;
    }
    if (!S.ram_base_set) {
        uint64_t hi = S.ram ? MIN(S.lowmem, IDENT_HI) : IDENT_HI;
        if (va >= IDENT_LO && va < hi) {
            S.ram_base = (uint64_t)(uintptr_t)h - va;
            S.ram_base_set = true;
        }
        return;
    }
    if (va < KTEXT_START || va >= KTEXT_END) {
        return;
    }
    /* Kernel image: pa = va - KTEXT_START + phys_base, phys_base a multiple of 2 MiB. */
    uint64_t pa = to_paddr(h);
    uint64_t base = pa - (va - KTEXT_START);
    if (pa == PADDR_UNKNOWN || base % KASLR_ALIGN) {
        S.ram_base_mismatch++;
    } else if (!S.phys_base_set) {
        S.phys_base = base;
        S.phys_base_set = true;
    } else if (base != S.phys_base) {
        S.ram_base_mismatch++;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* The IDT                                                                                  */

/* The handler address of a 16-byte x86_64 IDT gate. */
static uint64_t idt_gate_offset(const uint8_t *g)
{
    return (uint64_t)g[0] | (uint64_t)g[1] << 8 | (uint64_t)g[6] << 16 | (uint64_t)g[7] << 24 |
           (uint64_t)g[8] << 32 | (uint64_t)g[9] << 40 | (uint64_t)g[10] << 48 |
           (uint64_t)g[11] << 56;
}

bool vector_has_error_code(int v)
{
    return v == 8 || (v >= 10 && v <= 14) || v == 17 || v == 21 || v == 29 || v == 30;
}

/*
 * Read the guest's IDT (idt_table) and rebuild the handler table when it changed. Called in a
 * vCPU context. Returns true when the table changed (translations must then be redone).
 */
bool idt_refresh(VCPU *vs)
{
    uint8_t idt[256 * 16];
    if (!S.syms_ready || !S.sym_idt || !mem_read(vs, S.sym_idt, idt, sizeof(idt))) {
        return false;
    }
    S.n_idt_reads++;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(idt); i++) {
        h = (h ^ idt[i]) * 1099511628211ull;
    }
    GHashTable *t = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    uint64_t shared = 0;
    for (int v = 0; v < 256; v++) {
        const uint8_t *g = idt + 16 * v;
        if (!(g[5] & 0x80)) { /* not present */
            continue;
        }
        uint64_t off = idt_gate_offset(g);
        uint64_t *key = g_new(uint64_t, 1);
        *key = off;
        if (g_hash_table_contains(t, key)) { /* keep the lowest vector */
            shared++;
            g_free(key);
            continue;
        }
        g_hash_table_insert(t, key, GINT_TO_POINTER(v + 1));
    }
    g_mutex_lock(&S.lock);
    bool changed = h != S.idt_hash;
    if (changed) {
        if (S.handlers) {
            g_hash_table_destroy(S.handlers);
        }
        S.handlers = t;
        S.idt_hash = h;
        S.n_shared_handlers = shared;
        t = NULL;
    }
    g_mutex_unlock(&S.lock);
    if (t) {
        g_hash_table_destroy(t);
    }
    return changed;
}

/* ---------------------------------------------------------------------------------------- */
/* KASLR: the kernel's slide                                                                */

/*
 * KASLR. The kernel's virtual slide is where entry_SYSCALL_64 runs less where the map puts it:
 * the first kernel block a vCPU executes after a user `syscall` is the one at MSR_LSTAR, which
 * Linux sets to entry_SYSCALL_64 (with or without PTI). The slide is a multiple of 2 MiB, so
 * only blocks at the map's address plus a multiple of 2 MiB are probed; the probe that follows
 * a `syscall` on its vCPU is the entry. Then every kernel-image symbol of the map is moved by
 * the slide, and the IDT read at the moved idt_table verifies it: every present gate must
 * point into the moved [_stext, _etext) or [_sinittext, _einittext) (unused vectors keep the
 * early boot handlers of .init.text).
 */
void slide_found(VCPU *vs, uint64_t entry_va)
{
    g_mutex_lock(&S.lock);
    if (S.slide_found) {
        g_mutex_unlock(&S.lock);
        return;
    }
    S.slide = entry_va - S.map_entry;
    uint64_t *syms[] = {&S.sym_idt, &S.sym_switch_to, &S.sym_wake[WAKE_TTWU],
                        &S.sym_wake[WAKE_NEW], &S.sym_wake[WAKE_DONE], &S.sym_percpu};
    for (size_t i = 0; i < G_N_ELEMENTS(syms); i++) {
        if (*syms[i] >= KTEXT_START) {
            *syms[i] += S.slide;
        }
    }
    devreq_slide(S.slide);
    S.slide_found = true;
    S.syms_ready = true;
    g_mutex_unlock(&S.lock);
    uint8_t idt[256 * 16];
    if (S.map_stext && S.map_etext && mem_read(vs, S.sym_idt, idt, sizeof(idt))) {
        uint64_t lo = S.map_stext + S.slide, hi = S.map_etext + S.slide, outside = 0, present = 0;
        for (int v = 0; v < 256; v++) {
            const uint8_t *g = idt + 16 * v;
            if (!(g[5] & 0x80)) {
                continue;
            }
            uint64_t off = idt_gate_offset(g);
            present++;
            bool init = S.map_sinit && off >= S.map_sinit + S.slide && off < S.map_einit + S.slide;
            outside += (off < lo || off >= hi) && !init;
        }
        S.idt_outside_text = outside;
        S.slide_verified = present > 0 && outside == 0;
    }
    /* Blocks translated so far were matched against no kernel symbol: translate again. */
    if (S.mode == MODE_FULL) {
        idt_refresh(vs);
        request_reset(MODE_FULL);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* How each thread last entered the kernel from user mode                                   */

void entry_kind_set(uint64_t thread, int kind)
{
    if (!thread) {
        return;
    }
    g_mutex_lock(&S.lock);
    g_hash_table_insert(S.entry_kind, GSIZE_TO_POINTER(thread), GINT_TO_POINTER(kind));
    g_mutex_unlock(&S.lock);
}

int entry_kind_take(uint64_t thread)
{
    if (!thread) {
        return 0;
    }
    g_mutex_lock(&S.lock);
    int k = GPOINTER_TO_INT(g_hash_table_lookup(S.entry_kind, GSIZE_TO_POINTER(thread)));
    g_hash_table_remove(S.entry_kind, GSIZE_TO_POINTER(thread));
    g_mutex_unlock(&S.lock);
    return k;
}
