/* ase_db_codec.c — decoding ASE's database encodings; see ase_db_codec.h.
 *
 * Nothing here touches SQLite: the functions take the bytes of one column,
 * so every branch can be unit-tested on hand-made bytes.  Array bytes are
 * read in place (little-endian, as ASE always writes them) and checked
 * against the blob's extent before any element is touched. */
#include "engine/data/ase_db_codec.h"

#include <endian.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* numpy's largest sane array here: 2^40 elements (larger is damage) */
#define MAX_ELEMENTS (1ull << 40)

static const struct {
    const char *name;
    pt_ase_dtype dtype;
    size_t size;
} dtypes[] = {
    {"float64", PT_ASE_DT_F64, 8}, {"float32", PT_ASE_DT_F32, 4}, {"float16", PT_ASE_DT_F16, 2},
    {"int64", PT_ASE_DT_I64, 8},   {"int32", PT_ASE_DT_I32, 4},   {"int16", PT_ASE_DT_I16, 2},
    {"int8", PT_ASE_DT_I8, 1},     {"uint64", PT_ASE_DT_U64, 8},  {"uint32", PT_ASE_DT_U32, 4},
    {"uint16", PT_ASE_DT_U16, 2},  {"uint8", PT_ASE_DT_U8, 1},
    /* not read as numbers, but their size bounds the blob all the same */
    {"bool", PT_ASE_DT_NONE, 1},   {"complex64", PT_ASE_DT_NONE, 8}, {"complex128", PT_ASE_DT_NONE, 16},
    {"float128", PT_ASE_DT_NONE, 16}, {"complex256", PT_ASE_DT_NONE, 32},
};

pt_ase_dtype pt_ase_dtype_parse(const char *name, size_t *itemsize)
{
    *itemsize = 0;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(name, dtypes[i].name)) {
            *itemsize = dtypes[i].size;
            return dtypes[i].dtype;
        }
    /* numpy names fixed-width strings by their size in bits: "str160", "bytes40" */
    const char *digits = !strncmp(name, "str", 3) ? name + 3 : !strncmp(name, "bytes", 5) ? name + 5 : NULL;
    if (digits && *digits) {
        char *end;
        unsigned long bits = strtoul(digits, &end, 10);
        if (!*end && bits % 8 == 0) *itemsize = bits / 8;
    }
    return PT_ASE_DT_NONE;
}

static size_t dtype_size(pt_ase_dtype t)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == t) return dtypes[i].size;
    return t == PT_ASE_DT_HOST ? sizeof(double) : 0;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

static uint32_t le32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}

static uint16_t le16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}

/* IEEE half to double: every half is exact in a double. */
static double half_to_double(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0) v = ldexp((double)mant, -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexp((double)(mant | 0x400), exp - 25);
    return sign ? -v : v;
}

double pt_ase_array_get(const pt_ase_array *a, uint64_t i)
{
    const unsigned char *p = a->raw;
    switch (a->dtype) {
    case PT_ASE_DT_HOST: return a->host[i];
    case PT_ASE_DT_F64: {
        uint64_t u = le64(p + 8 * i);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    case PT_ASE_DT_F32: {
        uint32_t u = le32(p + 4 * i);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case PT_ASE_DT_F16: return half_to_double(le16(p + 2 * i));
    case PT_ASE_DT_I64: return (double)(int64_t)le64(p + 8 * i);
    case PT_ASE_DT_I32: return (double)(int32_t)le32(p + 4 * i);
    case PT_ASE_DT_I16: return (double)(int16_t)le16(p + 2 * i);
    case PT_ASE_DT_I8: return (double)(int8_t)p[i];
    case PT_ASE_DT_U64: return (double)le64(p + 8 * i);
    case PT_ASE_DT_U32: return (double)le32(p + 4 * i);
    case PT_ASE_DT_U16: return (double)le16(p + 2 * i);
    case PT_ASE_DT_U8: return (double)p[i];
    default: return NAN;
    }
}

void pt_ase_shape_format(const pt_ase_array *a, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < a->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%llu", d ? ", " : "", (unsigned long long)a->shape[d]);
    if (n < len) snprintf(buf + n, len - n, a->ndim == 1 ? ",)" : ")");
}

int pt_ase_blob_array(const void *blob, size_t len, pt_ase_dtype dtype, int ndim,
                      const uint64_t *shape, pt_ase_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    size_t size = dtype_size(dtype);
    if (!size || dtype == PT_ASE_DT_HOST || ndim < 0 || ndim > PT_ASE_MAX_DIMS) {
        snprintf(err, errlen, "internal: bad blob view");
        return -1;
    }
    uint64_t known = 1;
    int free_dim = -1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0 && free_dim < 0) free_dim = d;
        else known *= shape[d];
    }
    uint64_t count = len / size;
    if (len % size != 0 || (known && count % known != 0) || (free_dim < 0 && count != known)) {
        snprintf(err, errlen, "blob of %zu bytes does not hold %s%llu values of %zu bytes", len,
                 free_dim >= 0 ? "a multiple of " : "", (unsigned long long)known, size);
        return -1;
    }
    out->ndim = ndim;
    for (int d = 0; d < ndim; d++) out->shape[d] = d == free_dim ? (known ? count / known : 0) : shape[d];
    out->count = count;
    out->dtype = dtype;
    out->raw = blob;
    return 0;
}

