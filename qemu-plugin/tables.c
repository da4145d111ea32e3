/*
 * tables.c - the plugin's Parquet tables: each table's columns, the column-wise buffers rows are
 * appended to, and the writer thread that writes full buffers as part files (tables.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tracer.h"

/* ---------------------------------------------------------------------------------------- */
/* Table schemas (the column enums are in tables.h)                                          */

/* Columns every per-vCPU event table but mem starts with. */
#define EV_COLS [EV_VCPU] = {"vcpu", PQ_U16, PQ_DICT}, [EV_ICOUNT] = {"icount", PQ_U64, PQ_DELTA}, \
    [EV_EXEC_ROW] = {"exec_row", PQ_U64, PQ_DELTA}, [EV_TIME_NS] = {"time_ns", PQ_U64, PQ_DELTA}

static const pq_column COLS_BLOCKS[BL_N] = {
    [BL_BLOCK] = {"block", PQ_U32, PQ_DELTA}, [BL_VADDR] = {"vaddr", PQ_U64, PQ_PLAIN},
    [BL_NINSN] = {"ninsn", PQ_U32, PQ_DICT}, [BL_NBYTES] = {"nbytes", PQ_U32, PQ_DICT}};

/* The gap is 0 on all but a block's first row and where a page boundary moves paddr - vaddr:
 * a dictionary of few values (the kernel text's offset, a user or module page's). */
static const pq_column COLS_INSNS[IN_N] = {
    [IN_BLOCK] = {"block", PQ_U32, PQ_DELTA}, [IN_SIZE] = {"size", PQ_U8, PQ_DICT},
    [IN_FLAGS] = {"flags", PQ_U8, PQ_DICT}, [IN_PGAP] = {"pgap", PQ_U64, PQ_DICT}};

/* The successor encoding (callbacks.c, exec_append): the code of a block the prediction missed
 * and the run of predicted blocks after it. Byte stream split: the four bytes of every value in
 * four streams, which zstd compresses two to three times better than dictionary indices on
 * kernel-heavy streams (tens of thousands of distinct blocks). */
static const pq_column COLS_EXEC[EX_N] = {[EX_CODE] = {"code", PQ_U32, PQ_SPLIT},
                                          [EX_RUN] = {"run", PQ_U32, PQ_SPLIT}};

static const pq_column COLS_SYSCALLS[SC_N] = {
    EV_COLS, [SC_KIND] = {"kind", PQ_U8, PQ_DICT}, [SC_THREAD] = {"thread", PQ_U64, PQ_DICT},
    [SC_CR3] = {"cr3", PQ_U64, PQ_DICT}, [SC_ABI] = {"abi", PQ_U8, PQ_DICT},
    [SC_NR] = {"nr", PQ_I64, PQ_DICT}, [SC_ARG0] = {"arg0", PQ_U64, PQ_DICT},
    [SC_ARG0 + 1] = {"arg1", PQ_U64, PQ_DICT}, [SC_ARG0 + 2] = {"arg2", PQ_U64, PQ_DICT},
    [SC_ARG0 + 3] = {"arg3", PQ_U64, PQ_DICT}, [SC_ARG0 + 4] = {"arg4", PQ_U64, PQ_DICT},
    [SC_ARG5] = {"arg5", PQ_U64, PQ_DICT}, [SC_RET] = {"ret", PQ_I64, PQ_DICT},
    [SC_PC] = {"pc", PQ_U64, PQ_DICT}, [SC_MATCHED] = {"matched", PQ_U8, PQ_DICT}};

static const pq_column COLS_INTERRUPTS[IR_N] = {
    EV_COLS, [IR_KIND] = {"kind", PQ_U8, PQ_DICT}, [IR_THREAD] = {"thread", PQ_U64, PQ_DICT},
    [IR_CR3] = {"cr3", PQ_U64, PQ_DICT}, [IR_VECTOR] = {"vector", PQ_I16, PQ_DICT},
    [IR_ERROR_CODE] = {"error_code", PQ_U64, PQ_DICT}, [IR_USER] = {"user", PQ_U8, PQ_DICT},
    [IR_PC] = {"pc", PQ_U64, PQ_DICT}, [IR_HANDLER] = {"handler", PQ_U64, PQ_DICT},
    [IR_BLOCK_RETIRED] = {"block_retired", PQ_U32, PQ_DICT}};

