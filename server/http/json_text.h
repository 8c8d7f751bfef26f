/* json_text.h — JSON text for the wire: compact, with every real number in
 * its shortest form that reads back to the same double (0.1, not jansson's
 * 0.10000000000000001).  jansson writes all reals at one precision per call
 * (17 digits by default), so the walk here hands each real to jansson alone,
 * at the smallest of 15, 16 or 17 significant digits that round-trips; the
 * escaping of strings and the digits themselves stay jansson's. */
#ifndef PT_JSON_TEXT_H
#define PT_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* Compact JSON of v (any value, not only an object or array), keys in
 * insertion order; heap, NUL-terminated, *len (may be NULL) its length.
 * NULL when out of memory or v is NULL. */
char *pt_json_text(const json_t *v, size_t *len);

/* The shortest of %.15g, %.16g, %.17g that reads back as x, into buf
 * (at least 32 bytes).  Returns the length. */
int pt_json_real_text(double x, char *buf, size_t cap);

#endif
