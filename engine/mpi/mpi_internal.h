/* mpi_internal.h — the pure pieces of the MPI backend (mpi_plan.c): how
 * replicas and packs are shared out between ranks, and each rank's view of an
 * epoch's packs.  No MPI calls here, so the unit tests check them in one
 * process, with or without Open MPI.  Not part of the engine's API. */
#ifndef PT_MPI_INTERNAL_H
#define PT_MPI_INTERNAL_H

#include <stdint.h>

#include "engine/pack/batch.h"
#include "engine/core/errors.h"

/* Replicas per rank: `replicas` (R of the layout, counted over all ranks)
 * split evenly over `ranks` (N), which must be the size of the MPI world the
 * process runs in.  Returns 0 with *local set, or -1 with errs filled. */
int pt_mpi_plan_replicas(int32_t ranks, int32_t replicas, int world, int32_t *local,
                         pt_errors *errs);

/* Rank `rank`'s share of a global batch of n packs when every rank takes
 * `per` packs in rank order: [*first, *first + *count), clipped to n (a last
 * partial batch leaves the high ranks fewer packs, or none). */
void pt_mpi_slice(uint32_t n, uint32_t per, int rank, uint32_t *first, uint32_t *count);

/* One rank's packs of an epoch, in the order it will compute them: for each
 * global batch s (G packs from s·G), its slice of `per` packs.  Global batch
 * s then sits at [s·per, s·per + count) of the view, so consecutive steps
 * are consecutive packs there and the emulated backend's prefetch predicts
 * them.  Capacity is fixed at init: building never allocates. */
typedef struct pt_mpi_view {
    pt_packs packs;            /* limits copied from the source */
    uint32_t cap_packs, cap_graphs;
    int valid;                 /* built and not invalidated since */
} pt_mpi_view;

/* Room for cap_packs packs holding cap_graphs graphs in all.  Returns 0, or
 * -1 with errs filled (out of memory). */
int pt_mpi_view_init(pt_mpi_view *v, uint32_t cap_packs, uint32_t cap_graphs, pt_errors *errs);
void pt_mpi_view_close(pt_mpi_view *v);

/* Rebuilds v from src for `rank`.  Returns 0, or -1 (v left invalid) when
 * src does not fit the capacity or G / per are inconsistent. */
int pt_mpi_view_build(pt_mpi_view *v, const pt_packs *src, uint32_t G, uint32_t per, int rank);

/* Whether packs [vfirst, vfirst + n) of a valid view hold the same graphs,
 * in the same order, as packs [sfirst, sfirst + n) of src. */
int pt_mpi_view_matches(const pt_mpi_view *v, uint32_t vfirst, const pt_packs *src,
                        uint32_t sfirst, uint32_t n);

/* FNV-1a over the 32-bit words of n floats: identical parameters on every
 * rank hash alike (the periodic consistency check). */
uint64_t pt_mpi_hash_floats(const float *x, size_t n);

#endif
