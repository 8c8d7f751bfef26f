/* safetensors.c — safetensors reader and writer (see safetensors.h); the
 * header JSON is parsed and produced by jansson. */
#include "engine/core/safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c copies tensor bytes as they are: it needs a little-endian host"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
    {"I8", 1}, {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1},
    {"F8_E4M3", 1}, {"F8_E5M2", 1},
};

size_t pt_safetensors_dtype_size(const char *dtype)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (!strcmp(dtypes[i].name, dtype)) return dtypes[i].size;
    return 0;
}

void pt_safetensors_close(pt_safetensors *st)
{
    for (size_t i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    for (size_t i = 0; i < st->n_meta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->tensors);
    free(st->meta);
    free(st->file);
    memset(st, 0, sizeof(*st));
}

const pt_st_tensor *pt_safetensors_find(const pt_safetensors *st, const char *name)
{
    for (size_t i = 0; i < st->n_tensors; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

const char *pt_safetensors_meta(const pt_safetensors *st, const char *key)
{
    for (size_t i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta[i].key, key)) return st->meta[i].value;
    return NULL;
}

static int read_metadata(pt_safetensors *st, json_t *md, const char *label, pt_errors *errs)
{
    if (!json_is_object(md)) {
        pt_errors_add(errs, label, 0, "__metadata__", "must be an object of strings");
        return -1;
    }
    st->meta = calloc(json_object_size(md) + 1, sizeof(*st->meta));
    if (!st->meta) return -1;
    const char *key;
    json_t *v;
    int bad = 0;
    json_object_foreach(md, key, v) {
        if (!json_is_string(v)) {
            pt_errors_add(errs, label, 0, "__metadata__", "value of \"%s\" is not a string", key);
            bad = 1;
            continue;
        }
        pt_st_meta *m = &st->meta[st->n_meta++];
        m->key = strdup(key);
        m->value = strdup(json_string_value(v));
        if (!m->key || !m->value) return -1;
    }
    return bad ? -1 : 0;
}

/* One header entry; checks what can be checked without the other tensors. */
static int read_tensor(pt_st_tensor *t, const char *name, json_t *v, uint64_t data_size,
                       const char *label, pt_errors *errs)
{
    if (!json_is_object(v)) {
        pt_errors_add(errs, label, 0, name, "header entry is not an object");
        return -1;
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape");
    json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) {
        pt_errors_add(errs, label, 0, name, "missing \"dtype\" string");
        return -1;
    }
    size_t esize = pt_safetensors_dtype_size(json_string_value(dt));
    if (!esize) {
        pt_errors_add(errs, label, 0, name, "unknown dtype \"%s\"", json_string_value(dt));
        return -1;
    }
    snprintf(t->dtype, sizeof(t->dtype), "%s", json_string_value(dt));
    if (!json_is_array(sh)) {
        pt_errors_add(errs, label, 0, name, "missing \"shape\" array");
        return -1;
    }
    if (json_array_size(sh) > PT_ST_MAX_DIMS) {
        pt_errors_add(errs, label, 0, name, "has %zu dimensions, at most %d are supported",
                      json_array_size(sh), PT_ST_MAX_DIMS);
        return -1;
    }
    t->ndim = (int)json_array_size(sh);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0) {
            pt_errors_add(errs, label, 0, name, "\"shape\" must hold non-negative integers");
            return -1;
        }
        t->shape[d] = json_integer_value(x);
        if (__builtin_mul_overflow(t->numel, (uint64_t)t->shape[d], &t->numel)) {
            pt_errors_add(errs, label, 0, name, "\"shape\" has more elements than fit in 64 bits");
            return -1;
        }
    }
    json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(b) ||
        !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b)) {
        pt_errors_add(errs, label, 0, name,
                      "\"data_offsets\" must be [begin, end] with 0 <= begin <= end");
        return -1;
    }
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    uint64_t need;
    if (__builtin_mul_overflow(t->numel, (uint64_t)esize, &need) || need != t->end - t->begin) {
        pt_errors_add(errs, label, 0, name,
                      "data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64
                      " bytes but %" PRIu64 " %s elements need %" PRIu64,
                      t->begin, t->end, t->end - t->begin, t->numel, t->dtype,
                      t->numel * (uint64_t)esize);
        return -1;
    }
    if (t->end > data_size) {
        pt_errors_add(errs, label, 0, name,
                      "data_offsets end %" PRIu64 " is beyond the %" PRIu64
                      "-byte data section (truncated file?)", t->end, data_size);
        return -1;
    }
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const pt_st_tensor *x = *(pt_st_tensor *const *)a, *y = *(pt_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int check_overlaps(pt_safetensors *st, const char *label, pt_errors *errs)
{
    if (st->n_tensors < 2) return 0;
    pt_st_tensor **order = malloc(st->n_tensors * sizeof(*order));
    if (!order) return -1;
    for (size_t i = 0; i < st->n_tensors; i++) order[i] = &st->tensors[i];
    qsort(order, st->n_tensors, sizeof(*order), cmp_begin);
    int bad = 0;
    const pt_st_tensor *prev = NULL;
    for (size_t i = 0; i < st->n_tensors; i++) {
        const pt_st_tensor *t = order[i];
        if (t->begin == t->end) continue; /* empty tensors occupy nothing */
        if (prev && t->begin < prev->end) {
            pt_errors_add(errs, label, 0, t->name,
                          "bytes [%" PRIu64 ", %" PRIu64 ") overlap tensor \"%s\"", t->begin,
                          t->end, prev->name);
            bad = 1;
        }
        if (!prev || t->end > prev->end) prev = t;
    }
    free(order);
    return bad ? -1 : 0;
}

static int parse_owned(pt_safetensors *st, const char *label, pt_errors *errs)
{
    if (st->file_size < 8) {
        pt_errors_add(errs, label, 0, "header",
                      "truncated: %zu bytes, shorter than the 8-byte header length", st->file_size);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | st->file[i];
    if (hlen > PT_ST_MAX_HEADER) {
        pt_errors_add(errs, label, 0, "header",
                      "header length %" PRIu64 " exceeds the format's 100 MB limit", hlen);
        return -1;
    }
    if (hlen > st->file_size - 8) {
        pt_errors_add(errs, label, 0, "header",
                      "truncated: the header needs %" PRIu64 " bytes but only %zu follow", hlen,
                      st->file_size - 8);
        return -1;
    }
    st->data = st->file + 8 + hlen;
    st->data_size = st->file_size - 8 - hlen;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)st->file + 8, (size_t)hlen, JSON_REJECT_DUPLICATES,
                              &jerr);
    if (!root) {
        pt_errors_add(errs, label, 0, "header", "bad header JSON at line %d column %d: %s",
                      jerr.line, jerr.column, jerr.text);
        return -1;
    }
    int bad = 0;
    if (!json_is_object(root)) {
        pt_errors_add(errs, label, 0, "header", "header is not a JSON object");
        json_decref(root);
        return -1;
    }
    st->tensors = calloc(json_object_size(root) + 1, sizeof(*st->tensors));
    if (!st->tensors) {
        pt_errors_add(errs, label, 0, "header", "out of memory");
        json_decref(root);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            bad |= read_metadata(st, v, label, errs) != 0;
            continue;
        }
        pt_st_tensor *t = &st->tensors[st->n_tensors];
        if (read_tensor(t, key, v, st->data_size, label, errs)) {
            bad = 1;
            continue;
        }
        t->name = strdup(key);
        if (!t->name) {
            bad = 1;
            continue;
        }
        t->data = st->data + t->begin;
        st->n_tensors++;
    }
    json_decref(root);
    if (!bad) bad = check_overlaps(st, label, errs) != 0;
    return bad ? -1 : 0;
}

