/*
 * tracer.h - what the plugin's files share: constants of the guest (x86_64 Linux), the state of
 * the plugin and of each vCPU, and the functions one file offers the others.
 *
 * The files, one job each (README.md beside them says what the plugin records and how):
 *   tracer.c      version, the state, install
 *   options.c     the plugin's options, the symbol map, the output directory
 *   tables.c      table schemas, row buffers, the writer thread
 *   introspect.c  guest introspection: registers, guest memory and RAM calibration, the
 *                 kernel's slide (KASLR), the IDT, the running thread
 *   translate.c   translation: what each new block is and which callbacks it gets
 *   callbacks.c   execution callbacks: the exec stream and the event rows
 *   window.c      vCPU set-up, region begin and end (reset), translation flushes, exit
 *   plugin_json.c plugin.json, the plugin's own account of the run
 *   devreq.c      device requests: which instructions write to devices, the regions' names
 */
#ifndef PYSCHED_TRACER_H
#define PYSCHED_TRACER_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <glib.h>
#include <qemu-plugin.h>

#include "tables.h"

/* ---------------------------------------------------------------------------------------- */
/* Constants                                                                                 */

#define KTEXT_START 0xffffffff80000000ULL /* __START_KERNEL_map: maps phys_base (0 with nokaslr) */
#define KTEXT_END 0xffffffffc0000000ULL
#define KERNEL_HALF 0xffff800000000000ULL
#define USER_END 0x0000800000000000ULL /* user-mode addresses are below (4-level paging) */
#define PAGE_MASK_4K 0xfffULL
/* KASLR moves the kernel image (virtually and physically) by multiples of CONFIG_PHYSICAL_ALIGN,
 * which x86_64 requires to be a multiple of 2 MiB. */
#define KASLR_ALIGN 0x200000ULL
/* The RAM calibration: the first block translated at or above 1 MiB and below 2 GiB runs from
 * guest RAM at an identity address (firmware, boot loader or the kernel's decompressor, with
 * paging off or identity-mapped: nothing else runs before them), so that haddr - vaddr is the
 * host address of guest-physical 0. Below 1 MiB are the option ROMs and the BIOS. */
#define IDENT_LO 0x100000ULL
#define IDENT_HI 0x80000000ULL
#define GIB4 0x100000000ULL
/* q35 keeps all RAM below 4 GiB up to 0xb0000000 - 1 bytes; from 0xb0000000 on, 2 GiB below
 * and the rest from 4 GiB (QEMU's pc_q35_init; no max-ram-below-4g given). */
#define Q35_SPLIT 0xb0000000ULL
#define Q35_LOWMEM 0x80000000ULL
#define PADDR_UNKNOWN UINT64_MAX
#define BLOCK_NONE UINT32_MAX /* block_retired when no recorded block was interrupted */

#define MARK_BEGIN 0x5ced0001u
#define MARK_END 0x5ced0002u
#define MARK_USER 0x5ced0003u

/* wakeups.kind: the kernel function whose entry the row records (README: wakeups); 0 is none */
enum { WAKE_TTWU = 1, WAKE_NEW, WAKE_DONE, WAKE_N };
extern const char *const WAKE_SYMBOLS[WAKE_N];

/* insns.flags bits */
enum { F_SYSCALL = 1, F_INT80 = 2, F_SYSRET = 4, F_IRET = 8, F_MARKER = 16 };

/* userdata of instruction callbacks: index in the block and the instruction's flags */
#define INSN_UD(idx, flags) GUINT_TO_POINTER(((idx) << 8) | (flags))
#define UD_IDX(ud) (GPOINTER_TO_UINT(ud) >> 8)
#define UD_FLAGS(ud) (GPOINTER_TO_UINT(ud) & 0xff)

/* Device requests (devreq.c): the kernel's iomap write functions, by index; the userdata of an
 * `out` instruction's callback (index in the block, operand size, immediate port); the region
 * of a port write, which has no QEMU memory region. */
#define IOWRITE_N 5
#define PORT_UD(idx, size, imm, port) \
    (((uintptr_t)(idx) << 16) | ((uintptr_t)(size) << 10) | ((uintptr_t)(imm) << 9) | (port))
#define PORT_UD_IDX(ud) ((unsigned)((ud) >> 16))
#define PORT_UD_SIZE(ud) ((unsigned)(((ud) >> 10) & 7))
#define PORT_UD_IMM(ud) (((ud) >> 9) & 1)
#define PORT_UD_PORT(ud) ((unsigned)((ud) & 0xff))
#define REGION_NONE UINT16_MAX

#define IDT_REFRESH_SWITCHES 4096    /* re-read the IDT every this many context switches */

/* How a thread last entered the kernel from user mode (S.entry_kind). */
enum { ENTRY_SYSCALL = 1, ENTRY_INTERRUPT = 2 };

/* ---------------------------------------------------------------------------------------- */
/* State                                                                                     */

/* One translation block, as the plugin saw it at translation, or a variant of a user-mode one:
 * the same instructions at the virtual address another process runs them at (README: user
 * PCs). */
