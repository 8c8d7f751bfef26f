/* fuzz_structure.h — the structure readers' promises (format.h), checked on
 * every structure a fuzz target gets from one: a valid structure is usable
 * as it stands, an invalid one comes with an error, and reading that stops
 * says why.  Shared by the targets of the text formats and ASE databases. */
#ifndef PT_FUZZ_STRUCTURE_H
#define PT_FUZZ_STRUCTURE_H

#include "engine/data/reader.h"
#include "tests/fuzz/fuzz.h"

typedef struct pt_fuzz_read {
    const pt_read_options *opt;
    pt_errors *errs;
    size_t errors_before;   /* errs->total when the previous structure was handed out */
    uint64_t n_structs, n_valid;
} pt_fuzz_read;

static int pt_fuzz_on_structure(void *ctx, const pt_structure *s)
{
    pt_fuzz_read *f = ctx;
    f->n_structs++;
    FUZZ_CHECK(s->file != NULL);
    FUZZ_CHECK(s->n_keys <= PT_READER_MAX_KEYS);
    for (uint32_t k = 0; k < s->n_keys; k++) FUZZ_CHECK(memchr(s->keys[k].name, '\0', PT_KEY_MAX) != NULL);
    if (!s->valid) {
        /* an invalid structure is always explained */
        FUZZ_CHECK(f->errs->total > f->errors_before);
    } else {
        f->n_valid++;
        FUZZ_CHECK(s->n_atoms >= 1 && s->n_atoms <= f->opt->max_atoms);
        for (uint32_t a = 0; a < s->n_atoms; a++) {
            FUZZ_CHECK(s->z[a] >= 1 && s->z[a] <= PT_Z_MAX);
            for (int c = 0; c < 3; c++) {
                FUZZ_CHECK(isfinite(s->pos[3 * a + c]));
                if (s->forces) FUZZ_CHECK(isfinite(s->forces[3 * a + c]));
            }
        }
        for (uint32_t k = 0; k < s->n_keys; k++)
            if (s->keys[k].numeric) FUZZ_CHECK(isfinite(s->keys[k].value));
        FUZZ_CHECK(s->pbc <= PT_PBC_ALL);
        if (s->pbc) FUZZ_CHECK(s->has_cell);
        for (int i = 0; i < 9; i++) {
            if (s->has_cell) FUZZ_CHECK(isfinite(s->cell[i]));
            if (s->has_stress) FUZZ_CHECK(isfinite(s->stress[i]));
        }
        if (s->has_stress) FUZZ_CHECK(s->pbc == PT_PBC_ALL);
    }
    f->errors_before = f->errs->total;
    return 0;
}

/* pt_read_structures on path with every check above; returns its result. */
static inline int pt_fuzz_read_file(const char *path, const pt_read_options *opt)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_fuzz_read f = {.opt = opt, .errs = &errs};
    int rc = pt_read_structures(path, opt, pt_fuzz_on_structure, &f, &errs);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc < 0) FUZZ_CHECK(errs.total > 0);   /* reading that stops says why */
    if (pt_fuzz_verbose())
        fprintf(stderr, "%llu structures, %llu valid\n", (unsigned long long)f.n_structs,
                (unsigned long long)f.n_valid);
    pt_fuzz_print_errors("read", rc, &errs);
    pt_fuzz_check_errors_json(&errs);
    pt_errors_close(&errs);
    return rc;
}

#endif