/* ---- JSON as Python writes it -------------------------------------------- */

/* Non-finite numbers become strings "\0NaN", "\0+Inf", "\0-Inf": a NUL
 * cannot start a string Python's json writes for str values... unless the
 * string itself starts with NUL, which ASE keys and values never do. */
static int nonfinite_marker(const json_t *v, double *out)
{
    if (!json_is_string(v)) return 0;
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n < 4 || s[0] != '\0') return 0;
    if (n == 4 && !memcmp(s + 1, "NaN", 3)) *out = NAN;
    else if (n == 5 && !memcmp(s + 1, "+Inf", 4)) *out = INFINITY;
    else if (n == 5 && !memcmp(s + 1, "-Inf", 4)) *out = -INFINITY;
    else return 0;
    return 1;
}

/* Rewrites NaN / Infinity / -Infinity outside strings as marker strings.
 * Returns the new text (malloc'ed, *out_len set) or NULL when there was
 * nothing to rewrite or no memory. */
static char *mark_nonfinite(const char *text, size_t len, size_t *out_len)
{
    static const struct {
        const char *word;
        const char *marker;
    } words[] = {{"-Infinity", "\"\\u0000-Inf\""}, {"Infinity", "\"\\u0000+Inf\""}, {"NaN", "\"\\u0000NaN\""}};
    size_t cap = len + 64, n = 0, replaced = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    int in_string = 0;
    for (size_t i = 0; i < len;) {
        const char *marker = NULL;
        size_t wlen = 0;
        if (!in_string)
            for (size_t w = 0; w < 3 && !marker; w++) {
                size_t l = strlen(words[w].word);
                if (i + l <= len && !memcmp(text + i, words[w].word, l)) marker = words[w].marker, wlen = l;
            }
        size_t add = marker ? strlen(marker) : 1;
        if (n + add + 1 > cap) {
            cap = 2 * cap + add;
            char *bigger = realloc(out, cap);
            if (!bigger) {
                free(out);
                return NULL;
            }
            out = bigger;
        }
        if (marker) {
            memcpy(out + n, marker, add);
            n += add;
            i += wlen;
            replaced++;
            continue;
        }
        char c = text[i++];
        out[n++] = c;
        if (in_string && c == '\\' && i < len) out[n++] = text[i++];
        else if (c == '"') in_string = !in_string;
    }
    if (!replaced) {
        free(out);
        return NULL;
    }
    *out_len = n;
    return out;
}

json_t *pt_ase_json_loads(const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY, &je);
    if (v) return v;
    size_t n;
    char *marked = mark_nonfinite(text, len, &n);
    if (marked) {
        json_error_t je2;
        v = json_loadb(marked, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je2);
        free(marked);
        if (v) return v;
    }
    snprintf(err, errlen, "not valid JSON: %s (at character %d)", je.text, je.position);
    return NULL;
}

/* ---- values -------------------------------------------------------------- */

static int grow_scratch(double **scratch, size_t *cap, uint64_t n)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < n) c *= 2;
    double *p = realloc(*scratch, c * sizeof(double));
    if (!p) return -1;
    *scratch = p;
    *cap = c;
    return 0;
}

