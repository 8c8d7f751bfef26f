/* numparse.c — whitespace tokens and numbers equal to strtod/strtof (see
 * numparse.h). */
#include "engine/data/numparse.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* space, tab, CR, VT, FF separate tokens; NUL ends the line */
const unsigned char pt_char_class[256] = {
    [0] = PT_CH_END, [' '] = PT_CH_SPACE, ['\t'] = PT_CH_SPACE, ['\r'] = PT_CH_SPACE,
    ['\v'] = PT_CH_SPACE, ['\f'] = PT_CH_SPACE,
};

/* Most numbers in these files have few digits ("-0.066522"), so they are
 * exact as an integer mantissa and a small power of ten; one IEEE division or
 * multiplication of two exact values is then correctly rounded, which is what
 * strtod/strtof return too (Clinger's fast path).  Everything else goes to
 * strtod/strtof, so results never differ from the C library's. */

static const double pow10_double[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};
static const float pow10_float[11] = {
    1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f,
};

typedef struct num_scan {
    int neg;
    uint64_t mant;   /* significant digits, valid when digits <= 19 */
    int digits;      /* significant digits seen */
    long exp10;      /* value = mant * 10^exp10 */
} num_scan;

static int ascii_ieq(const char *s, size_t len, const char *word)
{
    size_t n = strlen(word);
    if (len != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != word[i]) return 0;
    }
    return 1;
}

static int is_digit(char c) { return (unsigned)(c - '0') < 10u; }

/* Hot path of ingest: one pass over the characters, no library calls. */
static int scan_number(const char *s, size_t len, int flags, num_scan *ns)
{
    const char *p = s, *end = s + len;
    ns->neg = 0;
    if (p < end && (*p == '+' || *p == '-')) ns->neg = *p++ == '-';
    if (p < end && (*p == 'n' || *p == 'N' || *p == 'i' || *p == 'I')) {
        size_t n = (size_t)(end - p);
        if (ascii_ieq(p, n, "nan") || ascii_ieq(p, n, "inf") || ascii_ieq(p, n, "infinity"))
            return PT_NUM_NONFINITE;
        return PT_NUM_INVALID;
    }
    uint64_t m = 0;       /* wraps past 19 digits; then strtod decides */
    long e10 = 0;
    const char *first = p;
    while (p < end && *p == '0') p++;
    const char *sig = p;
    while (p < end && is_digit(*p)) m = m * 10 + (uint64_t)(*p++ - '0');
    long digits = (long)(p - sig);
    int any = p > first;
    if (p < end && *p == '.') {
        const char *frac = ++p;
        if (digits == 0)
            while (p < end && *p == '0') p++;
        const char *fsig = p;
        while (p < end && is_digit(*p)) m = m * 10 + (uint64_t)(*p++ - '0');
        digits += (long)(p - fsig);
        e10 -= (long)(p - frac);
        any |= p > frac;
    }
    if (!any) return PT_NUM_INVALID;
    int has_exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        has_exp = 1;
    } else if ((flags & PT_NUM_MATHEMATICA) && p + 1 < end && p[0] == '*' && p[1] == '^') {
        p += 2;
        has_exp = 1;
    }
    if (has_exp) {
        int eneg = 0;
        long e = 0;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= end || !is_digit(*p)) return PT_NUM_INVALID;
        for (; p < end && is_digit(*p); p++)
            if (e < 100000) e = e * 10 + (*p - '0');
        e10 += eneg ? -e : e;
    }
    ns->mant = m;
    ns->digits = digits > 100 ? 100 : (int)digits;
    ns->exp10 = e10;
    return p == end ? PT_NUM_OK : PT_NUM_INVALID;
}

/* Copies s into buf as C syntax ("*^" -> "e"); -1 if it does not fit. */
static int c_syntax(const char *s, size_t len, char *buf, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (j + 1 >= cap) return -1;
        if (s[i] == '*' && i + 1 < len && s[i + 1] == '^') {
            buf[j++] = 'e';
            i++;
        } else {
            buf[j++] = s[i];
        }
    }
    buf[j] = '\0';
    return 0;
}

