/*
 * tracer.c - pysched's full-system tracer: a QEMU TCG plugin (API v4) that records, for every
 * vCPU of an x86_64 Linux guest, the retired block stream with guest-physical frames, system
 * calls, interrupts/exceptions, context switches, wake-ups and ROI markers into Parquet tables.
 *
 * Layout of this file: includes, version, constants and state, table buffers and the writer
 * thread, guest introspection (registers, IDT, thread key), callbacks, translation, exit and
 * reset, option parsing, install. See README.md beside it for the tables and how events are
 * derived.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <qemu-plugin.h>

#include "parquet_writer.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* ---------------------------------------------------------------------------------------- */
/* Constants                                                                                 */

#define SCHEMA_VERSION "1"
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
static const char *const WAKE_SYMBOLS[WAKE_N] = {
    [WAKE_TTWU] = "try_to_wake_up", [WAKE_NEW] = "wake_up_new_task",
    [WAKE_DONE] = "ttwu_do_wakeup"};

/* insns.flags bits */
enum { F_SYSCALL = 1, F_INT80 = 2, F_SYSRET = 4, F_IRET = 8, F_MARKER = 16 };

#define EVENT_ROWS 65536             /* rows per part of the small event tables */
#define MAX_INFLIGHT_BYTES (768u << 20) /* vCPUs wait when the writer is this far behind */
#define IDT_REFRESH_SWITCHES 4096    /* re-read the IDT every this many context switches */

/* ---------------------------------------------------------------------------------------- */
/* Table schemas. Every table's columns are named by an enum (the column's index) and listed
 * in that order, which is the order of README.md and pysched/trace/schema.py. */

/* Columns every per-vCPU event table but mem starts with. */
enum { EV_VCPU, EV_ICOUNT, EV_EXEC_ROW, EV_TIME_NS, EV_N };
#define EV_COLS [EV_VCPU] = {"vcpu", PQ_U16, PQ_DICT}, [EV_ICOUNT] = {"icount", PQ_U64, PQ_DELTA}, \
    [EV_EXEC_ROW] = {"exec_row", PQ_U64, PQ_DELTA}, [EV_TIME_NS] = {"time_ns", PQ_U64, PQ_DELTA}

enum { BL_BLOCK, BL_VADDR, BL_NINSN, BL_NBYTES, BL_N };
static const pq_column COLS_BLOCKS[BL_N] = {
    [BL_BLOCK] = {"block", PQ_U32, PQ_DELTA}, [BL_VADDR] = {"vaddr", PQ_U64, PQ_PLAIN},
    [BL_NINSN] = {"ninsn", PQ_U32, PQ_DICT}, [BL_NBYTES] = {"nbytes", PQ_U32, PQ_DICT}};

enum { IN_BLOCK, IN_IDX, IN_VADDR, IN_PADDR, IN_SIZE, IN_FLAGS, IN_N };
static const pq_column COLS_INSNS[IN_N] = {
    [IN_BLOCK] = {"block", PQ_U32, PQ_DELTA}, [IN_IDX] = {"idx", PQ_U16, PQ_DICT},
    [IN_VADDR] = {"vaddr", PQ_U64, PQ_DELTA}, [IN_PADDR] = {"paddr", PQ_U64, PQ_DELTA},
    [IN_SIZE] = {"size", PQ_U8, PQ_DICT}, [IN_FLAGS] = {"flags", PQ_U8, PQ_DICT}};

/* Byte stream split: the four bytes of every id in four streams, which zstd compresses two to
 * three times better than dictionary indices on kernel-heavy streams (tens of thousands of
 * distinct blocks). */
enum { EX_BLOCK, EX_N };
static const pq_column COLS_EXEC[EX_N] = {[EX_BLOCK] = {"block", PQ_U32, PQ_SPLIT}};

enum { SC_KIND = EV_N, SC_THREAD, SC_CR3, SC_ABI, SC_NR, SC_ARG0, SC_ARG5 = SC_ARG0 + 5, SC_RET,
       SC_PC, SC_MATCHED, SC_N };
