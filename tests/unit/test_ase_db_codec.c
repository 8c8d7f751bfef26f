/* test_ase_db_codec.c — ASE's encodings decoded from hand-made bytes: numpy
 * dtypes and little-endian elements, column blobs, JSON with Python's NaN
 * and Infinity, the binary (schema 9) and JSON text forms of the data
 * column, every leaf kind and damage, and SchNetPack unit strings against
 * the factors SchNetPack computes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/ase_db_codec.h"
#include "engine/data/ase_db_units.h"

/* ---- dtypes and elements ------------------------------------------------- */

static void test_dtype_parse(void **state)
{
    (void)state;
    size_t size;
    assert_int_equal(pt_ase_dtype_parse("float64", &size), PT_ASE_DT_F64);
    assert_int_equal(size, 8);
    assert_int_equal(pt_ase_dtype_parse("float32", &size), PT_ASE_DT_F32);
    assert_int_equal(size, 4);
    assert_int_equal(pt_ase_dtype_parse("uint16", &size), PT_ASE_DT_U16);
    assert_int_equal(size, 2);
    assert_int_equal(pt_ase_dtype_parse("bool", &size), PT_ASE_DT_NONE);
    assert_int_equal(size, 1);
    assert_int_equal(pt_ase_dtype_parse("complex128", &size), PT_ASE_DT_NONE);
    assert_int_equal(size, 16);
    assert_int_equal(pt_ase_dtype_parse("str160", &size), PT_ASE_DT_NONE);   /* '<U5': 5 x 4 bytes */
    assert_int_equal(size, 20);
    assert_int_equal(pt_ase_dtype_parse("bytes40", &size), PT_ASE_DT_NONE);
    assert_int_equal(size, 5);
    assert_int_equal(pt_ase_dtype_parse("object", &size), PT_ASE_DT_NONE);
    assert_int_equal(size, 0);
    assert_int_equal(pt_ase_dtype_parse("str", &size), PT_ASE_DT_NONE);
    assert_int_equal(size, 0);
}

static double one(pt_ase_dtype t, const void *bytes)
{
    pt_ase_array a = {.ndim = 1, .shape = {1}, .count = 1, .dtype = t, .raw = bytes};
    return pt_ase_array_get(&a, 0);
}