int pt_parse_double(const char *s, size_t len, int flags, double *out)
{
    num_scan ns;
    int rc = scan_number(s, len, flags, &ns);
    if (rc != PT_NUM_OK) {
        *out = rc == PT_NUM_NONFINITE ? NAN : 0.0;
        return rc;
    }
    if (ns.digits == 0) {   /* only zeros */
        *out = ns.neg ? -0.0 : 0.0;
        return PT_NUM_OK;
    }
    if (ns.digits <= 19 && ns.mant <= (1ull << 53) && ns.exp10 >= -22 && ns.exp10 <= 22) {
        double v = (double)ns.mant;
        v = ns.exp10 < 0 ? v / pow10_double[-ns.exp10] : v * pow10_double[ns.exp10];
        *out = ns.neg ? -v : v;
        return PT_NUM_OK;
    }
    char buf[128];
    if (c_syntax(s, len, buf, sizeof buf) < 0) return PT_NUM_INVALID;
    *out = strtod(buf, NULL);
    return isfinite(*out) ? PT_NUM_OK : PT_NUM_NONFINITE;
}

/* pt_parse_double's twin, written out on purpose: parsing to double and
 * narrowing would round twice (wrong in the last bit for some inputs), so the
 * float path needs its own exact fast-path limits (2^24, 10^±10) and strtof;
 * a shared macro body would hide which limits belong to which type. */
int pt_parse_float(const char *s, size_t len, int flags, float *out)
{
    num_scan ns;
    int rc = scan_number(s, len, flags, &ns);
    if (rc != PT_NUM_OK) {
        *out = rc == PT_NUM_NONFINITE ? NAN : 0.0f;
        return rc;
    }
    if (ns.digits == 0) {   /* only zeros */
        *out = ns.neg ? -0.0f : 0.0f;
        return PT_NUM_OK;
    }
    if (ns.digits <= 19 && ns.mant <= (1ull << 24) && ns.exp10 >= -10 && ns.exp10 <= 10) {
        float v = (float)ns.mant;
        v = ns.exp10 < 0 ? v / pow10_float[-ns.exp10] : v * pow10_float[ns.exp10];
        *out = ns.neg ? -v : v;
        return PT_NUM_OK;
    }
    char buf[128];
    if (c_syntax(s, len, buf, sizeof buf) < 0) return PT_NUM_INVALID;
    *out = strtof(buf, NULL);
    return isfinite(*out) ? PT_NUM_OK : PT_NUM_NONFINITE;
}

/* Digits with an optional point, at most 19 digits, mantissa exact in a
 * float, at most 10 fraction digits: one exact division, correctly rounded.
 * Anything else (exponents, long mantissas, errors) takes the general path. */
int pt_next_float_fast(const char **p, float *out)
{
    const unsigned char *c = (const unsigned char *)*p;
    while (pt_char_class[*c] & PT_CH_SPACE) c++;
    int neg = *c == '-';
    c += neg || *c == '+';
    uint64_t m = 0;       /* wraps past 19 digits, which then take the general path */
    const unsigned char *d0 = c;
    while (is_digit((char)*c)) m = m * 10 + (uint64_t)(*c++ - '0');
    long digits = c - d0, frac = 0;
    if (*c == '.') {
        const unsigned char *f0 = ++c;
        while (is_digit((char)*c)) m = m * 10 + (uint64_t)(*c++ - '0');
        frac = c - f0;
        digits += frac;
    }
    if (digits > 0 && digits < 20 && pt_char_class[*c] && m <= (1u << 24) && frac <= 10) {
        float v = (float)m / pow10_float[frac];
        *out = neg ? -v : v;
        *p = (const char *)c;
        return 1;
    }
    return 0;
}