static const pq_column COLS_SWITCHES[SW_N] = {
    EV_COLS, [SW_PREV] = {"prev", PQ_U64, PQ_DICT}, [SW_NEXT] = {"next", PQ_U64, PQ_DICT},
    [SW_CR3] = {"cr3", PQ_U64, PQ_DICT}};

static const pq_column COLS_MARKERS[MK_N] = {
    EV_COLS, [MK_KIND] = {"kind", PQ_U8, PQ_DICT}, [MK_THREAD] = {"thread", PQ_U64, PQ_DICT},
    [MK_CR3] = {"cr3", PQ_U64, PQ_DICT}, [MK_VALUE] = {"value", PQ_U64, PQ_DICT}};

/* woken: the task the kernel function was called for; waker: the running task (the waking
 * thread, or the task an interrupt interrupted). */
static const pq_column COLS_WAKEUPS[WK_N] = {
    EV_COLS, [WK_WOKEN] = {"woken", PQ_U64, PQ_DICT}, [WK_WAKER] = {"waker", PQ_U64, PQ_DICT},
    [WK_KIND] = {"kind", PQ_U8, PQ_DICT}};

/* A write to a device (README: device_requests): paddr is the port for port I/O (space 1);
 * region indexes plugin.json's device_regions. */
static const pq_column COLS_DEVREQS[DR_N] = {
    EV_COLS, [DR_PADDR] = {"paddr", PQ_U64, PQ_DICT}, [DR_SPACE] = {"space", PQ_U8, PQ_DICT},
    [DR_SIZE] = {"size", PQ_U8, PQ_DICT}, [DR_VALUE] = {"value", PQ_U64, PQ_DICT},
    [DR_REGION] = {"region", PQ_U16, PQ_DICT}, [DR_PC] = {"pc", PQ_U64, PQ_DICT}};

/* No virtual address: it would cost a quarter of data mode's write bandwidth. */
static const pq_column COLS_MEM[ME_N] = {
    [ME_ICOUNT] = {"icount", PQ_U64, PQ_DELTA}, [ME_PADDR] = {"paddr", PQ_U64, PQ_SPLIT},
    [ME_SIZE] = {"size", PQ_U8, PQ_DICT}, [ME_STORE] = {"store", PQ_U8, PQ_DICT}};

#define NCOLS(a) (sizeof(a) / sizeof((a)[0]))

const TableDef TABLES[T_N] = {
    [T_BLOCKS] = {"blocks", COLS_BLOCKS, NCOLS(COLS_BLOCKS)},
    [T_INSNS] = {"insns", COLS_INSNS, NCOLS(COLS_INSNS)},
    [T_EXEC] = {"exec", COLS_EXEC, NCOLS(COLS_EXEC)},
    [T_SYSCALLS] = {"syscalls", COLS_SYSCALLS, NCOLS(COLS_SYSCALLS)},
    [T_INTERRUPTS] = {"interrupts", COLS_INTERRUPTS, NCOLS(COLS_INTERRUPTS)},
    [T_SWITCHES] = {"switches", COLS_SWITCHES, NCOLS(COLS_SWITCHES)},
    [T_MARKERS] = {"markers", COLS_MARKERS, NCOLS(COLS_MARKERS)},
    [T_WAKEUPS] = {"wakeups", COLS_WAKEUPS, NCOLS(COLS_WAKEUPS)},
    [T_DEVREQS] = {"device_requests", COLS_DEVREQS, NCOLS(COLS_DEVREQS)},
    [T_MEM] = {"mem", COLS_MEM, NCOLS(COLS_MEM)},
};

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

