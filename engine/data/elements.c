/* elements.c — element symbol table; see elements.h.
 *
 * Lookup is a linear scan over the 99 symbols after a fast path for the five
 * elements of organic chemistry datasets (H, C, N, O, F), which covers nearly
 * every atom line of QM9 and water datasets. */
#include "engine/data/elements.h"

#include "engine/data/dataset.h"

static const char *const symbols[PT_Z_MAX + 1] = {
    "?",
    "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne",
    "Na", "Mg", "Al", "Si", "P",  "S",  "Cl", "Ar", "K",  "Ca",
    "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn",
    "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr",
    "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn",
    "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr", "Nd",
    "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb",
    "Lu", "Hf", "Ta", "W",  "Re", "Os", "Ir", "Pt", "Au", "Hg",
    "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac", "Th",
    "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es",
};

static char to_upper(char c) { return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c; }
static char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

static int number_to_z(const char *s, size_t len)
{
    if (len == 0 || len > 2) return 0;
    int z = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        z = z * 10 + (s[i] - '0');
    }
    return (z >= 1 && z <= PT_Z_MAX) ? z : 0;
}

int pt_element_from_symbol(const char *s, size_t len)
{
    if (len == 0 || len > 2) return 0;
    if (s[0] >= '0' && s[0] <= '9') return number_to_z(s, len);
    char a = to_upper(s[0]);
    if (len == 1) {
        switch (a) {
        case 'H': return 1;
        case 'C': return 6;
        case 'N': return 7;
        case 'O': return 8;
        case 'F': return 9;
        default: break;
        }
    }
    char b = len == 2 ? to_lower(s[1]) : '\0';
    for (int z = 1; z <= PT_Z_MAX; z++) {
        const char *sym = symbols[z];
        if (sym[0] == a && sym[1] == b) return z;
    }
    return 0;
}

const char *pt_element_symbol(int z)
{
    return (z >= 1 && z <= PT_Z_MAX) ? symbols[z] : "?";
}
