/* fuzz_ase_codec.c — the decoders of ASE's column encodings
 * (ase_db_codec.c) on raw bytes, without SQLite in the way.
 *
 * The first byte chooses the decoder for the rest:
 *   0  a binary data column (schema 9): pt_ase_data_decode_blob, then the walk;
 *   1  a JSON text data column: pt_ase_data_decode_text, then the walk;
 *   2  a key-value or metadata text: pt_ase_json_loads, every value classified;
 *   3  a blob column viewed as an array: dtype, dims and shape from the next
 *      bytes, then pt_ase_blob_array.
 * Every array handed out is read whole (pt_ase_array_get on each element: an
 * array that claims more than its blob holds is a heap overflow under ASan),
 * its count must be the product of its shape, and its fits and shape text
 * are computed as the reader does. */
#include "engine/data/ase_db_codec.h"
#include "engine/data/ase_db_internal.h"
#include "tests/fuzz/fuzz.h"

static void check_array(const pt_ase_array *a)
{
    FUZZ_CHECK(a->ndim >= 0 && a->ndim <= PT_ASE_MAX_DIMS);
    uint64_t count = 1;
    for (int d = 0; d < a->ndim; d++) count *= a->shape[d];
    FUZZ_CHECK(count == a->count);
    volatile double sink = 0;
    for (uint64_t i = 0; i < a->count; i++) sink += pt_ase_array_get(a, i);
    (void)sink;
    char shape[64];
    pt_ase_shape_format(a, shape, sizeof shape);
    FUZZ_CHECK(memchr(shape, '\0', sizeof shape) != NULL);
}

static void check_value(const pt_ase_value *v)
{
    FUZZ_CHECK(memchr(v->what, '\0', sizeof v->what) != NULL);
    if (v->kind == PT_ASE_ARRAY) check_array(&v->array);
    if (v->kind == PT_ASE_NUMBER) FUZZ_CHECK(isfinite(v->number));
    if (v->kind == PT_ASE_BAD) FUZZ_CHECK(v->what[0] != '\0');   /* damage is described */
    for (uint64_t n_atoms = 0; n_atoms < 4; n_atoms++) (void)pt_ase_fits(v, n_atoms);
}

static int on_leaf(void *ctx, const char *path, const pt_ase_value *v)
{
    (void)ctx;
    FUZZ_CHECK(strlen(path) < PT_ASE_PATH_MAX && !strncmp(path, "data", 4));
    check_value(v);
    return 0;
}

static void data_column(const uint8_t *data, size_t size, int binary)
{
    pt_ase_data d;
    char err[200] = "";
    int rc = binary ? pt_ase_data_decode_blob(&d, data, size, err, sizeof err)
                    : pt_ase_data_decode_text(&d, (const char *)data, size, err, sizeof err);
    if (rc < 0) FUZZ_CHECK(err[0] != '\0');
    else pt_ase_data_walk(&d, on_leaf, NULL);
    pt_ase_data_close(&d);
}

static void json_values(const uint8_t *data, size_t size)
{
    char err[200] = "";
    json_t *j = pt_ase_json_loads((const char *)data, size, err, sizeof err);
    if (!j) {
        FUZZ_CHECK(err[0] != '\0');
        return;
    }
    double *scratch = NULL;
    size_t cap = 0;
    pt_ase_value v;
    pt_ase_value_classify(j, NULL, 0, &scratch, &cap, &v);
    check_value(&v);
    if (json_is_object(j)) {
        const char *key;
        json_t *val;
        json_object_foreach(j, key, val) {
            pt_ase_value_classify(val, NULL, 0, &scratch, &cap, &v);
            check_value(&v);
        }
    }
    free(scratch);
    json_decref(j);
}

static void blob_view(const uint8_t *data, size_t size)
{
    if (size < 2) return;
    pt_ase_dtype dtype = (pt_ase_dtype)(data[0] % (PT_ASE_DT_HOST + 1));
    int ndim = data[1] % 4;
    uint64_t shape[4] = {0};
    size_t used = 2;
    int free_dims = 0;   /* the API allows one "whatever is left" (0) entry */
    for (int d = 0; d < ndim && used < size; d++) {
        shape[d] = data[used++] % 8;
        if (shape[d] == 0 && free_dims++) shape[d] = 1;
    }
    pt_ase_array a;
    char err[120] = "";
    if (pt_ase_blob_array(data + used, size - used, dtype, ndim, shape, &a, err, sizeof err) == 0) check_array(&a);
    else FUZZ_CHECK(err[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    /* the rest in a buffer of its own, so reading past it is caught */
    uint8_t *rest = malloc(size - 1 ? size - 1 : 1);
    FUZZ_CHECK(rest != NULL);
    memcpy(rest, data + 1, size - 1);
    switch (data[0] % 4) {
    case 0: data_column(rest, size - 1, 1); break;
    case 1: data_column(rest, size - 1, 0); break;
    case 2: json_values(rest, size - 1); break;
    default: blob_view(rest, size - 1); break;
    }
    free(rest);
    return 0;
}