static void set_what(pt_ase_value *out, pt_ase_kind kind, const char *fmt, const char *arg)
{
    out->kind = kind;
    snprintf(out->what, sizeof out->what, fmt, arg);
}

/* A JSON number or a non-finite marker: 1 and *x, else 0. */
static int json_as_number(const json_t *v, double *x)
{
    if (json_is_integer(v) || json_is_real(v)) {
        *x = json_number_value(v);
        return 1;
    }
    return nonfinite_marker(v, x);
}

/* {"__ndarray__": [shape, dtype, offset | flat list]} */
static void classify_ndarray(const json_t *nd, const unsigned char *blob, size_t blob_end,
                             double **scratch, size_t *scratch_cap, pt_ase_value *out)
{
    const json_t *shape = json_array_get(nd, 0), *dt = json_array_get(nd, 1), *payload = json_array_get(nd, 2);
    if (!json_is_array(nd) || json_array_size(nd) != 3 || !json_is_array(shape) || !json_is_string(dt) ||
        json_array_size(shape) > PT_ASE_MAX_DIMS) {
        set_what(out, PT_ASE_BAD, "a damaged __ndarray__ (expected [shape, dtype, data])%s", "");
        return;
    }
    pt_ase_array *a = &out->array;
    a->ndim = (int)json_array_size(shape);
    a->count = 1;
    for (int d = 0; d < a->ndim; d++) {
        const json_t *e = json_array_get(shape, (size_t)d);
        json_int_t n = json_is_integer(e) ? json_integer_value(e) : -1;
        if (n < 0 || (uint64_t)n > MAX_ELEMENTS || (n && a->count > MAX_ELEMENTS / (uint64_t)n)) {
            set_what(out, PT_ASE_BAD, "an __ndarray__ with a damaged shape%s", "");
            return;
        }
        a->shape[d] = (uint64_t)n;
        a->count *= (uint64_t)n;
    }
    size_t size;
    const char *dname = json_string_value(dt);
    a->dtype = pt_ase_dtype_parse(dname, &size);
    char shp[64];
    pt_ase_shape_format(a, shp, sizeof shp);
    if (json_is_integer(payload)) {
        json_int_t off = json_integer_value(payload);
        if (!blob) {
            set_what(out, PT_ASE_BAD, "an array refers to binary data, but this data column is JSON text%s", "");
            return;
        }
        if (!size) {   /* an unknown dtype: its extent cannot even be checked */
            snprintf(out->what, sizeof out->what, "an array of dtype '%.24s' %.40s, not of real numbers", dname, shp);
            out->kind = PT_ASE_OTHER;
            return;
        }
        if (off < 8 || (uint64_t)off > blob_end || a->count > (blob_end - (uint64_t)off) / size) {
            snprintf(out->what, sizeof out->what, "array %.40s of %.12s at byte %lld runs past its blob (%zu bytes)",
                     shp, dname, (long long)off, blob_end);
            out->kind = PT_ASE_BAD;
            return;
        }
        a->raw = blob + off;
    } else if (json_is_array(payload)) {
        if (a->dtype == PT_ASE_DT_NONE) {
            snprintf(out->what, sizeof out->what, "an array of %.24s %.40s, not of real numbers", dname, shp);
            out->kind = PT_ASE_OTHER;
            return;
        }
        if (json_array_size(payload) != a->count || grow_scratch(scratch, scratch_cap, a->count) < 0) {
            snprintf(out->what, sizeof out->what, "array %.40s has %zu flat values", shp, json_array_size(payload));
            out->kind = PT_ASE_BAD;
            return;
        }
        for (uint64_t i = 0; i < a->count; i++)
            if (!json_as_number(json_array_get(payload, i), &(*scratch)[i])) {
                snprintf(out->what, sizeof out->what, "array %.40s of %.12s holds a value that is not a number", shp,
                         dname);
                out->kind = PT_ASE_BAD;
                return;
            }
        a->dtype = PT_ASE_DT_HOST;
        a->host = *scratch;
    } else {
        set_what(out, PT_ASE_BAD, "a damaged __ndarray__ (its data is neither an offset nor a list)%s", "");
        return;
    }
    if (a->dtype == PT_ASE_DT_NONE) {
        snprintf(out->what, sizeof out->what, "an array of %.24s %.40s, not of real numbers", dname, shp);
        out->kind = PT_ASE_OTHER;
        return;
    }
    out->kind = PT_ASE_ARRAY;
}

