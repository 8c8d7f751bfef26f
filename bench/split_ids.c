/* split_ids.c — packtrain's train / validation / test split of a dataset as
 * JSON, so the PyTorch peer of bench/bench_tta.sh trains and validates on
 * exactly the structures packtrain does.
 *
 *   split_ids DATA.ptd JOB.json TARGET_KEY
 *
 * The same two calls as the trainer's setup (engine/train/train.c):
 * pt_split_init over every structure with training.split and training.seed,
 * then pt_split_cover_elements.  Prints {"n_structs", "train", "val",
 * "test", "natoms", "target"}: the three index lists (0-based, file order)
 * and, per structure, its atom count and target value, which the peer checks
 * against its own reading of the source file (same structures, same order). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/core/errors.h"
#include "engine/data/dataset.h"
#include "engine/data/split.h"
#include "engine/train/config.h"

static void print_ids(const char *name, const uint32_t *ids, uint32_t n)
{
    printf("\"%s\":[", name);
    for (uint32_t i = 0; i < n; i++) printf(i ? ",%u" : "%u", ids[i]);
    printf("],");
}

static void fail(const pt_errors *errs)
{
    char buf[1024];
    pt_errors_first(errs, buf, sizeof buf);
    fprintf(stderr, "split_ids: %s\n", buf);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: split_ids DATA.ptd JOB.json TARGET_KEY\n");
        return 2;
    }
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_job_config cfg;
    if (pt_job_config_load(&cfg, argv[2], &errs) != 0) {
        fail(&errs);
        return 1;
    }
    pt_dataset ds = {0};
    char err[512];
    if (pt_dataset_open(&ds, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "split_ids: %s\n", err);
        return 1;
    }
    int key = pt_dataset_find_target(&ds, argv[3]);
    if (key < 0) {
        fprintf(stderr, "split_ids: %s: no target %s\n", argv[1], argv[3]);
        return 1;
    }
    pt_split sp;
    uint32_t moved = 0;
    if (pt_split_init(&sp, ds.n_structs, cfg.training.split, cfg.training.seed, &errs) != 0 ||
        pt_split_cover_elements(&sp, &ds, &moved, &errs) != 0) {
        fail(&errs);
        return 1;
    }
    printf("{\"n_structs\":%u,", ds.n_structs);
    print_ids("train", sp.train, sp.n_train);
    print_ids("val", sp.val, sp.n_val);
    print_ids("test", sp.test, sp.n_test);
    printf("\"natoms\":[");
    for (uint32_t s = 0; s < ds.n_structs; s++)
        printf(s ? ",%u" : "%u", pt_dataset_natoms(&ds, s));
    printf("],\"target\":[");
    const double *t = ds.targets + (size_t)key * ds.n_structs;
    for (uint32_t s = 0; s < ds.n_structs; s++) printf(s ? ",%.17g" : "%.17g", t[s]);
    printf("]}\n");
    pt_split_close(&sp);
    pt_dataset_close(&ds);
    pt_errors_close(&errs);
    return 0;
}
