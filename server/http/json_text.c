/* json_text.c — compact JSON with shortest round-trip reals; see json_text.h. */
#include "server/http/json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct out_buf {
    char *p;
    size_t len, cap;
    int oom;
} out_buf;

/* jansson's dump callback: appends to the buffer. */
static int put(const char *s, size_t n, void *ud)
{
    out_buf *b = ud;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* Every double has a form of at most 17 significant digits that reads back
 * exactly.  A normal double within half an ulp (2^-53 relative) of a
 * decimal of 15 or fewer digits is nearer to it than to any other 15-digit
 * decimal, so %.15g (which drops trailing zeros) prints that shortest one;
 * else 16 digits if they read back, else 17.  (Below DBL_MIN the ulp is
 * relatively larger and the text may be longer than the shortest.) */
static int real_precision(double x)
{
    char buf[40];
    for (int prec = 15; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return prec;
    }
    return 17;
}

int pt_json_real_text(double x, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%.*g", real_precision(x), x);
}

static int emit(const json_t *v, out_buf *b)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (put("{", 1, b)) return -1;
        const char *key;
        json_t *val;
        int first = 1;
        json_object_foreach((json_t *)v, key, val) {
            if (!first && put(",", 1, b)) return -1;
            first = 0;
            json_t *k = json_string(key);   /* jansson escapes the key */
            int rc = !k || json_dump_callback(k, put, b, JSON_ENCODE_ANY);
            json_decref(k);
            if (rc || put(":", 1, b) || emit(val, b)) return -1;
        }
        return put("}", 1, b);
    }
    case JSON_ARRAY: {
        if (put("[", 1, b)) return -1;
        for (size_t i = 0; i < json_array_size(v); i++)
            if ((i && put(",", 1, b)) || emit(json_array_get(v, i), b)) return -1;
        return put("]", 1, b);
    }
    case JSON_REAL:
        /* jansson's own text at that precision (it writes a whole number
         * as 1.0, and refuses NaN and infinities) */
        return json_dump_callback(v, put, b,
                                  JSON_ENCODE_ANY | JSON_REAL_PRECISION(real_precision(json_real_value(v))));
    default:
        return json_dump_callback(v, put, b, JSON_ENCODE_ANY);
    }
}

char *pt_json_text(const json_t *v, size_t *len)
{
    if (!v) return NULL;
    out_buf b = {0};
    if (emit(v, &b) != 0 || b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    if (len) *len = b.len;
    return b.p;
}
