/* test_safetensors.c — the safetensors reader/writer and SchNet model files:
 * round trips, files as PyTorch writes them (other order, other name of the
 * shared filter network, no metadata), and one test per error the format or
 * the model loader must report, each asserting its message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/safetensors.h"
#include "engine/model/schnet.h"
#include "tests/unit/tmp_fixture.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/pt_st_test_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(dir);
    return 0;
}

/* A file image: 8-byte length, header text, then `data_len` bytes of data. */
static uint8_t *image(const char *header, size_t data_len, size_t *size)
{
    size_t h = strlen(header);
    *size = 8 + h + data_len;
    uint8_t *b = calloc(*size, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
    return b;
}

/* parses `header` + data and expects exactly one error, on field, saying msg */
static void expect_error(const char *header, size_t data_len, const char *field, const char *msg)
{
    size_t size;
    uint8_t *b = image(header, data_len, &size);
    pt_safetensors st;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_parse(&st, b, size, "m.safetensors", &errs), -1);
    assert_true(errs.kept >= 1);
    assert_string_equal(errs.items[0].file, "m.safetensors");
    assert_string_equal(errs.items[0].field, field);
    assert_string_equal(errs.items[0].message, msg);
    assert_null(st.tensors);
    pt_errors_close(&errs);
    free(b);
}

static void test_generic_round_trip(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[1] = {-0.5f}, c[3] = {7, 8, 9};
    pt_st_entry e[3] = {
        {.name = "a", .ndim = 2, .shape = {2, 3}, .data = a},
        {.name = "scalar", .ndim = 0, .data = b},
        {.name = "c.vec", .ndim = 1, .shape = {3}, .data = c},
    };
    pt_st_meta meta[2] = {{"k1", "v1"}, {"format", "pt"}};
    char path[128];
    snprintf(path, sizeof(path), "%s/g.safetensors", dir);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_write(path, e, 3, meta, 2, &errs), 0);
    pt_safetensors st;
    assert_int_equal(pt_safetensors_open(&st, path, &errs), 0);
    assert_int_equal(errs.total, 0);
    assert_int_equal(st.n_tensors, 3);
    assert_int_equal(st.n_meta, 2);
    assert_string_equal(pt_safetensors_meta(&st, "k1"), "v1");
    assert_null(pt_safetensors_meta(&st, "nope"));
    assert_int_equal((st.data - st.file) % 8, 0); /* header padded to 8 bytes */
    const pt_st_tensor *t = pt_safetensors_find(&st, "a");
    assert_non_null(t);
    assert_string_equal(t->dtype, "F32");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_memory_equal(t->data, a, sizeof(a));
    t = pt_safetensors_find(&st, "scalar");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->numel, 1);
    assert_memory_equal(t->data, b, sizeof(b));
    t = pt_safetensors_find(&st, "c.vec");
    assert_memory_equal(t->data, c, sizeof(c));
    assert_int_equal(st.data_size, sizeof(a) + sizeof(b) + sizeof(c));
    assert_null(pt_safetensors_find(&st, "d"));
    pt_safetensors_close(&st);
    assert_int_equal(access("/nonexistent", F_OK), -1);
    pt_errors_close(&errs);
}

static void test_reader_accepts_other_dtypes_and_padding(void **state)
{
    (void)state;
    /* as written by Python: spaces after the JSON, F64/I64 tensors, holes */
    const char *h = "{\"x\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,32]},"
                    "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}      ";
    size_t size;
    uint8_t *b = image(h, 32, &size);
    pt_safetensors st;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_parse(&st, b, size, "p", &errs), 0);
    assert_int_equal(st.n_tensors, 2);
    assert_string_equal(pt_safetensors_find(&st, "x")->dtype, "F64");
    assert_int_equal(st.n_meta, 0);
    pt_safetensors_close(&st);
    pt_errors_close(&errs);
    free(b);
}