static const pq_column COLS_SYSCALLS[SC_N] = {
    EV_COLS, [SC_KIND] = {"kind", PQ_U8, PQ_DICT}, [SC_THREAD] = {"thread", PQ_U64, PQ_DICT},
    [SC_CR3] = {"cr3", PQ_U64, PQ_DICT}, [SC_ABI] = {"abi", PQ_U8, PQ_DICT},
    [SC_NR] = {"nr", PQ_I64, PQ_DICT}, [SC_ARG0] = {"arg0", PQ_U64, PQ_DICT},
    [SC_ARG0 + 1] = {"arg1", PQ_U64, PQ_DICT}, [SC_ARG0 + 2] = {"arg2", PQ_U64, PQ_DICT},
    [SC_ARG0 + 3] = {"arg3", PQ_U64, PQ_DICT}, [SC_ARG0 + 4] = {"arg4", PQ_U64, PQ_DICT},
    [SC_ARG5] = {"arg5", PQ_U64, PQ_DICT}, [SC_RET] = {"ret", PQ_I64, PQ_DICT},
    [SC_PC] = {"pc", PQ_U64, PQ_DICT}, [SC_MATCHED] = {"matched", PQ_U8, PQ_DICT}};

enum { IR_KIND = EV_N, IR_THREAD, IR_CR3, IR_VECTOR, IR_ERROR_CODE, IR_USER, IR_PC, IR_HANDLER,
       IR_BLOCK_RETIRED, IR_N };
static const pq_column COLS_INTERRUPTS[IR_N] = {
    EV_COLS, [IR_KIND] = {"kind", PQ_U8, PQ_DICT}, [IR_THREAD] = {"thread", PQ_U64, PQ_DICT},
    [IR_CR3] = {"cr3", PQ_U64, PQ_DICT}, [IR_VECTOR] = {"vector", PQ_I16, PQ_DICT},
    [IR_ERROR_CODE] = {"error_code", PQ_U64, PQ_DICT}, [IR_USER] = {"user", PQ_U8, PQ_DICT},
    [IR_PC] = {"pc", PQ_U64, PQ_DICT}, [IR_HANDLER] = {"handler", PQ_U64, PQ_DICT},
    [IR_BLOCK_RETIRED] = {"block_retired", PQ_U32, PQ_DICT}};

enum { SW_PREV = EV_N, SW_NEXT, SW_CR3, SW_N };
static const pq_column COLS_SWITCHES[SW_N] = {
    EV_COLS, [SW_PREV] = {"prev", PQ_U64, PQ_DICT}, [SW_NEXT] = {"next", PQ_U64, PQ_DICT},
    [SW_CR3] = {"cr3", PQ_U64, PQ_DICT}};

enum { MK_KIND = EV_N, MK_THREAD, MK_CR3, MK_VALUE, MK_N };
static const pq_column COLS_MARKERS[MK_N] = {
    EV_COLS, [MK_KIND] = {"kind", PQ_U8, PQ_DICT}, [MK_THREAD] = {"thread", PQ_U64, PQ_DICT},
    [MK_CR3] = {"cr3", PQ_U64, PQ_DICT}, [MK_VALUE] = {"value", PQ_U64, PQ_DICT}};

/* woken: the task the kernel function was called for; waker: the running task (the waking
 * thread, or the task an interrupt interrupted). */
enum { WK_WOKEN = EV_N, WK_WAKER, WK_KIND, WK_N };
static const pq_column COLS_WAKEUPS[WK_N] = {
    EV_COLS, [WK_WOKEN] = {"woken", PQ_U64, PQ_DICT}, [WK_WAKER] = {"waker", PQ_U64, PQ_DICT},
    [WK_KIND] = {"kind", PQ_U8, PQ_DICT}};

/* No virtual address: it would cost a quarter of data mode's write bandwidth. */
enum { ME_ICOUNT, ME_PADDR, ME_SIZE, ME_STORE, ME_N };
static const pq_column COLS_MEM[ME_N] = {
    [ME_ICOUNT] = {"icount", PQ_U64, PQ_DELTA}, [ME_PADDR] = {"paddr", PQ_U64, PQ_SPLIT},
    [ME_SIZE] = {"size", PQ_U8, PQ_DICT}, [ME_STORE] = {"store", PQ_U8, PQ_DICT}};

#define NCOLS(a) (sizeof(a) / sizeof((a)[0]))
#define MAXCOLS 20
_Static_assert(SC_N <= MAXCOLS, "MAXCOLS is below the widest table");

