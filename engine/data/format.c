/* format.c — the buffers of a pt_structure, reused from structure to
 * structure so a file is read with memory constant in its size. */
#include "engine/data/format.h"

#include <stdlib.h>
#include <string.h>

void pt_structure_reset(pt_structure *s, long line, pt_format format)
{
    s->line = line;
    s->row = 0;
    s->format = format;
    s->valid = 1;
    s->n_atoms = 0;
    s->n_keys = 0;
    s->n_atom_cols = 0;
    s->forces = NULL;
    s->has_cell = 0;
    s->pbc = 0;
    s->has_stress = 0;
    memset(s->cell, 0, sizeof s->cell);
    memset(s->stress, 0, sizeof s->stress);
}

int pt_structure_reserve(pt_structure *s, uint32_t n, int want_forces)
{
    if (n > s->cap_atoms) {
        uint32_t cap = s->cap_atoms ? s->cap_atoms : 64;
        while (cap < n) cap = cap > UINT32_MAX / 2 ? n : cap * 2;
        uint8_t *z = realloc(s->z, cap);
        if (!z) return -1;
        s->z = z;
        float *pos = realloc(s->pos, (size_t)cap * 3 * sizeof(float));
        if (!pos) return -1;
        s->pos = pos;
        if (s->forces_buf) {
            float *f = realloc(s->forces_buf, (size_t)cap * 3 * sizeof(float));
            if (!f) return -1;
            s->forces_buf = f;
        }
        s->cap_atoms = cap;
    }
    if (want_forces && !s->forces_buf) {
        s->forces_buf = malloc((size_t)s->cap_atoms * 3 * sizeof(float));
        if (!s->forces_buf) return -1;
    }
    return 0;
}

int pt_structure_reserve_values(pt_structure *s, uint32_t n_cols)
{
    if (n_cols == 0 || s->n_atoms <= s->cap_vals) return 0;
    float *v = realloc(s->atom_vals, (size_t)s->n_atoms * PT_ATOM_COLS_MAX * sizeof(float));
    if (!v) return -1;
    s->atom_vals = v;
    s->cap_vals = s->n_atoms;
    return 0;
}

void pt_structure_free(pt_structure *s)
{
    free(s->atom_vals);
    s->atom_vals = NULL;
    s->cap_vals = 0;
    free(s->z);
    free(s->pos);
    free(s->forces_buf);
    free(s->xyz_cache);
    s->z = NULL;
    s->pos = NULL;
    s->forces_buf = NULL;
    s->xyz_cache = NULL;
    s->cap_atoms = 0;
}