int pt_safetensors_parse(pt_safetensors *st, const void *buf, size_t size, const char *label,
                         pt_errors *errs)
{
    memset(st, 0, sizeof(*st));
    st->file = malloc(size ? size : 1);
    if (!st->file) {
        pt_errors_add(errs, label, 0, "", "out of memory for %zu bytes", size);
        return -1;
    }
    memcpy(st->file, buf, size);
    st->file_size = size;
    if (parse_owned(st, label, errs)) {
        pt_safetensors_close(st);
        return -1;
    }
    return 0;
}

int pt_safetensors_open(pt_safetensors *st, const char *path, pt_errors *errs)
{
    memset(st, 0, sizeof(*st));
    FILE *f = fopen(path, "rb");
    if (!f) {
        pt_errors_add(errs, path, 0, "", "cannot open: %s", strerror(errno));
        return -1;
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        pt_errors_add(errs, path, 0, "", "cannot determine the file size: %s", strerror(errno));
        fclose(f);
        return -1;
    }
    st->file = malloc(size ? (size_t)size : 1);
    st->file_size = (size_t)size;
    if (!st->file || fread(st->file, 1, st->file_size, f) != st->file_size) {
        pt_errors_add(errs, path, 0, "", "cannot read %ld bytes", size);
        fclose(f);
        pt_safetensors_close(st);
        return -1;
    }
    fclose(f);
    if (parse_owned(st, path, errs)) {
        pt_safetensors_close(st);
        return -1;
    }
    return 0;
}

