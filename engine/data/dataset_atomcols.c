/* dataset_atomcols.c — the .ptd writer's further per-atom columns (version
 * 4: partial charges, per-atom energies, any real scalar per atom a reader
 * keeps by name; dataset.h atom_cols).
 *
 * Why a file per column: column-major storage lets a training job read one
 * label as one array, and neither the atom count nor the set of columns is
 * known until the last structure.  Columns are rare and small next to
 * positions (4 bytes an atom each), so they are streamed to unlinked
 * temporary files and copied once into the output at the end rather than
 * chunked like z, pos and forces. */
#include "engine/data/dataset_file_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

static int write_nan(FILE *f, uint64_t n)
{
    float block[1024];
    for (int i = 0; i < 1024; i++) block[i] = NAN;
    while (n > 0) {
        size_t k = n > 1024 ? 1024 : (size_t)n;
        if (fwrite(block, sizeof(float), k, f) != k) return -1;
        n -= k;
    }
    return 0;
}

static int find(const ptd_atomcols *ac, const char *name)
{
    for (uint32_t c = 0; c < ac->n; c++)
        if (!strncmp(ac->names[c], name, PT_KEY_MAX)) return (int)c;
    return -1;
}

int ptd_atomcols_append(ptd_atomcols *ac, const char *tmp_base, uint64_t atoms_before,
                        uint32_t n_atoms, uint32_t n_cols, const char (*names)[PT_KEY_MAX],
                        const float *vals, char *err, size_t errlen)
{
    int from[PT_ATOM_COLS_MAX];   /* column c takes the structure's column from[c], -1 none */
    for (int c = 0; c < PT_ATOM_COLS_MAX; c++) from[c] = -1;
    for (uint32_t i = 0; i < n_cols; i++) {
        int c = find(ac, names[i]);
        if (c < 0) {
            if (ac->n == PT_ATOM_COLS_MAX) {
                snprintf(err, errlen, "per-atom column '%s' is one too many: a dataset keeps at "
                         "most %d", names[i], PT_ATOM_COLS_MAX);
                return -1;
            }
            c = (int)ac->n++;
            snprintf(ac->names[c], PT_KEY_MAX, "%s", names[i]);
            ac->col[c] = ptd_temp_column(tmp_base);
            if (!ac->col[c] || write_nan(ac->col[c], atoms_before) < 0) {
                snprintf(err, errlen, "writing temporary columns for %s: %s", tmp_base,
                         strerror(errno));
                return -1;
            }
        }
        from[c] = (int)i;
    }
    for (uint32_t c = 0; c < ac->n; c++) {
        int ok = from[c] >= 0 ? fwrite(vals + (size_t)from[c] * n_atoms, sizeof(float), n_atoms,
                                       ac->col[c]) == n_atoms
                              : write_nan(ac->col[c], n_atoms) == 0;
        if (!ok) {
            snprintf(err, errlen, "writing temporary columns for %s: %s", tmp_base, strerror(errno));
            return -1;
        }
    }
    return 0;
}

void ptd_atomcols_close(ptd_atomcols *ac)
{
    for (uint32_t c = 0; c < ac->n; c++)
        if (ac->col[c]) fclose(ac->col[c]);
    memset(ac, 0, sizeof(*ac));
}