typedef struct {
    const char *name;
    const pq_column *cols;
    size_t ncols;
} TableDef;

/* Per-vCPU event tables are T_SYSCALLS..T_WAKEUPS (allocated together); T_MEM comes last. */
enum { T_BLOCKS, T_INSNS, T_EXEC, T_SYSCALLS, T_INTERRUPTS, T_SWITCHES, T_MARKERS, T_WAKEUPS,
       T_MEM, T_N };
static const TableDef TABLES[T_N] = {
    [T_BLOCKS] = {"blocks", COLS_BLOCKS, NCOLS(COLS_BLOCKS)},
    [T_INSNS] = {"insns", COLS_INSNS, NCOLS(COLS_INSNS)},
    [T_EXEC] = {"exec", COLS_EXEC, NCOLS(COLS_EXEC)},
    [T_SYSCALLS] = {"syscalls", COLS_SYSCALLS, NCOLS(COLS_SYSCALLS)},
    [T_INTERRUPTS] = {"interrupts", COLS_INTERRUPTS, NCOLS(COLS_INTERRUPTS)},
    [T_SWITCHES] = {"switches", COLS_SWITCHES, NCOLS(COLS_SWITCHES)},
    [T_MARKERS] = {"markers", COLS_MARKERS, NCOLS(COLS_MARKERS)},
    [T_WAKEUPS] = {"wakeups", COLS_WAKEUPS, NCOLS(COLS_WAKEUPS)},
    [T_MEM] = {"mem", COLS_MEM, NCOLS(COLS_MEM)},
};

/* A column-wise buffer of one table; its arrays move to the writer thread when full. */
typedef struct {
    int table;
    size_t n, cap;
    uint32_t seq; /* next part number */
    void *col[MAXCOLS];
} Buf;

#define COL(b, i, T) (((T *)(b)->col[i]))

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

/* Register handles (the same on every vCPU, read once in vcpu_init). */
enum { R_RAX, R_RBX, R_RCX, R_RDX, R_RSI, R_RDI, R_RBP, R_RSP, R_R8, R_R9, R_R10,
       R_GS_BASE, R_K_GS_BASE, R_CR3, R_RIP, R_N };
static const char *REG_NAMES[R_N] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp",
                                     "rsp", "r8",  "r9",  "r10", "gs_base", "k_gs_base", "cr3",
                                     "rip"};

/* Per-vCPU state: touched only by its own vCPU thread (and in exclusive sections). */
typedef struct {
    unsigned int index;
    Buf buf[T_N];          /* only the per-vCPU tables are used */
    uint64_t icount;       /* instructions retired before `pending` started */
    uint64_t exec_rows;    /* rows appended to this vCPU's exec stream */
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
    GByteArray *scratch;
    struct qemu_plugin_register *reg[R_N];
} VCPU;

typedef enum { MODE_LIGHT, MODE_FULL } Mode;

static struct {
    /* options */
    char *out;
    char *sysmap;
    bool roi_all;
    bool data;
    size_t rows;
    int zstd;
    uint64_t ram;
    uint64_t roi_insns; /* 0: no bound */
    /* symbols */
    uint64_t sym_idt, sym_current, sym_switch_to;
    uint64_t sym_wake[WAKE_N]; /* by kind; 0 when the map lacks the function: no such rows */
    bool have_current;
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
    unsigned int vcpus_done; /* vCPUs that reached roi_insns in this window (atomic) */
} S;

enum { ENTRY_SYSCALL = 1, ENTRY_INTERRUPT = 2 };

/* ---------------------------------------------------------------------------------------- */
/* Buffers and the writer thread                                                            */

typedef struct {
    char *path;
    int table;
    int vcpu; /* -1 for the static tables */
    size_t n;
    void *col[MAXCOLS];
    size_t bytes;
} Job;

static void buf_alloc(Buf *b, int table, size_t cap)
{
    const TableDef *t = &TABLES[table];
    b->table = table;
    b->cap = cap;
    b->n = 0;
    for (size_t i = 0; i < t->ncols; i++) {
        b->col[i] = g_malloc(cap * pq_type_size(t->cols[i].type));
    }
}

static size_t buf_row_bytes(const Buf *b)
{
    const TableDef *t = &TABLES[b->table];
    size_t s = 0;
    for (size_t i = 0; i < t->ncols; i++) {
        s += pq_type_size(t->cols[i].type);
    }
    return s;
}