static void test_elements_little_endian(void **state)
{
    (void)state;
    static const unsigned char f64[] = {0, 0, 0, 0, 0, 0, 0xf8, 0x3f};   /* 1.5 */
    static const unsigned char f32[] = {0, 0, 0x10, 0xc0};               /* -2.25 */
    static const unsigned char i64[] = {0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const unsigned char i32[] = {0x2a, 0, 0, 0};
    static const unsigned char i16[] = {0xfe, 0xff};
    static const unsigned char u16[] = {0xff, 0xff};
    static const unsigned char u32[] = {0, 0, 0, 0x80};
    static const unsigned char u64[] = {0, 0, 0, 0, 0, 1, 0, 0};
    static const unsigned char b8[] = {0xff};
    assert_true(one(PT_ASE_DT_F64, f64) == 1.5);
    assert_true(one(PT_ASE_DT_F32, f32) == -2.25);
    assert_true(one(PT_ASE_DT_I64, i64) == -5.0);
    assert_true(one(PT_ASE_DT_I32, i32) == 42.0);
    assert_true(one(PT_ASE_DT_I16, i16) == -2.0);
    assert_true(one(PT_ASE_DT_U16, u16) == 65535.0);
    assert_true(one(PT_ASE_DT_U32, u32) == 2147483648.0);
    assert_true(one(PT_ASE_DT_U64, u64) == 1099511627776.0);
    assert_true(one(PT_ASE_DT_I8, b8) == -1.0);
    assert_true(one(PT_ASE_DT_U8, b8) == 255.0);
    static const unsigned char h_one[] = {0x00, 0x3c}, h_m2[] = {0x00, 0xc0}, h_sub[] = {0x01, 0x00},
                               h_inf[] = {0x00, 0x7c}, h_nan[] = {0x01, 0x7e}, h_max[] = {0xff, 0x7b};
    assert_true(one(PT_ASE_DT_F16, h_one) == 1.0);
    assert_true(one(PT_ASE_DT_F16, h_m2) == -2.0);
    assert_true(one(PT_ASE_DT_F16, h_sub) == ldexp(1.0, -24));
    assert_true(isinf(one(PT_ASE_DT_F16, h_inf)));
    assert_true(isnan(one(PT_ASE_DT_F16, h_nan)));
    assert_true(one(PT_ASE_DT_F16, h_max) == 65504.0);
}

static void test_blob_array(void **state)
{
    (void)state;
    double v[9];
    for (int i = 0; i < 9; i++) v[i] = i + 0.5;
    pt_ase_array a;
    char err[128];
    uint64_t rows3[2] = {0, 3}, cell[2] = {3, 3}, flat[1] = {0};
    assert_int_equal(pt_ase_blob_array(v, 6 * 8, PT_ASE_DT_F64, 2, rows3, &a, err, sizeof err), 0);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 2);
    assert_int_equal(a.shape[1], 3);
    assert_true(pt_ase_array_get(&a, 5) == 5.5);
    assert_int_equal(pt_ase_blob_array(v, 9 * 8, PT_ASE_DT_F64, 2, cell, &a, err, sizeof err), 0);
    assert_int_equal(a.count, 9);
    assert_int_equal(pt_ase_blob_array(v, 0, PT_ASE_DT_F64, 2, rows3, &a, err, sizeof err), 0);
    assert_int_equal(a.shape[0], 0);
    assert_int_equal(pt_ase_blob_array(v, 7 * 8, PT_ASE_DT_F64, 2, rows3, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "56 bytes"));
    assert_int_equal(pt_ase_blob_array(v, 8 * 8, PT_ASE_DT_F64, 2, cell, &a, err, sizeof err), -1);
    assert_int_equal(pt_ase_blob_array(v, 13, PT_ASE_DT_F64, 1, flat, &a, err, sizeof err), -1);
    assert_int_equal(pt_ase_blob_array(v, 12, PT_ASE_DT_I32, 1, flat, &a, err, sizeof err), 0);
    assert_int_equal(a.count, 3);
    char shape[32];
    pt_ase_shape_format(&a, shape, sizeof shape);
    assert_string_equal(shape, "(3,)");
    a.ndim = 0;
    pt_ase_shape_format(&a, shape, sizeof shape);
    assert_string_equal(shape, "()");
}

/* ---- JSON as Python writes it -------------------------------------------- */

static void test_json_nonfinite(void **state)
{
    (void)state;
    char err[200];
    const char *text = "{\"a\": NaN, \"b\": [Infinity, -Infinity, 1.5], \"s\": \"x\\\"NaN\", \"t\": \"Infinity\"}";
    json_t *j = pt_ase_json_loads(text, strlen(text), err, sizeof err);
    assert_non_null(j);
    pt_ase_value v;
    double *scratch = NULL;
    size_t cap = 0;
    pt_ase_value_classify(json_object_get(j, "a"), NULL, 0, &scratch, &cap, &v);
    assert_int_equal(v.kind, PT_ASE_NONFINITE);
    assert_true(isnan(v.number));
    pt_ase_value_classify(json_object_get(j, "b"), NULL, 0, &scratch, &cap, &v);
    assert_int_equal(v.kind, PT_ASE_ARRAY);
    assert_int_equal(v.array.count, 3);
    assert_true(isinf(pt_ase_array_get(&v.array, 0)) && pt_ase_array_get(&v.array, 0) > 0);
    assert_true(isinf(pt_ase_array_get(&v.array, 1)) && pt_ase_array_get(&v.array, 1) < 0);
    assert_true(pt_ase_array_get(&v.array, 2) == 1.5);
    /* the words inside strings are left alone */
    assert_string_equal(json_string_value(json_object_get(j, "s")), "x\"NaN");
    assert_string_equal(json_string_value(json_object_get(j, "t")), "Infinity");
    json_decref(j);
    free(scratch);
    assert_null(pt_ase_json_loads("{\"a\": nan}", 10, err, sizeof err));
    assert_non_null(strstr(err, "not valid JSON"));
    /* large numbers keep their double value */
    j = pt_ase_json_loads("[0.1, 12345678901234567890.5, -1e-300]", 38, err, sizeof err);
    assert_true(json_real_value(json_array_get(j, 0)) == 0.1);
    assert_true(json_real_value(json_array_get(j, 1)) == 12345678901234567890.5);
    assert_true(json_real_value(json_array_get(j, 2)) == -1e-300);
    json_decref(j);
}

