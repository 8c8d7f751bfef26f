/* packing.h — grouping graphs into fixed-capacity packs, one epoch at a time.
 *
 * Room engine/pack: packs of graphs and the fixed-shape batches filled from
 * them (batch.h), with each batch's table of which edges share a row of the
 * filter network (edge_rows.h: a property of the edges and the cutoff alone,
 * made by the fill).  Uses engine/core, data and graph; knows no model, job
 * configuration or backend.  Planning is layered: packing.c (this API)
 * resolves "auto" limits (packing_auto.c) before it calls one strategy
 * (packing_lpfhp.c, packing_tuple.c, packing_baselines.c), all on
 * packing_plan.h; no strategy calls back up.
 *
 * A packer is planned once for a set of graph ids (e.g. the training split)
 * from their node and edge counts, then draws each epoch's concrete packs
 * from the seed alone: every id exactly once per epoch, pack order shuffled,
 * the same seed and epoch giving the same packs on any machine.
 *
 * Methods
 *   lpfhp     longest-pack-first histogram packing (Krell et al. 2021) on the
 *             histogram of node counts, max_nodes and max_graphs per pack.  The
 *             plan is a strategy: pack compositions (lists of sizes) x counts;
 *             each epoch fills them by drawing ids from per-size queues
 *             shuffled with the seed.  Edges are not a constraint; the edge
 *             capacity is a bound valid for every draw: the largest, over the
 *             compositions, of the sum of the per-size maximum edge counts.
 *   tuple     tuple packing (after Krell et al. 2022): histogram packing of
 *             (nodes, edges) bins with both limits hard and max_graphs tuples
 *             per pack.  Each pack composition starts with the largest bin
 *             left by a monotone heuristic of (n/N, e/E) (product, sum, max,
 *             min, nodes, edges), then best-fits the histogram bins into the
 *             room: most nodes under the edge room, then edges raised toward
 *             it (details and why in packing_tuple.c); compositions repeat
 *             while their bins last, and epochs draw from per-bin queues.
 *   pad       one graph per pack, padded to the largest graph (nodes, edges).
 *   static64, static2n
 *             jraph-style static batching (as in Speckhard et al. 2025's
 *             jraph_MPEU code): batch_size-1 graphs per batch in shuffled
 *             order, each batch padded to the next multiple of 64 (or power
 *             of two) of its own nodes+1 and edges, batch_size graph slots.
 *   dynamic   jraph.dynamically_batch: a fixed budget n_node, n_edge,
 *             n_graph = batch_size, with n_node/n_edge = next multiple of 64
 *             strictly above max(mean * batch_size, largest graph); graphs are
 *             added in shuffled order until one more would exceed n_node-1
 *             nodes, n_edge edges or n_graph-1 graphs (one node and one graph
 *             are reserved for jraph's padding graph).
 *
 * Efficiency per component: eff = real / (packs x limit), i.e. real over the
 * slots the packs occupy; static methods occupy their own per-batch shape
 * (what a shape-specialised compiler would run), every other method its fixed
 * capacity.  Padding fraction = 1 - eff. */
#ifndef PT_PACKING_H
#define PT_PACKING_H

#include <stdint.h>

#include "engine/pack/packing_plan.h"

/* Plans packs for ids[0..n_ids) (distinct, each < n_structs) whose sizes are
 * natoms[id], nedges[id].  Returns 0, or -1 with every problem added to errs
 * (impossible limits name the graph id and its size). */
int pt_packer_init(pt_packer *pk, const pt_pack_request *req, const uint32_t *natoms,
                   const uint32_t *nedges, uint32_t n_structs, const uint32_t *ids,
                   uint32_t n_ids, pt_errors *errs);
void pt_packer_close(pt_packer *pk);

/* The packs of one epoch: every id exactly once, within pk->limits, order
 * and draws a function of (seed, epoch) only.  `out` must be zeroed or hold a
 * previous epoch (its buffers are reused).  Returns 0, or -1 out of memory. */
int pt_packer_epoch(const pt_packer *pk, uint64_t seed, uint32_t epoch, pt_packs *out);
void pt_packs_close(pt_packs *packs);

/* Packs of consecutive structures in dataset order, `per_pack` graphs each,
 * over structures [0, n): for evaluation and prediction, where order matters
 * and packing efficiency does not.  Limits are the largest pack's atoms and
 * edges plus one spare slot each (padding edges get a node of their own).
 * Returns 0, or -1 with errs filled (out of memory, a pack too large). */
int pt_packs_consecutive(pt_packs *out, const pt_dataset *ds, const pt_graphs *g, uint32_t n,
                         uint32_t per_pack, pt_errors *errs);

/* Efficiency of the plan, measured on the epoch-0 draw of `seed` (only the
 * static and dynamic methods depend on the draw).  Returns 0 or -1 (memory). */
int pt_packer_report(const pt_packer *pk, uint64_t seed, pt_pack_report *out);
/* The same figures for any list of packs of this packer (tests use it to
 * check every epoch). */
void pt_packs_measure(const pt_packer *pk, const pt_packs *packs, pt_pack_report *out);


#endif
