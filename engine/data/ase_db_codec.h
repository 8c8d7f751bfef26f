/* ase_db_codec.h — decoding the values ASE stores in an SQLite database.
 *
 * ase.db (ase/db/sqlite.py, ase/db/core.py, ase/io/jsonio.py) stores a row as
 * columns of three kinds, and this file decodes each without Python:
 *
 *   - blobs of raw little-endian numbers: numbers (int32), positions, cell,
 *     forces, stress, ... (float64).  pt_ase_blob_array views one.
 *   - JSON text: key_value_pairs, calculator_parameters, the metadata row of
 *     the information table, and the data column of databases older than
 *     schema version 9.  numpy arrays appear as
 *     {"__ndarray__": [shape, dtype, [flat values]]}.  Python's json writes
 *     NaN, Infinity and -Infinity, which are not JSON; pt_ase_json_loads
 *     reads them as marked non-finite numbers.
 *   - the binary data column of schema version 9: an int64 byte offset of a
 *     JSON text, the raw array bytes before it, and the JSON, whose arrays
 *     are {"__ndarray__": [shape, dtype, byte offset into the blob]}.
 *
 * The data dictionary is walked leaf by leaf (pt_ase_data_walk): nested
 * dictionaries become dotted paths ("data.dft.energy"), and each leaf is
 * classified as a number, a numeric array (an ndarray, or a rectangular JSON
 * list as ase.io.jsonio's numpyfy would make one), or something that holds
 * no numbers, with a message saying what it is. */
#ifndef PT_ASE_DB_CODEC_H
#define PT_ASE_DB_CODEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define PT_ASE_MAX_DIMS 8
#define PT_ASE_PATH_MAX 256   /* longest dotted path into data, with NUL */

typedef enum pt_ase_dtype {
    PT_ASE_DT_NONE = 0,   /* not a numeric dtype (bool, complex, str, ...) */
    PT_ASE_DT_F64, PT_ASE_DT_F32, PT_ASE_DT_F16,
    PT_ASE_DT_I64, PT_ASE_DT_I32, PT_ASE_DT_I16, PT_ASE_DT_I8,
    PT_ASE_DT_U64, PT_ASE_DT_U32, PT_ASE_DT_U16, PT_ASE_DT_U8,
    PT_ASE_DT_HOST        /* already host doubles (decoded from JSON text) */
} pt_ase_dtype;

/* numpy's dtype.name ("float64", "int32", ...) to a numeric dtype, or
 * PT_ASE_DT_NONE; *itemsize gets the element size in bytes when known
 * (also for bool and complex, so a blob's extent can be checked). */
pt_ase_dtype pt_ase_dtype_parse(const char *name, size_t *itemsize);

/* A numeric array, viewed in place (raw little-endian bytes) or as doubles. */
typedef struct pt_ase_array {
    int ndim;
    uint64_t shape[PT_ASE_MAX_DIMS];
    uint64_t count;                 /* product of shape */
    pt_ase_dtype dtype;
    const unsigned char *raw;       /* dtype != HOST: count elements, little-endian */
    const double *host;             /* dtype == HOST */
} pt_ase_array;

/* Element i (flat, C order) as a double. */
double pt_ase_array_get(const pt_ase_array *a, uint64_t i);

/* Views a column blob as `dtype` elements with the given shape; a shape
 * entry of 0 means "whatever is left" (one at most), like numpy's -1.
 * Returns 0, or -1 when the blob's size does not fit (message in err). */
int pt_ase_blob_array(const void *blob, size_t len, pt_ase_dtype dtype, int ndim,
                      const uint64_t *shape, pt_ase_array *out, char *err, size_t errlen);

/* "(5, 3)" */
void pt_ase_shape_format(const pt_ase_array *a, char *buf, size_t len);

/* JSON as Python's json module writes it (NaN, Infinity, -Infinity
 * allowed).  NULL with a message in err when it is not. */
json_t *pt_ase_json_loads(const char *text, size_t len, char *err, size_t errlen);

typedef enum pt_ase_kind {
    PT_ASE_NUMBER,     /* a finite number */
    PT_ASE_NONFINITE,  /* NaN, Infinity or -Infinity (number is set) */
    PT_ASE_ARRAY,      /* a numeric array (may contain non-finite values) */
    PT_ASE_TEXT,       /* a string, a boolean or null: no numbers by design */
    PT_ASE_OTHER,      /* numbers packtrain does not read (complex, bool arrays, objects) */
    PT_ASE_BAD         /* a damaged value: the message says what is wrong */
} pt_ase_kind;

typedef struct pt_ase_value {
    pt_ase_kind kind;
    double number;          /* NUMBER, NONFINITE */
    pt_ase_array array;     /* ARRAY */
    char what[160];         /* TEXT/OTHER: what it is; BAD: the problem */
} pt_ase_value;

/* Classifies one JSON value (a key-value pair's value, or a data leaf that
 * is not a dictionary).  `blob`/`blob_end` bound the array bytes of a binary
 * data column (NULL for JSON text).  Arrays decoded from JSON lists are
 * written to *scratch (grown with realloc; the caller frees it). */
void pt_ase_value_classify(const json_t *v, const unsigned char *blob, size_t blob_end,
                           double **scratch, size_t *scratch_cap, pt_ase_value *out);

/* A decoded data column. */
typedef struct pt_ase_data {
    json_t *root;                   /* a JSON object, or NULL when the row has no data */
    const unsigned char *blob;      /* binary form: the column bytes (not owned) */
    size_t json_offset;             /* binary form: where the JSON starts */
    double *scratch;                /* private: arrays decoded from JSON lists */
    size_t scratch_cap;
} pt_ase_data;

/* Decodes the binary (schema 9) or JSON text (older schemas, or data written
 * as a string) form of a data column.  A NULL column, the JSON text "null"
 * and an empty dictionary all give root == NULL.  Returns 0, or -1 with a
 * message in err when the column is damaged.  The blob must outlive d. */
int pt_ase_data_decode_blob(pt_ase_data *d, const void *blob, size_t len, char *err, size_t errlen);
int pt_ase_data_decode_text(pt_ase_data *d, const char *text, size_t len, char *err, size_t errlen);
void pt_ase_data_close(pt_ase_data *d);

/* Calls fn for every leaf of the data dictionary, depth first in the
 * dictionary's order, with its path ("data.forces", "data.dft.energy").
 * A path longer than PT_ASE_PATH_MAX - 1 is reported as a BAD leaf.  fn
 * returning nonzero stops the walk and is returned. */
typedef int (*pt_ase_leaf_fn)(void *ctx, const char *path, const pt_ase_value *v);
int pt_ase_data_walk(pt_ase_data *d, pt_ase_leaf_fn fn, void *ctx);

#endif