/* [[[...[0, 0 ...], 0 ...], ...]: `depth` levels whose first element is the
 * next level and the k - 1 others are zeros.  Its shape read from the first
 * elements is k^depth, yet it holds depth (k - 1) + 1 numbers. */
static char *lopsided_list(int k, int depth)
{
    size_t cap = (size_t)depth * (size_t)k * 3 + 16, n = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    for (int d = 0; d < depth; d++) s[n++] = '[';
    s[n++] = '0';
    for (int d = 0; d < depth; d++) {
        for (int i = 1; i < k; i++) s[n++] = ',', s[n++] = '0';
        s[n++] = ']';
    }
    s[n] = '\0';
    return s;
}

/* Found with tests/fuzz/fuzz_ase_codec.c (inputs in tests/fuzz/regressions/
 * ase_codec): 8 levels of 256 made the claimed size wrap to 0 in 64 bits and
 * the copy wrote past a 1-element buffer; 8 levels of 12 asked for 3.4 GB.
 * Both are "not a rectangular array" without a large allocation. */
static void test_list_claims_more_than_it_holds(void **state)
{
    (void)state;
    static const int cases[][2] = {{256, 8}, {12, 8}, {65536, 4}, {3, 2}};
    double *scratch = NULL;
    size_t cap = 0;
    char err[200];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *text = lopsided_list(cases[c][0], cases[c][1]);
        json_t *j = pt_ase_json_loads(text, strlen(text), err, sizeof err);
        assert_non_null(j);
        pt_ase_value v;
        pt_ase_value_classify(j, NULL, 0, &scratch, &cap, &v);
        assert_int_equal(v.kind, PT_ASE_OTHER);
        assert_non_null(strstr(v.what, "not a rectangular array"));
        assert_true(cap <= 64);   /* nothing sized by the claimed shape */
        json_decref(j);
        free(text);
    }
    /* a real 8-dimensional array still reads, in C order */
    char text[2048];
    size_t n = 0;
    for (int i = 0; i < 256; i++) {
        for (int d = 7; d >= 0; d--)
            if (i % (1 << (d + 1)) == 0) text[n++] = '[';
        n += (size_t)snprintf(text + n, sizeof text - n, "%d", i);
        for (int d = 0; d < 8; d++)
            if ((i + 1) % (1 << (d + 1)) == 0) text[n++] = ']';
        if (i < 255) text[n++] = ',';
    }
    text[n] = '\0';
    json_t *j = pt_ase_json_loads(text, n, err, sizeof err);
    assert_non_null(j);
    pt_ase_value v;
    pt_ase_value_classify(j, NULL, 0, &scratch, &cap, &v);
    assert_int_equal(v.kind, PT_ASE_ARRAY);
    assert_int_equal(v.array.ndim, 8);
    assert_int_equal(v.array.count, 256);
    for (int i = 0; i < 256; i++) assert_true(pt_ase_array_get(&v.array, (uint64_t)i) == i);
    json_decref(j);
    free(scratch);
}

/* ---- the binary data column ---------------------------------------------- */

typedef struct leaf {
    char path[PT_ASE_PATH_MAX];
    pt_ase_kind kind;
    int ndim;
    uint64_t shape[3];
    double first, last;
    char what[160];
} leaf;

typedef struct leaves {
    int n;
    leaf items[32];
} leaves;

static int on_leaf(void *ctx, const char *path, const pt_ase_value *v)
{
    leaves *l = ctx;
    leaf *e = &l->items[l->n++];
    snprintf(e->path, sizeof e->path, "%s", path);
    e->kind = v->kind;
    snprintf(e->what, sizeof e->what, "%s", v->what);
    if (v->kind == PT_ASE_ARRAY) {
        e->ndim = v->array.ndim;
        for (int d = 0; d < v->array.ndim && d < 3; d++) e->shape[d] = v->array.shape[d];
        if (v->array.count) {
            e->first = pt_ase_array_get(&v->array, 0);
            e->last = pt_ase_array_get(&v->array, v->array.count - 1);
        }
    } else {
        e->first = v->number;
    }
    return 0;
}

