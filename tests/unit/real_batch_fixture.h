/* real_batch_fixture.h — a real batch for the model tests (header-only;
 * include after <cmocka.h>): a data file ingested, its neighbour graphs
 * (seed 000's model: 6 Å, 32 neighbours), LPFHP packs (epoch seed 7), the
 * first 8 packs filled into one pt_batch with the file's target `target`,
 * and a model of the default shapes with pt_schnet_init_weights(5).
 * Used by test_schnet_edges.c and test_schnet_forces_flush.c. */
#ifndef PT_REAL_BATCH_FIXTURE_H
#define PT_REAL_BATCH_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/ingest.h"
#include "engine/graph/graph.h"
#include "engine/model/schnet.h"
#include "engine/pack/batch.h"
#include "engine/pack/packing.h"

/* ---- a real batch: ingest, neighbour graphs, LPFHP packs, 8 of them ------- */

typedef struct data {
    char ptd[64];
    pt_dataset ds;
    pt_graphs g;
    pt_packer packer;
    pt_packs packs;
    pt_batch b;
    pt_schnet m;
    uint32_t *natoms, *nedges, *ids;
} data;

static void data_open(data *d, const char *src, const char *target)
{
    memset(d, 0, sizeof *d);
    snprintf(d->ptd, sizeof d->ptd, "/tmp/pt-test-real-batch-%ld.ptd", (long)getpid());
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_ingest_options opt;
    pt_ingest_options_init(&opt);
    pt_ingest_report rep;
    assert_int_equal(pt_ingest_files(&src, 1, d->ptd, &opt, &rep, &errs), 0);
    pt_ingest_report_close(&rep);
    char err[256];
    assert_int_equal(pt_dataset_open(&d->ds, d->ptd, err, sizeof err), 0);
    unlink(d->ptd);
    const int key = pt_dataset_find_target(&d->ds, target);
    assert_true(key >= 0);
    pt_schnet_config mc = pt_schnet_config_default();
    pt_graph_params gp = {mc.cutoff, mc.max_neighbors, PT_GRAPH_RADIUS};
    assert_int_equal(pt_graphs_build(&d->g, &d->ds, &gp, &errs), 0);
    const uint32_t n = d->ds.n_structs;
    d->natoms = malloc(n * sizeof(uint32_t));
    d->nedges = malloc(n * sizeof(uint32_t));
    d->ids = malloc(n * sizeof(uint32_t));
    assert_true(d->natoms && d->nedges && d->ids);
    for (uint32_t s = 0; s < n; s++) {
        d->natoms[s] = pt_dataset_natoms(&d->ds, s);
        d->nedges[s] = pt_graphs_nedges(&d->g, s);
        d->ids[s] = s;
    }
    pt_pack_request req = {.method = PT_PACK_LPFHP};
    assert_int_equal(pt_packer_init(&d->packer, &req, d->natoms, d->nedges, n, d->ids, n, &errs),
                     0);
    assert_int_equal(pt_packer_epoch(&d->packer, 7, 0, &d->packs), 0);
    assert_true(d->packs.n_packs >= 8);
    assert_int_equal(pt_batch_init(&d->b, d->packer.limits, 8, mc.cutoff), PT_BATCH_OK);
    assert_int_equal(pt_batch_fill(&d->b, &d->ds, &d->g, &d->packs, 0, 8, key), PT_BATCH_OK);
    assert_int_equal(pt_schnet_init(&d->m, &mc, &errs), 0);
    pt_schnet_init_weights(&d->m, 5);
    pt_errors_close(&errs);
}

static void data_close(data *d)
{
    pt_schnet_close(&d->m);
    pt_batch_close(&d->b);
    pt_packs_close(&d->packs);
    pt_packer_close(&d->packer);
    pt_graphs_close(&d->g);
    pt_dataset_close(&d->ds);
    free(d->natoms), free(d->nedges), free(d->ids);
}

#endif