static void writer_enqueue(Job *job)
{
    g_mutex_lock(&S.flow_lock);
    while (S.inflight > MAX_INFLIGHT_BYTES) {
        g_cond_wait(&S.flow_cond, &S.flow_lock);
    }
    S.inflight += job->bytes;
    g_mutex_unlock(&S.flow_lock);
    g_async_queue_push(S.queue, job);
}

/* Hand a buffer's rows to the writer thread and give the buffer fresh arrays. */
static void buf_flush(Buf *b, int vcpu)
{
    if (b->n == 0) {
        return;
    }
    const TableDef *t = &TABLES[b->table];
    Job *job = g_new0(Job, 1);
    job->table = b->table;
    job->vcpu = vcpu;
    job->n = b->n;
    job->bytes = b->n * buf_row_bytes(b);
    if (vcpu >= 0) {
        job->path = g_strdup_printf("%s/%s/v%03d-%06u.parquet", S.out, t->name, vcpu, b->seq++);
    } else {
        job->path = g_strdup_printf("%s/%s/%06u.parquet", S.out, t->name, b->seq++);
    }
    memcpy(job->col, b->col, sizeof(job->col));
    buf_alloc(b, b->table, b->cap);
    writer_enqueue(job);
}

/* Wait until the writer thread has written every queued part. */
static void writer_drain(void)
{
    g_mutex_lock(&S.flow_lock);
    while (S.inflight > 0) {
        g_cond_wait(&S.flow_cond, &S.flow_lock);
    }
    g_mutex_unlock(&S.flow_lock);
}

static gpointer writer_main(gpointer unused)
{
    char err[512];
    for (;;) {
        Job *job = g_async_queue_pop(S.queue);
        if (job->path == NULL) { /* the stop sentinel */
            g_free(job);
            return NULL;
        }
        const TableDef *t = &TABLES[job->table];
        char vcpu[16];
        snprintf(vcpu, sizeof(vcpu), "%d", job->vcpu);
        const char *meta[] = {"pysched.schema_version", SCHEMA_VERSION, "pysched.table", t->name,
                              job->vcpu >= 0 ? "pysched.vcpu" : NULL, vcpu, NULL};
        if (pq_write_part(job->path, t->cols, t->ncols, (const void *const *)job->col, job->n,
                          meta, S.zstd, err, sizeof(err)) != 0) {
            fprintf(stderr, "pysched-trace: %s\n", err);
            exit(1);
        }
        __atomic_add_fetch(&S.n_parts, 1, __ATOMIC_RELAXED);
        for (size_t i = 0; i < t->ncols; i++) {
            g_free(job->col[i]);
        }
        g_mutex_lock(&S.flow_lock);
        S.inflight -= job->bytes;
        g_cond_broadcast(&S.flow_cond);
        g_mutex_unlock(&S.flow_lock);
        g_free(job->path);
        g_free(job);
    }
}

/*
 * Write (and delete) a one-row part of every table, so that every piece of Arrow's process-wide
 * state the writer will touch (types, encoders, codecs) exists before our exit handler is
 * registered; see qemu_plugin_install.
 */
static bool writer_warmup(void)
{
    char err[512];
    uint64_t zero[MAXCOLS] = {0};
    const void *data[MAXCOLS];
    for (int i = 0; i < MAXCOLS; i++) {
        data[i] = &zero[i];
    }
    g_autofree char *path = g_strdup_printf("%s/.warmup.parquet", S.out);
    for (int t = 0; t < T_N; t++) {
        if (pq_write_part(path, TABLES[t].cols, TABLES[t].ncols, data, 1, NULL, S.zstd, err,
                          sizeof(err)) != 0) {
            fprintf(stderr, "pysched-trace: out=%s: %s\n", S.out, err);
            return false;
        }
        unlink(path);
    }
    return true;
}

static void flush_statics(void)
{
    g_mutex_lock(&S.lock);
    buf_flush(&S.statics[0], -1);
    buf_flush(&S.statics[1], -1);
    g_mutex_unlock(&S.lock);
}