typedef struct {
    uint32_t id;
    uint32_t ninsn;
    uint64_t vaddr;
    int16_t vector;   /* IDT vector whose handler starts here, or -1 */
    bool is_switch;   /* starts __switch_to */
    uint8_t wake;     /* WAKE_* kind of the wake-up function that starts here, or 0 */
    bool user;        /* starts below USER_END */
    uint32_t nbytes;
    uint64_t frame;   /* guest-physical frame of the first instruction, or PADDR_UNKNOWN */
    uint8_t *sizes;   /* instruction lengths, for locating a faulting RIP */
    /* User-mode translations only (NULL otherwise and in variants): what a variant copies,
     * and the variants made so far (vaddr -> Block, under S.lock). */
    uint64_t *paddrs;
    uint8_t *flags;
    GHashTable *variants;
} Block;

/* A vCPU's recently used variants, direct-mapped by (translated block, address): found
 * without the lock; cleared when QEMU flushes its translations. */
#define VCACHE_N 1024
typedef struct {
    const Block *base;
    Block *variant;
} VCacheEntry;

/* The successor list of one block in the exec part being buffered (README: exec): the last
 * EXEC_SUCCESSORS distinct blocks that followed it, most recent first, EXEC_NONE where none
 * yet; valid when gen is the part's generation (a new part starts with every list empty). */
#define EXEC_SUCCESSORS 4
#define EXEC_NONE UINT32_MAX
typedef struct {
    uint32_t gen;
    uint32_t next[EXEC_SUCCESSORS];
} Successors;

/* Register handles (the same on every vCPU, read once in vcpu_init). */
enum { R_RAX, R_RBX, R_RCX, R_RDX, R_RSI, R_RDI, R_RBP, R_RSP, R_R8, R_R9, R_R10,
       R_GS_BASE, R_K_GS_BASE, R_CR3, R_RIP, R_N };

/* Per-vCPU state: touched only by its own vCPU thread (and in exclusive sections). */
typedef struct {
    unsigned int index;
    Buf buf[T_N];          /* only the per-vCPU tables are used */
    uint64_t icount;       /* instructions retired before `pending` started */
    uint64_t exec_rows;    /* rows appended to this vCPU's exec stream (decoded rows) */
    uint64_t exec_part_rows; /* ... of them in the buffered part */
    /* The successor lists of the part being buffered (exec_append), per block id. */
    Successors *succ;
    uint32_t succ_cap;
    uint32_t exec_gen;
    uint32_t exec_prev;    /* the block appended last */
    Block *pending;        /* the block that started last, not yet counted */
    uint64_t switches;     /* context switches seen, to pace IDT refreshes */
    bool after_syscall;    /* a `syscall` ran and no slide probe has run since (KASLR) */
    uint64_t window_start; /* icount when the current window began */
    bool done;             /* roi_insns reached: records nothing more in this window */
    GArray *stops_ns;      /* uint64 time_ns of each roi_insns stop, one per region (S.lock) */
    uint64_t upage;        /* virtual page of the last user block that read rip */
    uint64_t rip_reads;    /* user blocks whose rip was read (plugin.json) */
    uint64_t rip_bad;      /* ... whose rip had another page offset than the block */
    VCacheEntry *vcache;   /* VCACHE_N entries, allocated with the first variant */
    GThread *thread;       /* the host thread that set this vCPU up (round-robin detection) */
    GByteArray *scratch;
    struct qemu_plugin_register *reg[R_N];
    const char *dr_name;   /* the device region this vCPU last wrote to, and its index */
    uint16_t dr_region;
} VCPU;

typedef enum { MODE_LIGHT, MODE_FULL } Mode;