/* Shape of a rectangular nested list of numbers (numpyfy's arrays);
 * 0 when it is not one. */
static int list_shape(const json_t *v, pt_ase_array *a, int depth)
{
    if (!json_is_array(v)) return depth > 0;
    if (depth >= PT_ASE_MAX_DIMS) return 0;
    size_t n = json_array_size(v);
    if (depth == a->ndim) {
        a->shape[a->ndim++] = n;
        if (n == 0) return 1;
        return list_shape(json_array_get(v, 0), a, depth + 1);
    }
    return a->shape[depth] == n;
}

/* Copies the numbers of a rectangular list to dst in C order (dst NULL:
 * only checks the list and counts its numbers in *k); 0 when it is not. */
static int list_flatten(const json_t *v, const pt_ase_array *a, int depth, double *dst, uint64_t *k)
{
    if (depth == a->ndim) {
        double x;
        if (!json_as_number(v, &x)) return 0;
        if (dst) dst[*k] = x;
        (*k)++;
        return 1;
    }
    if (!json_is_array(v) || json_array_size(v) != a->shape[depth]) return 0;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!list_flatten(json_array_get(v, i), a, depth + 1, dst, k)) return 0;
    return 1;
}

static void classify_list(const json_t *v, double **scratch, size_t *scratch_cap, pt_ase_value *out)
{
    pt_ase_array *a = &out->array;
    a->ndim = 0;
    a->count = 1;
    if (list_shape(v, a, 0)) {
        /* The shape comes from the first element at each depth, so a short
         * list can claim any product.  fuzz_ase_codec found two ways that
         * went wrong: 8 levels of 256 (4 KB of JSON) made the product wrap
         * to 0 in 64 bits, and the copy then wrote past a 1-element buffer
         * (heap overflow); and 8 levels of 12 (193 bytes) asked for 3.4 GB.
         * So the product is checked for overflow, and the list is checked
         * and its numbers counted before anything is allocated. */
        int too_big = 0;
        for (int d = 0; d < a->ndim; d++) {
            if (a->shape[d] && a->count > MAX_ELEMENTS / a->shape[d]) too_big = 1;
            a->count = too_big ? 0 : a->count * a->shape[d];
        }
        uint64_t k = 0, n = 0;
        if (!too_big && list_flatten(v, a, 0, NULL, &n) && n == a->count &&
            grow_scratch(scratch, scratch_cap, a->count ? a->count : 1) == 0 &&
            list_flatten(v, a, 0, *scratch, &k) && k == a->count) {
            a->dtype = PT_ASE_DT_HOST;
            a->host = *scratch;
            out->kind = PT_ASE_ARRAY;
            return;
        }
    }
    memset(a, 0, sizeof(*a));
    set_what(out, PT_ASE_OTHER, "a list that is not a rectangular array of numbers%s", "");
}

void pt_ase_value_classify(const json_t *v, const unsigned char *blob, size_t blob_end,
                           double **scratch, size_t *scratch_cap, pt_ase_value *out)
{
    memset(out, 0, sizeof(*out));
    double x;
    if (json_is_integer(v) || json_is_real(v)) {
        out->kind = PT_ASE_NUMBER;
        out->number = json_number_value(v);
    } else if (nonfinite_marker(v, &x)) {
        out->kind = PT_ASE_NONFINITE;
        out->number = x;
    } else if (json_is_boolean(v)) {
        set_what(out, PT_ASE_TEXT, "a boolean%s", "");
    } else if (json_is_string(v)) {
        set_what(out, PT_ASE_TEXT, "a string%s", "");
    } else if (!v || json_is_null(v)) {
        set_what(out, PT_ASE_TEXT, "null%s", "");
    } else if (json_is_array(v)) {
        classify_list(v, scratch, scratch_cap, out);
    } else {
        const json_t *nd = json_object_get(v, "__ndarray__");
        const json_t *obj = json_object_get(v, "__ase_objtype__");
        if (nd) classify_ndarray(nd, blob, blob_end, scratch, scratch_cap, out);
        else if (json_object_get(v, "__complex__")) set_what(out, PT_ASE_OTHER, "a complex number%s", "");
        else if (json_object_get(v, "__datetime__")) set_what(out, PT_ASE_TEXT, "a date%s", "");
        else if (json_is_string(obj)) set_what(out, PT_ASE_OTHER, "an ASE object (%.40s)", json_string_value(obj));
        else set_what(out, PT_ASE_OTHER, "a dictionary%s", "");
    }
}

