/* balance.h — a step's micro-batches balanced by their work.
 *
 * A step of G packs runs as G/b micro-batches of b consecutive packs, the
 * replicas in parallel: the step lasts as long as its heaviest micro-batch.
 * Packs of equal node slots differ in their edges (the filter network and
 * the convolution run per edge, ~85% of a water step), so consecutive packs
 * of a shuffled epoch leave one replica waiting for the other: measured
 * 1.3-2% of every step on water and on QM9 at 4 packs per replica.
 *
 * pt_packs_balance reorders the packs inside every full window of G
 * consecutive packs so that its micro-batches carry nearly equal edges:
 * largest pack first onto the lightest micro-batch that still has room (a
 * micro-batch holds exactly b), ties to the lower index, then exchanges of
 * one pack between the heaviest and the lightest micro-batch while that
 * narrows their gap; a window whose heaviest micro-batch would not get
 * lighter stays as it was.  When G/b is a power of two (every "auto"
 * layout: R and A are) the window is instead halved that way, then each
 * half, down to micro-batches of b (a split that would not lighten its
 * heavier half is skipped): replica r takes the aligned block of A
 * micro-batches from r·A, so every power-of-two replica count gets equal
 * shares — water, 2 replicas x 4 micro-batches of 2 packs: a replica waited
 * 1.0-1.7 ms of a 43 ms step for the other with only the micro-batches
 * balanced, 0.24-0.32 ms with halves — and with b = 1 (force jobs) the
 * replicas are balanced too, where single packs cannot be.  With G = 2b
 * both ways are the same.  Each micro-batch keeps its packs in their
 * epoch order.  A step still holds the same packs
 * (same loss denominators, same schedule); only which micro-batch computes
 * which pack moves, so the gradient's rounding does.  The order is a
 * function of the epoch's pack list alone: every engine and every
 * replica/accumulation split of the same G and b sees the same
 * micro-batches, and a resumed run recomputes it.  A window of one
 * micro-batch (G == b) and the epoch's last, partial window are left as
 * they are. */
#ifndef PT_BALANCE_H
#define PT_BALANCE_H

#include <stdint.h>

#include "engine/pack/batch.h"

/* Reorders p's packs in place; edges[s] is structure s's edge count.
 * Returns 0, or -1 when out of memory (p unchanged). */
int pt_packs_balance(pt_packs *p, const uint32_t *edges, uint32_t window, uint32_t per_batch);

/* Sum of edges over the graphs of pack i. */
uint64_t pt_pack_edges(const pt_packs *p, const uint32_t *edges, uint32_t i);

#endif