static void test_truncated_files(void **state)
{
    (void)state;
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    size_t size;
    uint8_t *b = image(h, 16, &size);
    pt_safetensors st;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_parse(&st, b, 5, "t", &errs), -1);
    assert_string_equal(errs.items[0].message,
                        "truncated: 5 bytes, shorter than the 8-byte header length");
    pt_errors_clear(&errs);
    assert_int_equal(pt_safetensors_parse(&st, b, 30, "t", &errs), -1);
    assert_string_equal(errs.items[0].message,
                        "truncated: the header needs 57 bytes but only 22 follow");
    pt_errors_clear(&errs);
    assert_int_equal(pt_safetensors_parse(&st, b, size - 3, "t", &errs), -1);
    assert_string_equal(errs.items[0].field, "w");
    assert_string_equal(errs.items[0].message,
                        "data_offsets end 16 is beyond the 13-byte data section (truncated file?)");
    pt_errors_close(&errs);
    free(b);
}

static void test_bad_header_json(void **state)
{
    (void)state;
    expect_error("{\"w\": {\"dtype\": ", 0, "header",
                 "bad header JSON at line 1 column 16: unexpected token near end of file");
    expect_error("[1, 2]", 0, "header", "header is not a JSON object");
    expect_error("{\"a\":{},\"a\":{}}", 0, "header",
                 "bad header JSON at line 1 column 11: duplicate object key near '\"a\"'");
}

static void test_header_length_limit(void **state)
{
    (void)state;
    uint8_t b[16] = {0, 0, 0, 0x10, 0, 0, 0, 0};
    pt_safetensors st;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_parse(&st, b, sizeof(b), "big", &errs), -1);
    assert_string_equal(errs.items[0].message,
                        "header length 268435456 exceeds the format's 100 MB limit");
    pt_errors_close(&errs);
}

static void test_bad_tensor_entries(void **state)
{
    (void)state;
    expect_error("{\"w\":3}", 0, "w", "header entry is not an object");
    expect_error("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "w", "missing \"dtype\" string");
    expect_error("{\"w\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "w",
                 "unknown dtype \"F99\"");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "w", "missing \"shape\" array");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "w",
                 "\"shape\" must hold non-negative integers");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
                 4, "w", "has 9 dimensions, at most 8 are supported");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "w",
                 "\"data_offsets\" must be [begin, end] with 0 <= begin <= end");
    expect_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16, "w",
                 "data_offsets [0, 12] span 12 bytes but 4 F32 elements need 16");
    expect_error("{\"__metadata__\":{\"a\":1}}", 0, "__metadata__", "value of \"a\" is not a string");
    expect_error("{\"__metadata__\":[]}", 0, "__metadata__", "must be an object of strings");
}

static void test_overlapping_offsets(void **state)
{
    (void)state;
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                 24, "b", "bytes [8, 24) overlap tensor \"a\"");
}

static void test_out_of_range_offsets(void **state)
{
    (void)state;
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[100,116]}}", 24, "a",
                 "data_offsets end 116 is beyond the 24-byte data section (truncated file?)");
}

static void test_open_and_write_errors(void **state)
{
    (void)state;
    pt_safetensors st;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_open(&st, "/nonexistent/x.safetensors", &errs), -1);
    assert_string_equal(errs.items[0].file, "/nonexistent/x.safetensors");
    assert_string_equal(errs.items[0].message, "cannot open: No such file or directory");
    pt_errors_clear(&errs);
    float v = 1.0f;
    pt_st_entry e[2] = {{.name = "a", .ndim = 1, .shape = {1}, .data = &v},
                        {.name = "a", .ndim = 1, .shape = {1}, .data = &v}};
    assert_int_equal(pt_safetensors_write("/nonexistent/x.safetensors", e, 1, NULL, 0, &errs), -1);
    assert_string_equal(errs.items[0].file, "/nonexistent/x.safetensors.tmp");
    assert_string_equal(errs.items[0].message, "cannot create: No such file or directory");
    pt_errors_clear(&errs);
    char path[128];
    snprintf(path, sizeof(path), "%s/dup.safetensors", dir);
    assert_int_equal(pt_safetensors_write(path, e, 2, NULL, 0, &errs), -1);
    assert_string_equal(errs.items[0].message, "tensor names must be unique and not __metadata__");
    pt_errors_close(&errs);
}