/* ---- writer --------------------------------------------------------------- */

static json_t *header_json(const pt_st_entry *t, size_t n, const pt_st_meta *meta,
                           size_t n_meta, uint64_t *data_size)
{
    json_t *root = json_object();
    if (n_meta) {
        json_t *md = json_object();
        for (size_t i = 0; i < n_meta; i++)
            json_object_set_new(md, meta[i].key, json_string(meta[i].value));
        json_object_set_new(root, "__metadata__", md);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t numel = 1;
        json_t *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) {
            json_array_append_new(shape, json_integer(t[i].shape[d]));
            numel *= (uint64_t)t[i].shape[d];
        }
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string("F32"));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)off, (json_int_t)(off + 4 * numel)));
        json_object_set_new(root, t[i].name, e);
        off += 4 * numel;
    }
    *data_size = off;
    return root;
}

int pt_safetensors_write(const char *path, const pt_st_entry *t, size_t n,
                         const pt_st_meta *meta, size_t n_meta, pt_errors *errs)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].ndim < 0 || t[i].ndim > PT_ST_MAX_DIMS) {
            pt_errors_add(errs, path, 0, t[i].name, "has %d dimensions, at most %d are supported",
                          t[i].ndim, PT_ST_MAX_DIMS);
            return -1;
        }
    uint64_t data_size;
    json_t *root = header_json(t, n, meta, n_meta, &data_size);
    if (json_object_size(root) != n + (n_meta ? 1 : 0)) {
        pt_errors_add(errs, path, 0, "header", "tensor names must be unique and not __metadata__");
        json_decref(root);
        return -1;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) {
        pt_errors_add(errs, path, 0, "header", "cannot encode the header");
        return -1;
    }
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    uint8_t lenbytes[8];
    for (int i = 0; i < 8; i++) lenbytes[i] = (uint8_t)((uint64_t)padded >> (8 * i));

    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        pt_errors_add(errs, path, 0, "", "path too long");
        free(text);
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        pt_errors_add(errs, tmp, 0, "", "cannot create: %s", strerror(errno));
        free(text);
        return -1;
    }
    int ok = fwrite(lenbytes, 1, 8, f) == 8 && fwrite(text, 1, len, f) == len;
    for (size_t i = len; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
    for (size_t i = 0; ok && i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        ok = fwrite(t[i].data, sizeof(float), numel, f) == numel;
    }
    free(text);
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        pt_errors_add(errs, path, 0, "", "cannot write: %s", strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}
