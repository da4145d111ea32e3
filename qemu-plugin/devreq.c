/*
 * devreq.c - device requests (README: device_requests): which instructions may write to a
 * device, and the names of the device regions written to.
 *
 * A guest's notifications to its devices (a virtio queue kick: the queue's index written to the
 * device's notify register) go through the kernel's iomap write functions (lib/iomap.c:
 * iowrite8/16/32 and their big-endian forms), which store to memory-mapped I/O or, for a port
 * address, execute `out`. Only the instructions inside those functions are instrumented: a
 * store callback on each of them (a row when the store reached I/O) and an instruction callback
 * on each `out`. Their extents come from the symbol map (a function ends where the next text
 * symbol starts) and are moved by the kernel's slide.
 */
#include <string.h>

#include "tracer.h"

/* The kernel's iomap write functions whose stores are device requests. */
static const char *const IOWRITE_SYMBOLS[IOWRITE_N] = {"iowrite8", "iowrite16", "iowrite32",
                                                       "iowrite16be", "iowrite32be"};

static GArray *text_addrs; /* every text symbol's address while the map is read */

/* One line of the symbol map (options.c: load_sysmap). */
void devreq_sysmap_line(const char *name, const char *type, uint64_t addr)
{
    if (type[0] != 't' && type[0] != 'T') {
        return;
    }
    if (!text_addrs) {
        text_addrs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    }
    g_array_append_val(text_addrs, addr);
    for (int k = 0; k < IOWRITE_N; k++) {
        if (!strcmp(name, IOWRITE_SYMBOLS[k])) {
            S.iowrite_lo[k] = addr;
        }
    }
}

/* The map is read: each function ends at the lowest text address above its start. */
void devreq_sysmap_done(void)
{
    for (int k = 0; k < IOWRITE_N; k++) {
        uint64_t lo = S.iowrite_lo[k], hi = UINT64_MAX;
        for (guint i = 0; lo && text_addrs && i < text_addrs->len; i++) {
            uint64_t a = g_array_index(text_addrs, uint64_t, i);
            if (a > lo && a < hi) {
                hi = a;
            }
        }
        /* No symbol after it: not trusted (the function's end is unknown). */
        S.iowrite_hi[k] = hi == UINT64_MAX ? 0 : hi;
        if (!S.iowrite_hi[k]) {
            S.iowrite_lo[k] = 0;
        }
    }
    if (text_addrs) {
        g_array_free(text_addrs, TRUE);
        text_addrs = NULL;
    }
}

/* The kernel's slide is found (introspect.c: slide_found; under S.lock). */
void devreq_slide(uint64_t slide)
{
    for (int k = 0; k < IOWRITE_N; k++) {
        if (S.iowrite_lo[k]) {
            S.iowrite_lo[k] += slide;
            S.iowrite_hi[k] += slide;
        }
    }
}

/* Whether the instruction at VA is inside one of the iomap write functions (the slide is
 * found, or the map needs none). */
bool devreq_insn(uint64_t va)
{
    if (!S.syms_ready || va < KTEXT_START) {
        return false;
    }
    for (int k = 0; k < IOWRITE_N; k++) {
        if (va >= S.iowrite_lo[k] && va < S.iowrite_hi[k]) {
            return true;
        }
    }
    return false;
}

/*
 * An `out` instruction (port I/O) from its bytes: the userdata of its callback (PORT_UD:
 * its index in the block, its operand size, and its port when immediate), or 0 when the
 * bytes are no `out`. Forms: e6 ib (al to imm8), e7 ib (eax/ax), ee (al to dx), ef (eax/ax),
 * with an optional operand-size prefix 66.
 */
uintptr_t devreq_port_ud(const uint8_t *p, size_t n, unsigned idx)
{
    bool o16 = n > 1 && p[0] == 0x66;
    const uint8_t *op = p + o16, *end = p + n;
    if (op >= end) {
        return 0;
    }
    unsigned size = (*op & 1) ? (o16 ? 2 : 4) : 1;
    if ((*op == 0xe6 || *op == 0xe7) && op + 2 == end) {
        return PORT_UD(idx, size, true, op[1]);
    }
    if ((*op == 0xee || *op == 0xef) && op + 1 == end) {
        return PORT_UD(idx, size, false, 0);
    }
    return 0;
}

/*
 * The index of the device region NAME (QEMU's memory region, e.g. virtio-pci-notify-virtio-blk:
 * plugin.json's device_regions). QEMU interns the names, so one pointer is one name: a vCPU
 * finds its last one without the lock.
 */
uint16_t devreq_region(VCPU *vs, const char *name)
{
    if (vs->dr_name == name && name) {
        return vs->dr_region;
    }
    g_mutex_lock(&S.lock);
    if (!S.dev_regions) {
        S.dev_regions = g_ptr_array_new();
    }
    guint i;
    for (i = 0; i < S.dev_regions->len; i++) {
        if (!g_strcmp0(g_ptr_array_index(S.dev_regions, i), name)) {
            break;
        }
    }
    if (i == S.dev_regions->len) {
        g_ptr_array_add(S.dev_regions, g_strdup(name ? name : ""));
    }
    g_mutex_unlock(&S.lock);
    vs->dr_name = name;
    vs->dr_region = (uint16_t)MIN(i, REGION_NONE - 1);
    return vs->dr_region;
}

/* plugin.json's "iowrite" (the functions' extents, moved) and "device_regions". */
void devreq_json(GString *s)
{
    g_string_append(s, "  \"iowrite\": {");
    for (int k = 0; k < IOWRITE_N; k++) {
        g_string_append_printf(s, "%s\"%s\": [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]",
                               k ? ", " : "", IOWRITE_SYMBOLS[k], S.iowrite_lo[k],
                               S.iowrite_hi[k]);
    }
    g_string_append(s, "},\n  \"device_regions\": [");
    g_mutex_lock(&S.lock);
    for (guint i = 0; S.dev_regions && i < S.dev_regions->len; i++) {
        g_string_append_printf(s, "%s\"%s\"", i ? ", " : "",
                               (const char *)g_ptr_array_index(S.dev_regions, i));
    }
    g_mutex_unlock(&S.lock);
    g_string_append(s, "],\n");
}
