/*
 * parquet_writer.h - the small C ABI between the plugin (C) and Arrow's Parquet C++ library.
 *
 * One call writes one complete Parquet file holding one row group, from plain column arrays,
 * with a CRC-32 page checksum in every page header.
 * The file is written as PATH.tmp and renamed to PATH, so a reader never sees half a file.
 */
#ifndef PYSCHED_PARQUET_WRITER_H
#define PYSCHED_PARQUET_WRITER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PQ_U8, PQ_U16, PQ_U32, PQ_U64, PQ_I16, PQ_I64,
} pq_type;

/* Encoding hints: dictionary encoding (the default) suits low-cardinality columns such as block
 * ids; counters and addresses are cheaper to write without a dictionary, delta-encoded. */
enum { PQ_DICT = 0, PQ_DELTA = 1, PQ_PLAIN = 2, PQ_SPLIT = 3 /* byte stream split */ };

typedef struct {
    const char *name;
    pq_type type;
    int encoding;
} pq_column;

/* Bytes of one value of TYPE. */
size_t pq_type_size(pq_type type);

/*
 * Write NROWS rows of NCOLS columns (DATA[i] points to NROWS values of COLS[i].type) to PATH.
 * META is a NULL-terminated list of key, value strings stored as file key/value metadata.
 * Returns 0 on success; otherwise -1 with a message in ERR.
 */
int pq_write_part(const char *path, const pq_column *cols, size_t ncols,
                  const void *const *data, size_t nrows, const char *const *meta,
                  int zstd_level, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