/* ---- SchNet model files ------------------------------------------------------ */

typedef struct ftensor {
    char name[PT_SCHNET_NAME_MAX];
    char dtype[8];
    int ndim;
    int64_t shape[2];
    const float *data;   /* NULL: zero bytes */
} ftensor;

typedef struct fspec {
    ftensor t[96];
    int n;
    pt_st_meta meta[16];
    int n_meta;
} fspec;

static ftensor *spec_find(fspec *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name)) return &s->t[i];
    fail_msg("no tensor %s in the spec", name);
    return &s->t[0]; /* not reached: fail_msg jumps out of the test */
}

static void spec_remove(fspec *s, const char *name)
{
    ftensor *t = spec_find(s, name);
    *t = s->t[--s->n];
}

/* The model's own tensors under PyG's names, as PyTorch would save them:
 * reversed order, no metadata, no buffers. */
static void spec_from_model(fspec *s, const pt_schnet *m)
{
    memset(s, 0, sizeof(*s));
    for (size_t i = m->n_tensors; i-- > 0;) {
        const pt_schnet_tensor *t = &m->tensors[i];
        ftensor *f = &s->t[s->n++];
        snprintf(f->name, sizeof(f->name), "%s", t->name);
        snprintf(f->dtype, sizeof(f->dtype), "F32");
        f->ndim = t->ndim;
        f->shape[0] = t->shape[0];
        f->shape[1] = t->shape[1];
        f->data = m->params_memory + t->offset;
    }
}

static uint8_t *spec_image(const fspec *s, size_t *size)
{
    json_t *root = json_object();
    if (s->n_meta) {
        json_t *md = json_object();
        for (int i = 0; i < s->n_meta; i++)
            json_object_set_new(md, s->meta[i].key, json_string(s->meta[i].value));
        json_object_set_new(root, "__metadata__", md);
    }
    size_t off = 0, bytes[96];
    for (int i = 0; i < s->n; i++) {
        const ftensor *t = &s->t[i];
        size_t numel = 1;
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) {
            json_array_append_new(shape, json_integer(t->shape[d]));
            numel *= (size_t)t->shape[d];
        }
        bytes[i] = numel * pt_safetensors_dtype_size(t->dtype);
        json_object_set_new(root, t->name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", t->dtype, "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + bytes[i])));
        off += bytes[i];
    }
    char *h = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    uint8_t *b = image(h, off, size);
    uint8_t *data = b + 8 + strlen(h);
    free(h);
    for (int i = 0; i < s->n; i++) {
        if (s->t[i].data) memcpy(data, s->t[i].data, bytes[i]);
        else memset(data, 0, bytes[i]);
        data += bytes[i];
    }
    return b;
}

static void tiny_model(pt_schnet *m, int atomref)
{
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = 4;
    c.filters = 3;
    c.interactions = 2;
    c.gaussians = 2;
    c.cutoff = 4.5f;
    c.use_atomref = atomref;
    assert_int_equal(pt_schnet_init(m, &c, NULL), 0);
    pt_schnet_init_weights(m, 1);
}

/* loads the spec; with msg == NULL expects success into *out */
static void load_spec(const fspec *s, pt_schnet *out, const char *field, const char *msg)
{
    size_t size;
    uint8_t *b = spec_image(s, &size);
    pt_safetensors st;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_safetensors_parse(&st, b, size, "model.safetensors", &errs), 0);
    int rc = pt_schnet_load_safetensors(out, &st, "model.safetensors", &errs);
    if (!msg) {
        if (rc) fail_msg("load failed: %s: %s", errs.items[0].field, errs.items[0].message);
    } else {
        assert_int_equal(rc, -1);
        assert_string_equal(errs.items[0].file, "model.safetensors");
        assert_string_equal(errs.items[0].field, field);
        assert_string_equal(errs.items[0].message, msg);
        assert_null(out->params_memory);
    }
    pt_safetensors_close(&st);
    pt_errors_close(&errs);
    free(b);
}