static const leaf *find(const leaves *l, const char *path)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->items[i].path, path)) return &l->items[i];
    fail_msg("no leaf %s", path);
    return NULL;
}

/* header (int64 offset of the JSON) + array bytes at byte 8 + JSON */
static size_t make_blob(unsigned char *buf, const void *arrays, size_t arrays_len, const char *json)
{
    uint64_t off = 8 + arrays_len;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(off >> (8 * i));
    if (arrays_len) memcpy(buf + 8, arrays, arrays_len);
    memcpy(buf + off, json, strlen(json));
    return off + strlen(json);
}

static void test_data_blob(void **state)
{
    (void)state;
    struct {
        double forces[6];
        float e[2];
        unsigned char flags[2];
    } arr = {{1, 2, 3, 4, 5, -6}, {-7.25f, 0}, {1, 0}};
    const char *json =
        "{\"forces\": {\"__ndarray__\": [[2, 3], \"float64\", 8]},"
        " \"energy\": {\"__ndarray__\": [[1], \"float32\", 56]},"
        " \"flags\": {\"__ndarray__\": [[2], \"bool\", 64]},"
        " \"n\": 3, \"s\": \"text\", \"b\": true, \"z\": null, \"bad\": NaN,"
        " \"dft\": {\"e\": 1.5, \"deeper\": {\"x\": [[1, 2], [3, 4]]}},"
        " \"ragged\": [[1], [2, 3]], \"c\": {\"__complex__\": [1, 2]},"
        " \"cell\": {\"array\": [1], \"__ase_objtype__\": \"cell\"},"
        " \"past\": {\"__ndarray__\": [[100], \"float64\", 8]},"
        " \"shape\": {\"__ndarray__\": [[-1], \"float64\", 8]},"
        " \"obj\": {\"__ndarray__\": [[1], \"object\", 8]},"
        " \"empty\": []}";
    unsigned char buf[2048];
    size_t len = make_blob(buf, &arr, sizeof arr, json);
    pt_ase_data d;
    char err[200];
    assert_int_equal(pt_ase_data_decode_blob(&d, buf, len, err, sizeof err), 0);
    leaves l = {0};
    assert_int_equal(pt_ase_data_walk(&d, on_leaf, &l), 0);
    const leaf *e = find(&l, "data.forces");
    assert_int_equal(e->kind, PT_ASE_ARRAY);
    assert_int_equal(e->ndim, 2);
    assert_int_equal(e->shape[0], 2);
    assert_true(e->first == 1.0 && e->last == -6.0);
    e = find(&l, "data.energy");
    assert_int_equal(e->kind, PT_ASE_ARRAY);
    assert_true(e->first == -7.25);
    e = find(&l, "data.flags");
    assert_int_equal(e->kind, PT_ASE_OTHER);
    assert_non_null(strstr(e->what, "bool"));
    assert_int_equal(find(&l, "data.n")->kind, PT_ASE_NUMBER);
    assert_true(find(&l, "data.n")->first == 3.0);
    assert_int_equal(find(&l, "data.s")->kind, PT_ASE_TEXT);
    assert_int_equal(find(&l, "data.b")->kind, PT_ASE_TEXT);
    assert_int_equal(find(&l, "data.z")->kind, PT_ASE_TEXT);
    assert_int_equal(find(&l, "data.bad")->kind, PT_ASE_NONFINITE);
    assert_true(find(&l, "data.dft.e")->first == 1.5);
    e = find(&l, "data.dft.deeper.x");
    assert_int_equal(e->kind, PT_ASE_ARRAY);
    assert_int_equal(e->ndim, 2);
    assert_true(e->first == 1.0 && e->last == 4.0);
    assert_int_equal(find(&l, "data.ragged")->kind, PT_ASE_OTHER);
    assert_int_equal(find(&l, "data.c")->kind, PT_ASE_OTHER);
    e = find(&l, "data.cell");
    assert_int_equal(e->kind, PT_ASE_OTHER);
    assert_non_null(strstr(e->what, "ASE object (cell)"));
    e = find(&l, "data.past");
    assert_int_equal(e->kind, PT_ASE_BAD);
    assert_non_null(strstr(e->what, "runs past its blob"));
    assert_int_equal(find(&l, "data.shape")->kind, PT_ASE_BAD);
    assert_int_equal(find(&l, "data.obj")->kind, PT_ASE_OTHER);
    e = find(&l, "data.empty");
    assert_int_equal(e->kind, PT_ASE_ARRAY);
    assert_int_equal(e->shape[0], 0);
    assert_int_equal(l.n, 17);
    pt_ase_data_close(&d);
}

