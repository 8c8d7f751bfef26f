/* numparse.h — the tokenizer and number scanner under every text format.
 *
 * Whitespace tokens over NUL-terminated lines, and number parsers that match
 * strtod/strtof bit for bit while taking a fast path for the short decimals
 * structure files are made of.  Knows nothing of files, lines or formats. */
#ifndef PT_NUMPARSE_H
#define PT_NUMPARSE_H

#include <stddef.h>

/* Whitespace tokenizer over a NUL-terminated line: *p advances past the
 * token.  A class table makes each character one load and one test. */
enum { PT_CH_SPACE = 1, PT_CH_END = 2 };
extern const unsigned char pt_char_class[256];
static inline int pt_is_space(char c) { return pt_char_class[(unsigned char)c] & PT_CH_SPACE; }
static inline size_t pt_next_token(const char **p, const char **tok)
{
    const unsigned char *s = (const unsigned char *)*p;
    while (pt_char_class[*s] & PT_CH_SPACE) s++;
    const unsigned char *e = s;
    while (!pt_char_class[*e]) e++;
    *tok = (const char *)s;
    *p = (const char *)e;
    return (size_t)(e - s);
}

/* Number parsing.  Accepts [+-]digits[.digits][(e|E)[+-]digits], "nan",
 * "inf", "infinity" (any case) and, with PT_NUM_MATHEMATICA, the "*^"
 * exponent marker of QM9's Mathematica output.  Returns PT_NUM_OK,
 * PT_NUM_INVALID (not a number) or PT_NUM_NONFINITE (NaN/Inf/overflow). The
 * result equals strtod / strtof of the same text, bit for bit. */
enum { PT_NUM_OK = 0, PT_NUM_INVALID = 1, PT_NUM_NONFINITE = 2 };
enum { PT_NUM_MATHEMATICA = 1 };
int pt_parse_double(const char *s, size_t len, int flags, double *out);
int pt_parse_float(const char *s, size_t len, int flags, float *out);

/* The fast path of pt_parse_float fused with tokenizing, for the common
 * "-0.066522" shape (digits with an optional point, mantissa exact in a
 * float).  Returns 1 with *out set and *p moved past the token, or 0 with
 * nothing moved when the next token needs the general path (or is absent). */
int pt_next_float_fast(const char **p, float *out);

#endif
