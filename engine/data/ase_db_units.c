/* ase_db_units.c — SchNetPack unit strings to factors; see ase_db_units.h. */
#include "engine/data/ase_db_units.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ase.units of ASE 3.22 (CODATA 2014), as printed by repr() */
static const struct {
    const char *name;
    double factor;
    int length, energy, other;
} words[] = {
    {"Ang", 1.0, 1, 0, 0},
    {"Angstrom", 1.0, 1, 0, 0},
    {"nm", 10.0, 1, 0, 0},
    {"Bohr", 0.5291772105638411, 1, 0, 0},
    {"m", 10000000000.0, 1, 0, 0},
    {"eV", 1.0, 0, 1, 0},
    {"Hartree", 27.211386024367243, 0, 1, 0},
    {"Ha", 27.211386024367243, 0, 1, 0},
    {"Ry", 13.605693012183622, 0, 1, 0},
    {"kcal", 2.611447418269555e+22, 0, 1, 0},
    {"kJ", 6.241509125883258e+21, 0, 1, 0},
    {"J", 6.241509125883258e+18, 0, 1, 0},
    {"mol", 6.022140857e+23, 0, 0, 0},
    {"GPa", 0.006241509125883258, -3, 1, 0},
    {"Pascal", 6.241509125883258e-12, -3, 1, 0},
    {"Debye", 0.20819433442462576, 0, 0, 1},
    {"fs", 0.09822694788464063, 0, 0, 1},
    {"s", 98226947884640.62, 0, 0, 1},
};

int pt_ase_unit_is(const pt_ase_unit *u, int length, int energy)
{
    return !u->unitless && !u->other && u->length == length && u->energy == energy;
}

int pt_ase_unit_parse(const char *s, pt_ase_unit *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof(*u));
    u->factor = 1.0;
    if (!s || !*s || !strcmp(s, "arb. unit")) {
        u->unitless = 1;
        return 0;
    }
    int divide = 0, any = 0;
    for (const char *p = s; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        if (*p == '/') {
            divide = 1;
            p++;
            continue;
        }
        size_t n = 0;
        while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
        if (n == 0) {
            snprintf(err, errlen, "unit '%.40s': '%c' is not understood (units are ase.units names joined by ' ' or '/')",
                     s, *p);
            return -1;
        }
        size_t w = 0;
        while (w < sizeof words / sizeof words[0] && (strlen(words[w].name) != n || strncmp(words[w].name, p, n)))
            w++;
        if (w == sizeof words / sizeof words[0]) {
            snprintf(err, errlen, "unit '%.40s': packtrain does not know '%.*s' (it knows Ang, Angstrom, nm, Bohr, m, "
                     "eV, Hartree, Ha, Ry, kcal, kJ, J, mol, GPa, Pascal, Debye, fs, s)", s, (int)(n > 24 ? 24 : n), p);
            return -1;
        }
        int sign = divide ? -1 : 1;
        /* left to right, one operation per name, as schnetpack/units.py does */
        if (divide) u->factor /= words[w].factor;
        else u->factor *= words[w].factor;
        u->length += sign * words[w].length;
        u->energy += sign * words[w].energy;
        u->other |= words[w].other;
        divide = 0;
        any = 1;
        p += n;
    }
    if (!any || divide) {
        snprintf(err, errlen, "unit '%.40s' %s", s, divide ? "ends with '/'" : "names no unit");
        return -1;
    }
    return 0;
}