void buf_alloc(Buf *b, int table, size_t cap)
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
void buf_flush(Buf *b, int vcpu)
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
void writer_drain(void)
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
        char vcpu[16], rows[24];
        snprintf(vcpu, sizeof(vcpu), "%d", job->vcpu);
        const char *meta[] = {"pysched.schema_version", SCHEMA_VERSION, "pysched.table", t->name,
                              NULL, NULL, NULL, NULL, NULL, NULL, NULL};
        size_t m = 4;
        if (job->vcpu >= 0) {
            meta[m++] = "pysched.vcpu";
            meta[m++] = vcpu;
        }
        if (job->table == T_EXEC) {
            /* the rows the encoded ones stand for: each, plus its run */
            uint64_t decoded = job->n;
            const uint32_t *run = job->col[EX_RUN];
            for (size_t i = 0; i < job->n; i++) {
                decoded += run[i];
            }
            snprintf(rows, sizeof(rows), "%" PRIu64, decoded);
            meta[m++] = "pysched.encoding";
            meta[m++] = EXEC_ENCODING;
            meta[m++] = "pysched.exec_rows";
            meta[m++] = rows;
        } else if (job->table == T_INSNS) {
            meta[m++] = "pysched.encoding";
            meta[m++] = INSNS_ENCODING;
        }
        if (pq_write_part(job->path, t->cols, t->ncols, (const void *const *)job->col, job->n,
                          meta, job->table == T_EXEC ? S.exec_zstd : S.zstd, err,
                          sizeof(err)) != 0) {
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
bool writer_warmup(void)
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

/* Flush both static tables, blocks first (S.lock held). */
static void flush_statics_locked(void)
{
    buf_flush(&S.statics[0], -1);
    buf_flush(&S.statics[1], -1);
}

void flush_statics(void)
{
    g_mutex_lock(&S.lock);
    flush_statics_locked();
    g_mutex_unlock(&S.lock);
}

/* Flush every table of one vCPU, after the static tables its rows refer to. */
void flush_vcpu(VCPU *vs)
{
    flush_statics();
    for (int t = T_EXEC; t < T_N; t++) {
        if (vs->buf[t].cap) {
            buf_flush(&vs->buf[t], vs->index);
        }
    }
    vs->exec_part_rows = 0;
}

/* The `time_ns` clock: host monotonic time since the plugin started. */
uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)(ts.tv_sec - S.t0.tv_sec) * 1000000000ull +
           (uint64_t)(ts.tv_nsec - S.t0.tv_nsec);
}

/* Reserve one row of a per-vCPU event table (flushing the vCPU when it is full) and fill its
 * common columns; the caller fills the table's own. */
size_t ev_row(VCPU *vs, int table, uint64_t icount)
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

/* The static rows of a new block (translated, or a variant): its `blocks` row and one `insns`
 * row per instruction at consecutive virtual addresses from b->vaddr. Under S.lock. */
void emit_static_rows(const Block *b, const uint64_t *paddrs, const uint8_t *flags)
{
    Buf *bi = &S.statics[1], *bb = &S.statics[0];
    /* A block's rows stay in one part: the reader derives idx and vaddr along them. Both
     * tables are flushed together, so that a killed run's last parts hold the same blocks. */
    if (bi->n + b->ninsn > bi->cap || bb->n == bb->cap) {
        flush_statics_locked();
    }
    uint64_t va = b->vaddr, offset = 0;
    for (uint32_t i = 0; i < b->ninsn; i++) {
        size_t r = bi->n++;
        uint64_t o = paddrs[i] - va; /* modulo 2^64, as the reader adds it back */
        COL(bi, IN_BLOCK, uint32_t)[r] = b->id;
        COL(bi, IN_SIZE, uint8_t)[r] = b->sizes[i];
        COL(bi, IN_FLAGS, uint8_t)[r] = flags[i];
        COL(bi, IN_PGAP, uint64_t)[r] = o - offset;
        offset = o;
        va += b->sizes[i];
    }
    size_t r = bb->n++;
    COL(bb, BL_BLOCK, uint32_t)[r] = b->id;
    COL(bb, BL_VADDR, uint64_t)[r] = b->vaddr;
    COL(bb, BL_NINSN, uint32_t)[r] = b->ninsn;
    COL(bb, BL_NBYTES, uint32_t)[r] = b->nbytes;
}

/* Start the writer thread (after writer_warmup). */
void writer_start(void)
{
    S.queue = g_async_queue_new();
    S.writer = g_thread_new("pysched-writer", writer_main, NULL);
}

/* Stop the writer thread once it has written every queued part. */
void writer_stop(void)
{
    Job *stop = g_new0(Job, 1);
    g_async_queue_push(S.queue, stop);
    g_thread_join(S.writer);
}