static void test_model_round_trip(void **state)
{
    (void)state;
    pt_schnet m, r;
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = 10;
    c.filters = 8;
    c.interactions = 3;
    c.gaussians = 5;
    c.cutoff = 5.5f;
    c.max_neighbors = 12;
    c.readout = PT_READOUT_MEAN;
    c.use_atomref = 1;
    assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
    double ref[PT_SCHNET_ZROWS];
    for (int z = 0; z < PT_SCHNET_ZROWS; z++) ref[z] = -0.1 * z;
    pt_schnet_set_atomref(&m, 0, ref);
    pt_schnet_init_weights(&m, 3);
    m.params.head[0].atomref[6] += 0.5f; /* trained away from its initial value */
    m.mean[0] = -1.0 / 3.0;
    m.std[0] = 0.123456789;
    char path[128];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_save(&m, path, &errs), 0);
    assert_int_equal(pt_schnet_load(&r, path, &errs), 0);
    assert_int_equal(errs.total, 0);
    assert_memory_equal(&r.cfg, &m.cfg, sizeof(m.cfg));
    assert_true(r.mean[0] == m.mean[0] && r.std[0] == m.std[0]);
    assert_int_equal(r.n_params, m.n_params);
    assert_memory_equal(r.params_memory, m.params_memory, m.n_params * sizeof(float));
    assert_memory_equal(r.initial_atomref, m.initial_atomref, sizeof(m.initial_atomref));
    assert_true(r.params.head[0].atomref[6] != r.initial_atomref[0][6]);

    /* the file holds exactly PyG's state_dict keys */
    pt_safetensors st;
    assert_int_equal(pt_safetensors_open(&st, path, &errs), 0);
    assert_int_equal(st.n_tensors, 1 + 13 * 3 + 4 + 3);
    static const char *const block[13] = {
        "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "conv.lin1.weight",
        "conv.lin2.weight", "conv.lin2.bias", "conv.nn.0.weight", "conv.nn.0.bias",
        "conv.nn.2.weight", "conv.nn.2.bias", "lin.weight", "lin.bias"};
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 13; k++) {
            char name[64];
            snprintf(name, sizeof(name), "interactions.%d.%s", t, block[k]);
            assert_non_null(pt_safetensors_find(&st, name));
        }
    static const char *const other[7] = {"embedding.weight", "lin1.weight", "lin1.bias",
                                         "lin2.weight", "lin2.bias", "atomref.weight",
                                         "initial_atomref"};
    for (int k = 0; k < 7; k++) assert_non_null(pt_safetensors_find(&st, other[k]));
    const pt_st_tensor *off = pt_safetensors_find(&st, "distance_expansion.offset");
    assert_int_equal(off->shape[0], 5);
    assert_int_equal(pt_safetensors_find(&st, "interactions.2.conv.nn.2.weight")->shape[1], 8);
    assert_int_equal(pt_safetensors_find(&st, "lin1.weight")->shape[0], 5);
    assert_int_equal(pt_safetensors_find(&st, "atomref.weight")->shape[1], 1);
    assert_string_equal(pt_safetensors_meta(&st, "hidden_channels"), "10");
    assert_string_equal(pt_safetensors_meta(&st, "readout"), "mean");
    assert_string_equal(pt_safetensors_meta(&st, "cutoff"), "5.5");
    assert_string_equal(pt_safetensors_meta(&st, "max_num_neighbors"), "12");
    pt_safetensors_close(&st);
    pt_errors_close(&errs);
    pt_schnet_close(&m);
    pt_schnet_close(&r);
}

