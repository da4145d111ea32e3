/*
 * tables.h - the plugin's Parquet tables: their schemas, the column-wise row buffers and the
 * writer thread that turns full buffers into part files (tables.c).
 *
 * Every table's columns are named by an enum (the column's index) and listed in that order,
 * which is the order of README.md and pysched/trace/schema.py.
 */
#ifndef PYSCHED_TABLES_H
#define PYSCHED_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "parquet_writer.h"

#define SCHEMA_VERSION "1"
/* pysched.encoding of exec parts (pysched/trace/exec_codec.py) */
#define EXEC_ENCODING "exec-successor/2"
/* pysched.encoding of insns parts (pysched/trace/insns_codec.py) */
#define INSNS_ENCODING "insns-gap/1"

#define EVENT_ROWS 65536             /* rows per part of the small event tables */
#define MEM_ROWS 4194304             /* rows per part of the mem table (data accesses) */
#define MAX_INFLIGHT_BYTES (768u << 20) /* vCPUs wait when the writer is this far behind */

/* Columns every per-vCPU event table but mem starts with (tables.c names them all). */
enum { EV_VCPU, EV_ICOUNT, EV_EXEC_ROW, EV_TIME_NS, EV_N };

enum { BL_BLOCK, BL_VADDR, BL_NINSN, BL_NBYTES, BL_N };

/* insns parts are gap-encoded (README: blocks and insns): idx and vaddr follow from the block's
 * rows, paddr from the change of paddr - vaddr along them */
enum { IN_BLOCK, IN_SIZE, IN_FLAGS, IN_PGAP, IN_N };

/* exec parts are successor-encoded (README: exec): a block's code, then how many predicted ones */
enum { EX_CODE, EX_RUN, EX_N };

enum { SC_KIND = EV_N, SC_THREAD, SC_CR3, SC_ABI, SC_NR, SC_ARG0, SC_ARG5 = SC_ARG0 + 5, SC_RET,
       SC_PC, SC_MATCHED, SC_N };

enum { IR_KIND = EV_N, IR_THREAD, IR_CR3, IR_VECTOR, IR_ERROR_CODE, IR_USER, IR_PC, IR_HANDLER,
       IR_BLOCK_RETIRED, IR_N };

enum { SW_PREV = EV_N, SW_NEXT, SW_CR3, SW_N };

enum { MK_KIND = EV_N, MK_THREAD, MK_CR3, MK_VALUE, MK_N };

enum { WK_WOKEN = EV_N, WK_WAKER, WK_KIND, WK_N };

enum { DR_PADDR = EV_N, DR_SPACE, DR_SIZE, DR_VALUE, DR_REGION, DR_PC, DR_N };

enum { ME_ICOUNT, ME_PADDR, ME_SIZE, ME_STORE, ME_N };

#define MAXCOLS 20
_Static_assert(SC_N <= MAXCOLS, "MAXCOLS is below the widest table");

typedef struct {
    const char *name;
    const pq_column *cols;
    size_t ncols;
} TableDef;

/* Per-vCPU event tables are T_SYSCALLS..T_DEVREQS (allocated together); T_MEM comes last. */
enum { T_BLOCKS, T_INSNS, T_EXEC, T_SYSCALLS, T_INTERRUPTS, T_SWITCHES, T_MARKERS, T_WAKEUPS,
       T_DEVREQS, T_MEM, T_N };
extern const TableDef TABLES[T_N];

/* A column-wise buffer of one table; its arrays move to the writer thread when full. */
typedef struct {
    int table;
    size_t n, cap;
    uint32_t seq; /* next part number */
    void *col[MAXCOLS];
} Buf;

#define COL(b, i, T) (((T *)(b)->col[i]))

void buf_alloc(Buf *b, int table, size_t cap);
void buf_flush(Buf *b, int vcpu);
bool writer_warmup(void);
void writer_start(void);
void writer_drain(void);
void writer_stop(void);
void flush_statics(void);

#endif