/* Flush every table of one vCPU, after the static tables its rows refer to. */
static void flush_vcpu(VCPU *vs)
{
    flush_statics();
    for (int t = T_EXEC; t < T_N; t++) {
        if (vs->buf[t].cap) {
            buf_flush(&vs->buf[t], vs->index);
        }
    }
}

/* The `time_ns` clock: host monotonic time since the plugin started. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)(ts.tv_sec - S.t0.tv_sec) * 1000000000ull +
           (uint64_t)(ts.tv_nsec - S.t0.tv_nsec);
}

/* Reserve one row of a per-vCPU event table (flushing the vCPU when it is full) and fill its
 * common columns; the caller fills the table's own. */
static size_t ev_row(VCPU *vs, int table, uint64_t icount)
{
    Buf *b = &vs->buf[table];
    if (b->n == b->cap) {
        flush_vcpu(vs);
    }
    size_t r = b->n++;
    if (table == T_MEM) {
        COL(b, ME_ICOUNT, uint64_t)[r] = icount;
    } else {
        COL(b, EV_VCPU, uint16_t)[r] = vs->index;
        COL(b, EV_ICOUNT, uint64_t)[r] = icount;
        COL(b, EV_EXEC_ROW, uint64_t)[r] = vs->exec_rows;
        COL(b, EV_TIME_NS, uint64_t)[r] = now_ns();
    }
    return r;
}

