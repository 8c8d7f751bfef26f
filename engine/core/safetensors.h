/* safetensors.h — reading and writing the safetensors format (Hugging Face):
 *
 *   [8 bytes]  N, little-endian u64: length of the JSON header
 *   [N bytes]  JSON object: "name": {"dtype": "F32", "shape": [..],
 *              "data_offsets": [begin, end]}, plus an optional
 *              "__metadata__": {string: string}
 *   [rest]     raw little-endian tensor bytes; offsets are relative to here
 *
 * Generic: any dtype is read and described; the model loader decides what it
 * accepts.  The reader validates everything the format promises (header
 * bounds, JSON, per-tensor fields, byte counts, offsets inside the data and
 * not overlapping) and reports each problem located by file and tensor name.
 * The whole file is read into memory: model files are megabytes.  Every
 * function taking a pt_errors needs a valid list (not NULL). */
#ifndef PT_SAFETENSORS_H
#define PT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/errors.h"

#define PT_ST_MAX_DIMS 8
#define PT_ST_MAX_HEADER (100u << 20) /* the format's own limit: 100 MB of JSON */

typedef struct pt_st_tensor {
    char *name;
    char dtype[8];                   /* "F32", "F64", "BF16", "I64", ... */
    int ndim;
    int64_t shape[PT_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;             /* byte offsets into the data section */
    const void *data;                /* begin of the bytes; not aligned in general */
} pt_st_tensor;

typedef struct pt_st_meta {
    char *key;
    char *value;
} pt_st_meta;

typedef struct pt_safetensors {
    size_t n_tensors;
    pt_st_tensor *tensors;           /* in header order */
    size_t n_meta;
    pt_st_meta *meta;                /* __metadata__ entries */
    uint8_t *file;                   /* the whole file */
    size_t file_size;
    const uint8_t *data;             /* data section inside file */
    uint64_t data_size;
} pt_safetensors;

/* Reads and validates `path`.  Returns 0, or -1 with every problem found in
 * errs (file = path, field = tensor name or "header"); st is then closed. */
int pt_safetensors_open(pt_safetensors *st, const char *path, pt_errors *errs);

/* The same from a buffer (copied); `label` names it in errors. */
int pt_safetensors_parse(pt_safetensors *st, const void *buf, size_t size, const char *label,
                         pt_errors *errs);

void pt_safetensors_close(pt_safetensors *st);

const pt_st_tensor *pt_safetensors_find(const pt_safetensors *st, const char *name);
/* value of __metadata__[key], or NULL */
const char *pt_safetensors_meta(const pt_safetensors *st, const char *key);

/* Bytes per element of a dtype name, 0 if unknown. */
size_t pt_safetensors_dtype_size(const char *dtype);

/* One F32 tensor to write; data holds numel floats, row-major. */
typedef struct pt_st_entry {
    const char *name;
    int ndim;
    int64_t shape[PT_ST_MAX_DIMS];
    const float *data;
} pt_st_entry;

/* Writes the tensors (data laid out in the given order, the header padded to
 * 8 bytes as the reference implementation does) and the metadata strings.
 * Writes path.tmp then renames it over path, so a reader never sees half a
 * file.  Returns 0, or -1 with the reason in errs. */
int pt_safetensors_write(const char *path, const pt_st_entry *t, size_t n,
                         const pt_st_meta *meta, size_t n_meta, pt_errors *errs);

#endif
