/* config_read.c — the typed readers of the job configuration's validator
 * (config.c): one reader per JSON type (integer with an optional word or null,
 * number in a range, enum, boolean, object), each reporting into the one
 * error list with the JSON path as the field and leaving the default in place
 * on error, so every problem of a configuration is found in one pass.  The
 * section parsers (config.c, config_training.c, config_targets.c) are lists
 * of calls to these. */
#include "engine/train/config_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fail(parse_ctx *c, const char *section, const char *key, const char *fmt, ...)
{
    char path[PT_ERR_FIELD_MAX];
    if (section && section[0] && key) snprintf(path, sizeof path, "%s.%s", section, key);
    else snprintf(path, sizeof path, "%s", key ? key : section ? section : "");
    va_list ap;
    va_start(ap, fmt);
    pt_errors_addv(c->errs, c->file, 0, path, fmt, ap);
    va_end(ap);
    c->failed = 1;
}

const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Keeps 15 significant digits so that printing and re-parsing is exact. */
double round15(double x)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.15g", x);
    return strtod(buf, NULL);
}

void check_keys(parse_ctx *c, const json_t *obj, const char *section,
                       const char *const *allowed)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) ok |= !strcmp(*a, key);
        if (ok) continue;
        char list[PT_ERR_MSG_MAX - 64] = "";
        size_t n = 0;
        for (const char *const *a = allowed; *a && n < sizeof list; a++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", a == allowed ? "" : ", ", *a);
        fail(c, section, key, "unknown key; allowed here: %s", list);
    }
}

/* An integer in lo..hi, or (when alt is "auto" or "null") that alternative,
 * stored as 0.  Returns 1 when set, 0 when absent, -1 on error. */
int read_int64(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                      long long lo, long long hi, const char *alt, int64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (alt && (!strcmp(alt, "null") ? json_is_null(v)
                : json_is_string(v) && !strcmp(json_string_value(v), alt))) {
        *out = 0;
        return 1;
    }
    char what[128];
    snprintf(what, sizeof what, "an integer from %lld to %lld%s%s%s%s", lo, hi,
             alt ? " or " : "", alt && strcmp(alt, "null") ? "\"" : "", alt ? alt : "",
             alt && strcmp(alt, "null") ? "\"" : "");
    if (!json_is_integer(v)) {
        if (json_is_string(v))
            fail(c, section, key, "must be %s, got \"%.40s\"", what, json_string_value(v));
        else
            fail(c, section, key, "must be %s, got %s", what, type_name(v));
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        fail(c, section, key, "must be %s, got %lld", what, x);
        return -1;
    }
    *out = x;
    return 1;
}

int read_int(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                    long long lo, long long hi, const char *alt, int32_t *out)
{
    int64_t x = *out;
    int rc = read_int64(c, obj, section, key, lo, hi, alt, &x);
    *out = (int32_t)x;
    return rc;
}

/* A number in the interval lo..hi; `open_lo` excludes lo.  With `nullable`,
 * JSON null is accepted and stored as 0. */
int read_number(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                       double lo, int open_lo, double hi, int nullable, double *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (nullable && json_is_null(v)) {
        *out = 0.0;
        return 1;
    }
    char range[96];
    snprintf(range, sizeof range, "a number %s %g and at most %g%s",
             open_lo ? "above" : "of at least", lo, hi, nullable ? ", or null" : "");
    if (!json_is_number(v)) {
        fail(c, section, key, "must be %s, got %s", range, type_name(v));
        return -1;
    }
    double x = json_number_value(v);
    if (x < lo || (open_lo && x == lo) || x > hi) {
        fail(c, section, key, "must be %s, got %g", range, x);
        return -1;
    }
    *out = round15(x);
    return 1;
}

int read_enum(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                     const char *const *names, int *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    char list[160] = "";
    size_t n = 0;
    for (const char *const *a = names; *a && n < sizeof list; a++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s\"%s\"", a == names ? "" : ", ", *a);
    if (!json_is_string(v)) {
        fail(c, section, key, "must be one of %s, got %s", list, type_name(v));
        return -1;
    }
    for (int i = 0; names[i]; i++) {
        if (!strcmp(names[i], json_string_value(v))) {
            *out = i;
            return 1;
        }
    }
    fail(c, section, key, "must be one of %s, got \"%.40s\"", list, json_string_value(v));
    return -1;
}

void read_bool(parse_ctx *c, const json_t *obj, const char *section, const char *key,
                      bool *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return;
    if (!json_is_boolean(v)) {
        fail(c, section, key, "must be true or false, got %s", type_name(v));
        return;
    }
    *out = json_is_true(v);
}

/* The object at key, or NULL when absent (defaults apply) or not an object. */
const json_t *get_section(parse_ctx *c, const json_t *obj, const char *section,
                                 const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (v && !json_is_object(v)) {
        fail(c, section, key, "must be an object, got %s", type_name(v));
        return NULL;
    }
    return v;
}