static void test_model_as_pytorch_saves_it(void **state)
{
    (void)state;
    pt_schnet m, r;
    tiny_model(&m, 0);
    fspec s;
    spec_from_model(&s, &m);
    /* safetensors' save_model keeps one name of shared tensors: here CFConv's */
    for (int t = 0; t < 2; t++) {
        static const char *const part[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof(name), "interactions.%d.mlp.%s", t, part[k]);
            snprintf(spec_find(&s, name)->name, PT_SCHNET_NAME_MAX, "interactions.%d.conv.nn.%s", t,
                     part[k]);
        }
    }
    float offset[2] = {0.0f, 4.5f};
    s.t[s.n++] = (ftensor){.name = "distance_expansion.offset", .dtype = "F32", .ndim = 1,
                           .shape = {2}, .data = offset};
    load_spec(&s, &r, NULL, NULL);
    assert_int_equal(r.cfg.hidden, 4);
    assert_int_equal(r.cfg.filters, 3);
    assert_int_equal(r.cfg.gaussians, 2);
    assert_int_equal(r.cfg.interactions, 2);
    assert_true(r.cfg.cutoff == 4.5f);
    assert_int_equal(r.cfg.readout, PT_READOUT_SUM);
    assert_int_equal(r.cfg.max_neighbors, 32);
    assert_int_equal(r.cfg.use_atomref, 0);
    assert_true(r.mean[0] == 0.0 && r.std[0] == 1.0);
    assert_memory_equal(r.params_memory, m.params_memory, m.n_params * sizeof(float));
    pt_schnet_close(&r);
    pt_schnet_close(&m);
}

static void test_model_missing_tensor(void **state)
{
    (void)state;
    pt_schnet m, r;
    tiny_model(&m, 1);
    fspec s;
    spec_from_model(&s, &m);
    s.meta[s.n_meta++] = (pt_st_meta){"cutoff", "4.5"};
    spec_remove(&s, "interactions.1.lin.bias");
    load_spec(&s, &r, "interactions.1.lin.bias", "missing tensor");
    pt_schnet_close(&m);
}

/* Virtual memory of this process, bytes (VmSize of /proc/self/status). */
static unsigned long long vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

/* Found with tests/fuzz/fuzz_safetensors.c (input in tests/fuzz/regressions/
 * safetensors): 142 bytes whose metadata promises H = F = 4096, T = 16 and
 * that hold no tensor had the loader allocate the 4.6 GB model before it
 * looked for the tensors.  In a child limited to its address space plus
 * 256 MB, the file is refused for its missing tensors, not for memory. */
static void test_model_metadata_promises_more_than_the_file_holds(void **state)
{
    (void)state;
    const char *header = "{\"__metadata__\":{\"hidden_channels\":\"4096\",\"num_filters\":\"4096\","
                         "\"num_interactions\":\"16\",\"num_gaussians\":\"1024\",\"cutoff\":\"5\"}}";
    size_t size;
    uint8_t *b = image(header, 0, &size);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {vm_size() + (256ull << 20), vm_size() + (256ull << 20)};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
        pt_safetensors st;
        pt_errors errs;
        pt_errors_init(&errs, 0);
        if (pt_safetensors_parse(&st, b, size, "big.safetensors", &errs) != 0) _exit(4);
        pt_schnet m;
        int rc = pt_schnet_load_safetensors(&m, &st, "big.safetensors", &errs);
        if (errs.kept) fprintf(stderr, "    %s: %s\n", errs.items[0].field, errs.items[0].message);
        int ok = rc == -1 && errs.kept >= 1 && !strcmp(errs.items[0].field, "embedding.weight") &&
                 !strcmp(errs.items[0].message, "missing tensor") && m.params_memory == NULL;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(b);
}

static void test_model_wrong_shape(void **state)
{
    (void)state;
    pt_schnet m, r;
    tiny_model(&m, 0);
    fspec s;
    spec_from_model(&s, &m);
    s.meta[s.n_meta++] = (pt_st_meta){"cutoff", "4.5"};
    ftensor *t = spec_find(&s, "lin1.weight");
    t->shape[0] = 3;
    t->data = NULL;
    load_spec(&s, &r, "lin1.weight", "shape [3,4] but the model needs [2,4]");
    pt_schnet_close(&m);
}