static inline void exec_append(VCPU *vs, Block *b)
{
    Buf *e = &vs->buf[T_EXEC];
    COL(e, EX_BLOCK, uint32_t)[e->n++] = b->id;
    vs->exec_rows++;
    vs->pending = b;
    if (e->n == e->cap) {
        flush_vcpu(vs);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Guest introspection                                                                       */

static uint64_t reg_read(VCPU *vs, int r)
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

static bool mem_read(VCPU *vs, uint64_t va, void *dst, size_t len)
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
static uint64_t event_cr3(VCPU *vs)
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
static uint64_t read_thread(VCPU *vs)
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

static bool vector_has_error_code(int v)
{
    return v == 8 || (v >= 10 && v <= 14) || v == 17 || v == 21 || v == 29 || v == 30;
}

/*
 * Read the guest's IDT (idt_table) and rebuild the handler table when it changed. Called in a
 * vCPU context. Returns true when the table changed (translations must then be redone).
 */
static bool idt_refresh(VCPU *vs)
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
        uint64_t off = (uint64_t)g[0] | (uint64_t)g[1] << 8 | (uint64_t)g[6] << 16 |
                       (uint64_t)g[7] << 24 | (uint64_t)g[8] << 32 | (uint64_t)g[9] << 40 |
                       (uint64_t)g[10] << 48 | (uint64_t)g[11] << 56;
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

static void entry_kind_set(uint64_t thread, int kind)
{
    if (!thread) {
        return;
    }
    g_mutex_lock(&S.lock);
    g_hash_table_insert(S.entry_kind, GSIZE_TO_POINTER(thread), GINT_TO_POINTER(kind));
    g_mutex_unlock(&S.lock);
}

static int entry_kind_take(uint64_t thread)
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

/* ---------------------------------------------------------------------------------------- */
/* Execution callbacks                                                                       */

static void request_reset(Mode next);

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
static void slide_found(VCPU *vs, uint64_t entry_va)
{
    g_mutex_lock(&S.lock);
    if (S.slide_found) {
        g_mutex_unlock(&S.lock);
        return;
    }
    S.slide = entry_va - S.map_entry;
    uint64_t *syms[] = {&S.sym_idt, &S.sym_switch_to, &S.sym_wake[WAKE_TTWU],
                        &S.sym_wake[WAKE_NEW], &S.sym_wake[WAKE_DONE]};
    for (size_t i = 0; i < G_N_ELEMENTS(syms); i++) {
        if (*syms[i] >= KTEXT_START) {
            *syms[i] += S.slide;
        }
    }
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
            uint64_t off = (uint64_t)g[0] | (uint64_t)g[1] << 8 | (uint64_t)g[6] << 16 |
                           (uint64_t)g[7] << 24 | (uint64_t)g[8] << 32 | (uint64_t)g[9] << 40 |
                           (uint64_t)g[10] << 48 | (uint64_t)g[11] << 56;
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

/* A user `syscall` is about to run (light mode; in full mode vcpu_insn_exec does this). */
static void vcpu_syscall_seen(unsigned int cpu, void *udata)
{
    S.vcpus[cpu].after_syscall = true;
}

/* A kernel block at the map's entry_SYSCALL_64 plus a multiple of 2 MiB starts. */
static void vcpu_slide_probe(unsigned int cpu, void *udata)
{
    VCPU *vs = &S.vcpus[cpu];
    if (vs->after_syscall && !S.slide_found) {
        slide_found(vs, (uint64_t)(uintptr_t)udata);
    }
    vs->after_syscall = false;
}

/* The common case: a block starts. */
static void vcpu_tb_exec(unsigned int cpu, void *udata)
{
    if (!S.tracing) {
        return;
    }
    VCPU *vs = &S.vcpus[cpu];
    if (vs->pending) {
        vs->icount += vs->pending->ninsn;
        vs->pending = NULL;
    }
    if (bound_reached(vs)) {
        return;
    }
    exec_append(vs, (Block *)udata);
}

/* The static rows of a new block (translated, or a variant): its `blocks` row and one `insns`
 * row per instruction at consecutive virtual addresses from b->vaddr. Under S.lock. */
static void emit_static_rows(const Block *b, const uint64_t *paddrs, const uint8_t *flags)
{
    Buf *bi = &S.statics[1];
    uint64_t va = b->vaddr;
    for (uint32_t i = 0; i < b->ninsn; i++) {
        if (bi->n == bi->cap) {
            buf_flush(bi, -1);
        }
        size_t r = bi->n++;
        COL(bi, IN_BLOCK, uint32_t)[r] = b->id;
        COL(bi, IN_IDX, uint16_t)[r] = (uint16_t)i;
        COL(bi, IN_VADDR, uint64_t)[r] = va;
        COL(bi, IN_PADDR, uint64_t)[r] = paddrs[i];
        COL(bi, IN_SIZE, uint8_t)[r] = b->sizes[i];
        COL(bi, IN_FLAGS, uint8_t)[r] = flags[i];
        va += b->sizes[i];
    }
    Buf *bb = &S.statics[0];
    if (bb->n == bb->cap) {
        buf_flush(bb, -1);
    }
    size_t r = bb->n++;
    COL(bb, BL_BLOCK, uint32_t)[r] = b->id;
    COL(bb, BL_VADDR, uint64_t)[r] = b->vaddr;
    COL(bb, BL_NINSN, uint32_t)[r] = b->ninsn;
    COL(bb, BL_NBYTES, uint32_t)[r] = b->nbytes;
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
static void vcpu_tb_exec_user(unsigned int cpu, void *udata)
{
    if (!S.tracing) {
        return;
    }
    VCPU *vs = &S.vcpus[cpu];
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
static void vcpu_tb_exec_special(unsigned int cpu, void *udata)
{
    if (!S.tracing) {
        return;
    }
    VCPU *vs = &S.vcpus[cpu];
    Block *b = udata;
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

/* userdata of instruction callbacks: index in the block and the instruction's flags */
#define INSN_UD(idx, flags) GUINT_TO_POINTER(((idx) << 8) | (flags))
#define UD_IDX(ud) (GPOINTER_TO_UINT(ud) >> 8)
#define UD_FLAGS(ud) (GPOINTER_TO_UINT(ud) & 0xff)

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

static void marker_row(VCPU *vs, int kind, uint64_t value, uint64_t thread, uint64_t cr3,
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
static void vcpu_insn_exec(unsigned int cpu, void *udata)
{
    VCPU *vs = &S.vcpus[cpu];
    unsigned flags = UD_FLAGS(udata), idx = UD_IDX(udata);
    Block *b = vs->pending;
    uint64_t pc = b ? b->vaddr : 0;
    for (unsigned i = 0; b && i < idx; i++) {
        pc += b->sizes[i];
    }
    /* the event's icount counts this instruction */
    uint64_t icount = vs->icount + idx + 1;
    if (flags & F_SYSCALL) {
        vs->after_syscall = true;
    }

    if (flags & F_MARKER) {
        uint64_t cmd = reg_read(vs, R_RAX) & 0xffffffffu, value = reg_read(vs, R_RDI);
        if (cmd == MARK_BEGIN && !S.roi_all && S.mode == MODE_LIGHT) {
            /* Resolve what needs this vCPU's context now; the reset callback starts recording. */
            idt_refresh(vs);
            S.begin_vcpu = (int)cpu;
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

static void vcpu_mem(unsigned int cpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    VCPU *vs = &S.vcpus[cpu];
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
/* Translation                                                                               */

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

/* Guest-physical address of host pointer H into guest RAM (see README: calibration). Guest
 * RAM is one host allocation; on q35 its first `lowmem` bytes are at guest-physical 0 and the
 * rest at 4 GiB. */
static uint64_t to_paddr(void *h)
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
static void calibrate(uint64_t va, void *h)
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

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
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
        qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_tb_exec, QEMU_PLUGIN_CB_NO_REGS, b);
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
    }
}

/* ---------------------------------------------------------------------------------------- */
/* vCPU set-up, reset, exit                                                                  */

static void vcpu_init(qemu_plugin_id_t id, unsigned int cpu)
{
    VCPU *vs = &S.vcpus[cpu];
    if (vs->scratch) { /* registered again after a reset */
        return;
    }
    vs->index = cpu;
    vs->scratch = g_byte_array_new();
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

static void write_plugin_json(bool final);
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

static void register_callbacks(void)
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

static void request_reset(Mode next)
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

static void write_plugin_json(bool final)
{
    GString *s = g_string_new("{\n");
    g_string_append_printf(s, "  \"schema_version\": %s,\n  \"final\": %s,\n", SCHEMA_VERSION,
                           final ? "true" : "false");
    g_string_append_printf(s, "  \"options\": {\"out\": \"%s\", \"sysmap\": \"%s\", "
                           "\"roi\": \"%s\", \"data\": %s, \"rows\": %zu, \"zstd\": %d, "
                           "\"ram\": %" PRIu64 ", \"roi_insns\": %" PRIu64 "},\n",
                           S.out, S.sysmap ? S.sysmap : "", S.roi_all ? "all" : "marker",
                           S.data ? "true" : "false", S.rows, S.zstd, S.ram, S.roi_insns);
    g_string_append_printf(s, "  \"symbols\": {\"idt_table\": %" PRIu64 ", \"current_task\": %"
                           PRIu64 ", \"__switch_to\": %" PRIu64, S.sym_idt, S.sym_current,
                           S.sym_switch_to);
    for (int k = WAKE_TTWU; k < WAKE_N; k++) {
        g_string_append_printf(s, ", \"%s\": %" PRIu64, WAKE_SYMBOLS[k], S.sym_wake[k]);
    }
    g_string_append(s, "},\n");
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

/* Count what is pending, drain the writer and write the final plugin.json; runs once. */
static void finish(void)
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
    Job *stop = g_new0(Job, 1);
    g_async_queue_push(S.queue, stop);
    g_thread_join(S.writer);
    write_plugin_json(true);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
    finish();
}

/* ---------------------------------------------------------------------------------------- */
/* Options and install                                                                       */

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

static bool load_sysmap(const char *path)
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
        }
        for (int k = WAKE_TTWU; k < WAKE_N; k++) {
            if (!strcmp(name, WAKE_SYMBOLS[k])) {
                S.sym_wake[k] = addr;
            }
        }
    }
    fclose(f);
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

static bool parse_options(int argc, char **argv)
{
    S.rows = 4194304;
    S.zstd = 1;
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
                    "rows, zstd, ram, roi_insns)\n", key);
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
static bool prepare_out(void)
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
    for (unsigned i = 0; i < S.nvcpus; i++) {
        VCPU *vs = &S.vcpus[i];
        vs->stops_ns = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        buf_alloc(&vs->buf[T_EXEC], T_EXEC, S.rows);
        for (int t = T_SYSCALLS; t <= T_WAKEUPS; t++) {
            buf_alloc(&vs->buf[t], t, EVENT_ROWS);
        }
        if (S.data) {
            buf_alloc(&vs->buf[T_MEM], T_MEM, S.rows);
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
    S.queue = g_async_queue_new();
    S.writer = g_thread_new("pysched-writer", writer_main, NULL);
    S.mode = S.roi_all ? MODE_FULL : MODE_LIGHT;
    S.tracing = S.roi_all;
    S.n_windows = S.roi_all ? 1 : 0;
    register_callbacks();
    write_plugin_json(false);
    return 0;
}