typedef struct {
    /* options */
    char *out;
    char *sysmap;
    bool roi_all;
    bool data;
    size_t rows;
    int zstd;      /* level of every table but exec */
    int exec_zstd; /* level of exec parts (README: exec_zstd) */
    uint64_t ram;
    uint64_t roi_insns; /* 0: no bound */
    /* symbols */
    uint64_t sym_idt, sym_current, sym_switch_to;
    uint64_t sym_wake[WAKE_N]; /* by kind; 0 when the map lacks the function: no such rows */
    uint64_t sym_percpu;       /* __per_cpu_offset (round-robin TCG), 0 when the map lacks it */
    bool have_current;
    /* the iomap write functions' [lo, hi) (moved by the slide; 0 when the map lacks one) */
    uint64_t iowrite_lo[IOWRITE_N], iowrite_hi[IOWRITE_N];
    GPtrArray *dev_regions; /* names of the device regions written to, by index (S.lock) */
    /* KASLR: the map's (link-time) addresses of the symbols above are moved by `slide` once it
     * is found; until then no kernel-text symbol is used (syms_ready false). */
    uint64_t map_entry, map_stext, map_etext; /* entry_SYSCALL_64, _stext, _etext */
    uint64_t map_sinit, map_einit;            /* _sinittext, _einittext */
    uint64_t slide;
    bool slide_found, syms_ready, slide_verified;
    uint64_t idt_outside_text; /* IDT handlers outside the slid kernel text at verification */
    /* RAM layout (from ram=): bytes below 4 GiB; the rest is at 4 GiB */
    uint64_t lowmem;
    /* kernel physical base: pa = va - KTEXT_START + phys_base for the kernel image */
    uint64_t phys_base;
    bool phys_base_set;
    uint64_t pti_reads; /* kernel reads done by a walk of the kernel page table (PTI) */
    /* run state */
    qemu_plugin_id_t id;
    Mode mode;
    volatile bool tracing;
    bool open_at_exit; /* a region was still open when QEMU exited */
    bool reset_pending;
    VCPU *vcpus;
    unsigned int nvcpus;
    struct timespec t0;
    /* translation-time tables, under `lock` */
    GMutex lock;
    uint32_t next_block;
    Buf statics[2]; /* T_BLOCKS, T_INSNS */
    GPtrArray *live; /* Blocks of the current translations, freed when QEMU flushes them */
    GHashTable *handlers; /* handler vaddr -> vector + 1 */
    uint64_t idt_hash;
    uint64_t ram_base;
    bool ram_base_set;
    uint64_t ram_base_mismatch;
    /* per-thread "how it last entered the kernel from user mode", under `lock` */
    GHashTable *entry_kind;
    /* pending begin marker (recorded by the reset callback) */
    int begin_vcpu;
    uint64_t begin_value, begin_thread, begin_cr3;
    /* writer thread */
    GThread *writer;
    GAsyncQueue *queue;
    GMutex flow_lock;
    GCond flow_cond;
    size_t inflight;
    /* counters for plugin.json */
    uint64_t n_blocks, n_windows, n_iret_self, n_shared_handlers, n_idt_reads, n_parts;
    uint64_t n_bound_ends; /* windows ended by roi_insns */
    uint64_t n_variants;   /* user blocks recorded again at another process's address */
    bool have_rip;         /* the vCPUs expose rip: user blocks are recorded where they run */
    /* Round-robin TCG: one host thread runs every vCPU (callbacks.c: vcpu_running) */
    bool rr;
    uint64_t *percpu;      /* the kernel's per-CPU offset of each vCPU, as last read */
    uint64_t rr_gs;        /* the kernel GS base last resolved, and its vCPU */
    VCPU *rr_current;
    VCPU *rr_last;         /* the vCPU the last recording callback ran for */
    uint64_t n_rr_unresolved; /* recording callbacks whose vCPU was not found */
    unsigned int vcpus_done; /* vCPUs that reached roi_insns in this window (atomic) */
} TracerState;

extern TracerState S;

/* ---------------------------------------------------------------------------------------- */
/* What each file offers the others                                                          */

/* tables.c: the per-vCPU side of the tables */
void flush_vcpu(VCPU *vs);
uint64_t now_ns(void);
size_t ev_row(VCPU *vs, int table, uint64_t icount);
void emit_static_rows(const Block *b, const uint64_t *paddrs, const uint8_t *flags);

/* introspect.c */
uint64_t reg_read(VCPU *vs, int r);
VCPU *rr_running(VCPU *any, bool user);
bool mem_read(VCPU *vs, uint64_t va, void *dst, size_t len);
uint64_t event_cr3(VCPU *vs);
uint64_t read_thread(VCPU *vs);
bool vector_has_error_code(int v);
bool idt_refresh(VCPU *vs);
void entry_kind_set(uint64_t thread, int kind);
int entry_kind_take(uint64_t thread);
void slide_found(VCPU *vs, uint64_t entry_va);
uint64_t to_paddr(void *h);
void calibrate(uint64_t va, void *h);

/* translate.c */
void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

/* callbacks.c */
void vcpu_syscall_seen(unsigned int cpu, void *udata);
void vcpu_slide_probe(unsigned int cpu, void *udata);
void vcpu_tb_exec(unsigned int cpu, void *udata);
void vcpu_tb_exec_user(unsigned int cpu, void *udata);
void vcpu_tb_exec_special(unsigned int cpu, void *udata);
void vcpu_insn_exec(unsigned int cpu, void *udata);
void vcpu_mem(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata);
void vcpu_io_store(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata);
void vcpu_port_write(unsigned int cpu, void *udata);
void marker_row(VCPU *vs, int kind, uint64_t value, uint64_t thread, uint64_t cr3,
                uint64_t icount);

/* window.c */
void register_callbacks(void);
void request_reset(Mode next);
void finish(void);

/* plugin_json.c */
void write_plugin_json(bool final);

/* devreq.c */
void devreq_sysmap_line(const char *name, const char *type, uint64_t addr);
void devreq_sysmap_done(void);
void devreq_slide(uint64_t slide);
bool devreq_insn(uint64_t va);
uintptr_t devreq_port_ud(const uint8_t *p, size_t n, unsigned idx);
uint16_t devreq_region(VCPU *vs, const char *name);
void devreq_json(GString *s);

/* options.c */
bool parse_options(int argc, char **argv);
bool load_sysmap(const char *path);
bool prepare_out(void);

#endif