static void test_model_wrong_dtype(void **state)
{
    (void)state;
    pt_schnet m, r;
    tiny_model(&m, 0);
    fspec s;
    spec_from_model(&s, &m);
    s.meta[s.n_meta++] = (pt_st_meta){"cutoff", "4.5"};
    ftensor *t = spec_find(&s, "interactions.0.conv.lin2.weight");
    snprintf(t->dtype, sizeof(t->dtype), "F64");
    t->data = NULL;
    load_spec(&s, &r, "interactions.0.conv.lin2.weight", "dtype F64, expected F32");
    pt_schnet_close(&m);
}

static void test_model_other_errors(void **state)
{
    (void)state;
    pt_schnet m, r;
    tiny_model(&m, 0);
    fspec s;
    spec_from_model(&s, &m);
    load_spec(&s, &r, "cutoff", "not in __metadata__ and no distance_expansion.offset to infer it from");

    s.meta[s.n_meta++] = (pt_st_meta){"cutoff", "4.5"};
    s.t[s.n++] = (ftensor){.name = "atomic_mass", .dtype = "F32", .ndim = 1, .shape = {100}};
    load_spec(&s, &r, "atomic_mass", "unexpected tensor: not part of this SchNet");
    s.n--;

    /* both names of the shared filter network, with different values */
    const float bias[3] = {0.0f, 0.25f, 0.0f}; /* the model's biases are all 0 */
    s.t[s.n++] = (ftensor){.name = "interactions.0.conv.nn.2.bias", .dtype = "F32", .ndim = 1,
                           .shape = {3}, .data = bias};
    load_spec(&s, &r, "interactions.0.conv.nn.2.bias",
              "differs from interactions.0.mlp.2.bias; PyG shares one filter network under both names");
    s.n--;

    float offset[2] = {0.0f, 6.0f};
    s.t[s.n++] = (ftensor){.name = "distance_expansion.offset", .dtype = "F32", .ndim = 1,
                           .shape = {2}, .data = offset};
    load_spec(&s, &r, "distance_expansion.offset", "ends at 6 but the cutoff is 4.5");
    s.n--;

    s.meta[s.n_meta++] = (pt_st_meta){"num_interactions", "two"};
    load_spec(&s, &r, "num_interactions", "metadata value \"two\" is not an integer");
    s.meta[s.n_meta - 1] = (pt_st_meta){"num_interactions", "20"};
    load_spec(&s, &r, "interactions", "must be in 1..16, got 20");
    s.meta[s.n_meta - 1] = (pt_st_meta){"readout", "max"};
    load_spec(&s, &r, "readout", "metadata value \"max\" is not add, sum or mean");
    s.meta[s.n_meta - 1] = (pt_st_meta){"std", "inf"};
    load_spec(&s, &r, "std", "metadata value \"inf\" is not a finite number");
    s.meta[s.n_meta - 1] = (pt_st_meta){"atomref", "true"};
    load_spec(&s, &r, "atomref.weight", "missing tensor");

    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_load(&r, "/nonexistent/model.safetensors", &errs), -1);
    assert_string_equal(errs.items[0].message, "cannot open: No such file or directory");
    pt_errors_close(&errs);
    pt_schnet_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generic_round_trip),
        cmocka_unit_test(test_reader_accepts_other_dtypes_and_padding),
        cmocka_unit_test(test_truncated_files),
        cmocka_unit_test(test_bad_header_json),
        cmocka_unit_test(test_header_length_limit),
        cmocka_unit_test(test_bad_tensor_entries),
        cmocka_unit_test(test_overlapping_offsets),
        cmocka_unit_test(test_out_of_range_offsets),
        cmocka_unit_test(test_open_and_write_errors),
        cmocka_unit_test(test_model_round_trip),
        cmocka_unit_test(test_model_as_pytorch_saves_it),
        cmocka_unit_test(test_model_missing_tensor),
        cmocka_unit_test(test_model_metadata_promises_more_than_the_file_holds),
        cmocka_unit_test(test_model_wrong_shape),
        cmocka_unit_test(test_model_wrong_dtype),
        cmocka_unit_test(test_model_other_errors),
    };
    return cmocka_run_group_tests_name("safetensors", tests, setup, teardown);
}