/* ---- the data column ----------------------------------------------------- */

static int set_root(pt_ase_data *d, json_t *root, char *err, size_t errlen)
{
    if (json_is_null(root)) {
        json_decref(root);
        return 0;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "data is %s, not a dictionary",
                 json_is_array(root) ? "a list" : json_is_string(root) ? "a string" : "a number or boolean");
        json_decref(root);
        return -1;
    }
    if (json_object_size(root) == 0) {
        json_decref(root);
        return 0;
    }
    d->root = root;
    return 0;
}

int pt_ase_data_decode_blob(pt_ase_data *d, const void *blob, size_t len, char *err, size_t errlen)
{
    memset(d, 0, sizeof(*d));
    const unsigned char *b = blob;
    if (len < 8) {
        snprintf(err, errlen, "binary data of %zu bytes is shorter than its 8-byte header", len);
        return -1;
    }
    uint64_t off = le64(b);
    if (off < 8 || off >= len) {
        snprintf(err, errlen, "binary data of %zu bytes says its JSON starts at byte %llu", len,
                 (unsigned long long)off);
        return -1;
    }
    char jerr[160];
    json_t *root = pt_ase_json_loads((const char *)b + off, len - off, jerr, sizeof jerr);
    if (!root) {
        snprintf(err, errlen, "binary data: its JSON part is %s", jerr);
        return -1;
    }
    d->blob = b;
    d->json_offset = (size_t)off;
    return set_root(d, root, err, errlen);
}

int pt_ase_data_decode_text(pt_ase_data *d, const char *text, size_t len, char *err, size_t errlen)
{
    memset(d, 0, sizeof(*d));
    char jerr[160];
    json_t *root = pt_ase_json_loads(text, len, jerr, sizeof jerr);
    if (!root) {
        snprintf(err, errlen, "data text is %s", jerr);
        return -1;
    }
    return set_root(d, root, err, errlen);
}

void pt_ase_data_close(pt_ase_data *d)
{
    json_decref(d->root);
    free(d->scratch);
    memset(d, 0, sizeof(*d));
}

static int is_plain_dict(const json_t *v)
{
    return json_is_object(v) && !json_object_get(v, "__ndarray__") && !json_object_get(v, "__complex__") &&
           !json_object_get(v, "__datetime__") && !json_object_get(v, "__ase_objtype__");
}

static int walk(pt_ase_data *d, const json_t *obj, char *path, size_t plen, pt_ase_leaf_fn fn, void *ctx)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        size_t klen = strlen(key);
        pt_ase_value val;
        int rc;
        if (plen + 1 + klen >= PT_ASE_PATH_MAX) {
            memset(&val, 0, sizeof val);
            val.kind = PT_ASE_BAD;
            snprintf(val.what, sizeof val.what, "key '%.40s...' makes a path longer than %d characters", key,
                     PT_ASE_PATH_MAX - 1);
            path[plen] = '\0';
            rc = fn(ctx, path, &val);
        } else {
            path[plen] = '.';
            memcpy(path + plen + 1, key, klen + 1);
            if (is_plain_dict(v)) {
                rc = walk(d, v, path, plen + 1 + klen, fn, ctx);
            } else {
                pt_ase_value_classify(v, d->blob, d->json_offset, &d->scratch, &d->scratch_cap, &val);
                rc = fn(ctx, path, &val);
            }
        }
        path[plen] = '\0';
        if (rc) return rc;
    }
    return 0;
}

int pt_ase_data_walk(pt_ase_data *d, pt_ase_leaf_fn fn, void *ctx)
{
    if (!d->root) return 0;
    char path[PT_ASE_PATH_MAX] = "data";
    return walk(d, d->root, path, 4, fn, ctx);
}
