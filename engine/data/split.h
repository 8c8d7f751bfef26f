/* split.h — the seeded train / validation / test split of a dataset.
 *
 * Sizes are exact and documented: n_train = floor(f_train * n),
 * n_val = floor(f_val * n), n_test = n - n_train - n_val (so the test part
 * takes the rounding remainder, and a test fraction of 0 is honoured only up
 * to that remainder, as in SchNetPack's train_test_split).  Membership is a
 * Fisher-Yates permutation of 0..n-1 drawn from the job seed on its own RNG
 * stream; each part is then sorted ascending so that reading the dataset in a
 * part's order walks the file forwards.  The three parts are disjoint and
 * cover every index exactly once. */
#ifndef PT_SPLIT_H
#define PT_SPLIT_H

#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/core/errors.h"

/* RNG stream of the split, distinct from every other consumer of the seed. */
#define PT_RNG_STREAM_SPLIT 0x73706c6974ULL   /* "split" */

typedef struct pt_split {
    uint32_t n;              /* items split */
    uint32_t n_train, n_val, n_test;
    uint32_t *train;         /* [n_train] ascending */
    uint32_t *val;           /* [n_val] ascending */
    uint32_t *test;          /* [n_test] ascending */
    uint32_t *ids_;          /* one allocation holding all three */
} pt_split;

/* Splits the indices 0..n-1 with fractions f[0..2] (each in [0,1], summing to
 * 1).  Returns 0, or -1 with a message in errs (field "training.split") when
 * the training or validation part would be empty or memory runs out. */
int pt_split_init(pt_split *sp, uint32_t n, const double f[3], uint64_t seed, pt_errors *errs);

/* Same, over an explicit list of eligible items (e.g. the structures that
 * have the training target); the parts hold values of `items`. */
int pt_split_init_items(pt_split *sp, const uint32_t *items, uint32_t n, const double f[3],
                        uint64_t seed, pt_errors *errs);

/* Makes every element of the validation and test parts appear in the
 * training part: a model cannot predict an element it never saw, and the
 * atomref fit gives unseen elements 0, so one such molecule would dominate
 * the validation error by thousands of eV.  Each validation/test structure
 * holding an unseen element swaps places with a training structure whose
 * elements all occur elsewhere in training (the first such one in ascending
 * order), so part sizes stay exact and the result is still a function of the
 * seed.  Parts stay sorted.  *moved counts the swaps.  Returns 0, or -1 with
 * an error when no training structure can be given up. */
int pt_split_cover_elements(pt_split *sp, const pt_dataset *ds, uint32_t *moved, pt_errors *errs);

void pt_split_close(pt_split *sp);

#endif
