/* train_batch.c — the training loop's view of engine/batch.c: the same
 * allocation and fill, with failures turned into located errors that name
 * the config key to change (batch.c itself returns bare codes). */
#include "engine/train/train_internal.h"

#include <string.h>

void pt_train_batch_close(pt_batch *b)
{
    pt_batch_close(b);
}

int pt_train_batch_init(pt_batch *b, const pt_train_data *d, pt_pack_limits limits,
                        pt_errors *errs)
{
    int rc = pt_batch_init(b, limits, d->layout.micro_packs, (float)d->cfg->model.cutoff);
    if (rc == PT_BATCH_ELIMITS) {
        pt_errors_add(errs, NULL, 0, "batching.model_batch_size",
                      "%d packs of %d nodes, %d edges, %d graphs do not make a batch "
                      "(each total must stay below 2^31)",
                      d->layout.micro_packs, limits.max_nodes, limits.max_edges, limits.max_graphs);
        return -1;
    }
    /* a multi-task job's batches carry every target, a per-atom first
     * target's too (the batch's per-structure `target` then stays 0) */
    if (rc == PT_BATCH_OK && (d->loss.heads > 1 || d->loss.head_atom[0]))
        rc = pt_batch_set_keys_atom(b, d->head_key, d->loss.head_atom, d->loss.heads);
    if (rc != PT_BATCH_OK) {
        pt_errors_add(errs, NULL, 0, "", "batch of %d packs: %s", d->layout.micro_packs,
                      pt_batch_strerror(rc));
        pt_batch_close(b);
        return -1;
    }
    return 0;
}

int pt_train_fill(pt_batch *b, const pt_train_data *d, const pt_packs *packs,
                  const uint32_t *ids, uint32_t n, pt_errors *errs)
{
    if ((int64_t)n > b->n_packs) {
        pt_errors_add(errs, NULL, 0, "", "%u packs do not fit a batch of %d", n, b->n_packs);
        return -1;
    }
    const int target = d->loss.head_atom[0] ? -1 : (int)d->target_key;
    int rc = pt_batch_fill_ids(b, d->ds, d->graphs, packs, ids, (int32_t)n, target);
    if (rc == PT_BATCH_OK) return 0;
    if (rc == PT_BATCH_ENODES || rc == PT_BATCH_EEDGES || rc == PT_BATCH_EGRAPHS) {
        /* name the first offending pack: a packer bug or packs of another run */
        for (uint32_t i = 0; i < n; i++) {
            int64_t g, nodes, edges;
            pt_batch_pack_sizes(d->ds, d->graphs, packs, ids[i], &g, &nodes, &edges);
            if (nodes <= b->limits.max_nodes && edges <= b->limits.max_edges &&
                g <= b->limits.max_graphs)
                continue;
            pt_errors_add(errs, NULL, 0, "batching",
                          "pack %u holds %lld graphs, %lld atoms, %lld edges: over its limits "
                          "of %d, %d, %d",
                          ids[i], (long long)g, (long long)nodes, (long long)edges,
                          b->limits.max_graphs, b->limits.max_nodes, b->limits.max_edges);
            return -1;
        }
    }
    pt_errors_add(errs, NULL, 0, "batching", "cannot fill a batch: %s", pt_batch_strerror(rc));
    return -1;
}