static void test_data_blob_damage(void **state)
{
    (void)state;
    unsigned char buf[256];
    pt_ase_data d;
    char err[200];
    assert_int_equal(pt_ase_data_decode_blob(&d, "1234567", 7, err, sizeof err), -1);
    assert_non_null(strstr(err, "shorter than its 8-byte header"));
    size_t len = make_blob(buf, NULL, 0, "{}");
    buf[0] = 200;   /* JSON past the end */
    assert_int_equal(pt_ase_data_decode_blob(&d, buf, len, err, sizeof err), -1);
    assert_non_null(strstr(err, "says its JSON starts at byte 200"));
    buf[0] = 3;     /* inside the header */
    assert_int_equal(pt_ase_data_decode_blob(&d, buf, len, err, sizeof err), -1);
    len = make_blob(buf, NULL, 0, "{\"a\": ");
    assert_int_equal(pt_ase_data_decode_blob(&d, buf, len, err, sizeof err), -1);
    assert_non_null(strstr(err, "not valid JSON"));
    len = make_blob(buf, NULL, 0, "[1, 2]");
    assert_int_equal(pt_ase_data_decode_blob(&d, buf, len, err, sizeof err), -1);
    assert_non_null(strstr(err, "a list, not a dictionary"));
    /* what ASE writes for a row without data: an empty dictionary */
    len = make_blob(buf, NULL, 0, "{}");
    assert_int_equal(pt_ase_data_decode_blob(&d, buf, len, err, sizeof err), 0);
    assert_null(d.root);
    pt_ase_data_close(&d);
    len = make_blob(buf, NULL, 0, "null");
    assert_int_equal(pt_ase_data_decode_blob(&d, buf, len, err, sizeof err), 0);
    assert_null(d.root);
    pt_ase_data_close(&d);
}

/* ---- the JSON text data column (schema < 9) ------------------------------ */

static void test_data_text(void **state)
{
    (void)state;
    const char *text =
        "{\"energy\": {\"__ndarray__\": [[1], \"float64\", [-2.06474]]},"
        " \"forces\": {\"__ndarray__\": [[2, 3], \"float32\", [0.10000000149011612, 2, 3, 4, 5, NaN]]},"
        " \"short\": {\"__ndarray__\": [[2, 3], \"float64\", [1, 2]]},"
        " \"word\": {\"__ndarray__\": [[1], \"float64\", [\"a\"]]},"
        " \"off\": {\"__ndarray__\": [[1], \"float64\", 8]},"
        " \"flags\": {\"__ndarray__\": [[2], \"bool\", [true, false]]}}";
    pt_ase_data d;
    char err[200];
    assert_int_equal(pt_ase_data_decode_text(&d, text, strlen(text), err, sizeof err), 0);
    leaves l = {0};
    assert_int_equal(pt_ase_data_walk(&d, on_leaf, &l), 0);
    assert_int_equal(l.n, 6);
    assert_true(find(&l, "data.energy")->first == -2.06474);
    const leaf *e = find(&l, "data.forces");
    assert_int_equal(e->kind, PT_ASE_ARRAY);
    assert_true((float)e->first == 0.1f);   /* float32 values printed as doubles are exact */
    assert_true(isnan(e->last));
    assert_int_equal(find(&l, "data.short")->kind, PT_ASE_BAD);
    assert_int_equal(find(&l, "data.word")->kind, PT_ASE_BAD);
    e = find(&l, "data.off");
    assert_int_equal(e->kind, PT_ASE_BAD);
    assert_non_null(strstr(e->what, "JSON text"));
    assert_int_equal(find(&l, "data.flags")->kind, PT_ASE_OTHER);
    pt_ase_data_close(&d);
    assert_int_equal(pt_ase_data_decode_text(&d, "null", 4, err, sizeof err), 0);
    assert_null(d.root);
    assert_int_equal(pt_ase_data_decode_text(&d, "\"x\"", 3, err, sizeof err), -1);
    assert_non_null(strstr(err, "a string, not a dictionary"));
    assert_int_equal(pt_ase_data_decode_text(&d, "{", 1, err, sizeof err), -1);
}

