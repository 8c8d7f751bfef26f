/* elements.h — chemical element symbols <-> atomic numbers (Z = 1..PT_Z_MAX).
 *
 * The parsers turn the species column of every atom line into Z through
 * pt_element_from_symbol, which is on the hot path of ingest, so it works on a
 * (pointer, length) token without copying or NUL-terminating it. */
#ifndef PT_ELEMENTS_H
#define PT_ELEMENTS_H

#include <stddef.h>

/* Z for a symbol such as "C", "Cl" or "CL" (case-insensitive), or for a
 * decimal atomic number such as "6"; 0 when the token names no element in
 * 1..PT_Z_MAX. */
int pt_element_from_symbol(const char *s, size_t len);

/* Canonical symbol ("Cl") for Z in 1..PT_Z_MAX, "?" otherwise. */
const char *pt_element_symbol(int z);

#endif