static void test_long_path(void **state)
{
    (void)state;
    char text[700];
    size_t n = (size_t)snprintf(text, sizeof text, "{\"");
    for (int i = 0; i < 300; i++) text[n++] = 'k';
    n += (size_t)snprintf(text + n, sizeof text - n, "\": 1, \"ok\": 2}");
    pt_ase_data d;
    char err[200];
    assert_int_equal(pt_ase_data_decode_text(&d, text, n, err, sizeof err), 0);
    leaves l = {0};
    assert_int_equal(pt_ase_data_walk(&d, on_leaf, &l), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.items[0].kind, PT_ASE_BAD);
    assert_non_null(strstr(l.items[0].what, "longer than"));
    assert_int_equal(l.items[1].kind, PT_ASE_NUMBER);
    pt_ase_data_close(&d);
}

/* ---- units --------------------------------------------------------------- */

static void test_units(void **state)
{
    (void)state;
    pt_ase_unit u;
    char err[300];
    /* the factors schnetpack.units.convert_units(unit, ASE's unit) gives */
    assert_int_equal(pt_ase_unit_parse("kcal/mol", &u, err, sizeof err), 0);
    assert_true(u.factor == 0.04336410390059322);
    assert_true(pt_ase_unit_is(&u, 0, 1));
    assert_int_equal(pt_ase_unit_parse("kcal/mol/Bohr", &u, err, sizeof err), 0);
    assert_true(u.factor == 0.08194628006445806);
    assert_true(pt_ase_unit_is(&u, -1, 1));
    assert_int_equal(pt_ase_unit_parse("kJ/mol", &u, err, sizeof err), 0);
    assert_true(u.factor == 0.010364269574711572);
    assert_int_equal(pt_ase_unit_parse("Hartree", &u, err, sizeof err), 0);
    assert_true(u.factor == 27.211386024367243);
    assert_int_equal(pt_ase_unit_parse("Bohr", &u, err, sizeof err), 0);
    assert_true(pt_ase_unit_is(&u, 1, 0));
    assert_int_equal(pt_ase_unit_parse("eV/Ang/Ang/Ang", &u, err, sizeof err), 0);
    assert_true(u.factor == 1.0 && pt_ase_unit_is(&u, -3, 1));
    assert_int_equal(pt_ase_unit_parse("GPa", &u, err, sizeof err), 0);
    assert_true(u.factor == 0.006241509125883258 && pt_ase_unit_is(&u, -3, 1));
    assert_int_equal(pt_ase_unit_parse("eV Ang", &u, err, sizeof err), 0);
    assert_true(pt_ase_unit_is(&u, 1, 1));
    assert_int_equal(pt_ase_unit_parse("Debye", &u, err, sizeof err), 0);
    assert_true(u.other && !pt_ase_unit_is(&u, 0, 0));
    assert_int_equal(pt_ase_unit_parse(NULL, &u, err, sizeof err), 0);
    assert_true(u.unitless);
    assert_int_equal(pt_ase_unit_parse("arb. unit", &u, err, sizeof err), 0);
    assert_true(u.unitless && !pt_ase_unit_is(&u, 0, 0));
    assert_int_equal(pt_ase_unit_parse("furlong", &u, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not know 'furlong'"));
    assert_int_equal(pt_ase_unit_parse("eV/", &u, err, sizeof err), -1);
    assert_non_null(strstr(err, "ends with '/'"));
    assert_int_equal(pt_ase_unit_parse("eV*Ang", &u, err, sizeof err), -1);
    assert_non_null(strstr(err, "'*' is not understood"));
    assert_int_equal(pt_ase_unit_parse("  ", &u, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_parse),
        cmocka_unit_test(test_elements_little_endian),
        cmocka_unit_test(test_blob_array),
        cmocka_unit_test(test_json_nonfinite),
        cmocka_unit_test(test_list_claims_more_than_it_holds),
        cmocka_unit_test(test_data_blob),
        cmocka_unit_test(test_data_blob_damage),
        cmocka_unit_test(test_data_text),
        cmocka_unit_test(test_long_path),
        cmocka_unit_test(test_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
