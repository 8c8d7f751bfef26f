/* cfconv_kernels.h — which implementation runs the continuous-filter
 * convolution (pt_cfconv_forward_range / pt_cfconv_backward_range /
 * pt_cfconv_backward_senders of schnet_ops.h, the whole-batch
 * pt_cfconv_forward / pt_cfconv_backward, and the force passes'
 * pt_cfconv_tangent / pt_cfconv_backward2):
 * register-resident kernels for AVX-512 and for AVX2 + FMA, chosen at run
 * time like the sgemm kernels (sgemm_kernels.h), and the generic loops
 * (PT_SIMD_CLONES) for CPUs with neither.
 *
 * Numerics: per element the same operations in the same order whatever the
 * implementation, so the results are bit for bit those of the scalar
 * reference (tests/unit/test_cfconv_kernels.c):
 *   m_i   = 0, then m_i = fma(x_j, W_u, m_i) over i's edges in CSR order;
 *   dP_u  = (dm_i · x_j) · C_u for the row's first edge, then
 *           dP_u = fma(dm_i · x_j, C_u, dP_u) for the others;
 *   dx_j  = fma(dm_i, W_u, dx_j) over the edges in receiver order.
 *
 * The backward by senders (pt_cfconv_backward_senders; the model's, since
 * the lists are built once per batch: schnet_acts' snd_* arrays) walks
 * sender j's edges in receiver order with x_j and dx_j in registers, so
 * dx_j is the same chain of fmas without its 14 loads and stores per edge.
 * A row's two edges (a bond both ways, edge_rows.h) now come in the other
 * order — its other edge (receiver j, sender i) has the smaller sender —
 * so that edge only adds to dx_i, and the first edge (receiver i, sender
 * j), later, forms both products, t2 = dm_j ⊙ x_i (dm_j held in registers
 * with x_j and dx_j) and t1 = dm_i ⊙ x_j, as fma(t2, C_u, t1·C_u)
 * ("combine"): the operands and operations of the receiver-order dP_u, so
 * the bits are unchanged.  (Until session 7 the other edge left t2 in the
 * dP row and the first edge read it back: a row of stores, its eviction
 * and reload per bond; x_i's row is read instead, 9-12% less backward:
 * docs/performance.md.)  An edge whose row is its own (or whose other
 * edge is an image of the same atom, which comes later in the same list)
 * writes or adds as before.  Ranges end at
 * boundaries no edge crosses (structure ends), so each list is walked in
 * one piece.  bench/cfconv_rate, water, AVX-512 (load 2-3): 13.9 against
 * 15.1-16.8 ns per edge for the receiver-order kernel on the same packs.
 * The AVX-512 kernel reads each edge's row, receiver, dP row, part and
 * cutoff from one 16-byte entry in list order (schnet_ops.h's
 * pt_cfconv_sender_edges, made once per batch), not through se → row,
 * dst, first → row_last, cut: the same operations on the same operands,
 * so the same bits; 16.2-17.3 → 14.0-14.6 ns an edge warm, 24-27 → 22-24
 * in the pipeline (docs/performance.md, session 12 bwd).
 *
 * The backward by rows (pt_cfconv_backward_rows; the model's for fp32 W
 * since session 13 and, as cfconv_bf16.h's, for bf16's W̃ rows since
 * session 17, the walk by senders staying for batches with a row of three
 * edges) walks each filter row once, both its
 * edges together: W_u read once in ascending order, dP_u written once into
 * the chunk's scratch (no ring), dm_i, x_i and dx_i's accumulator in
 * registers across receiver i's rows (contiguous: edge_rows.h), dx_j in
 * memory.  dP's operations are the above (the same bits); dx_k sums its
 * terms in ascending row order, which is receiver order except where a
 * one-sided row of a truncated neighbour list (or an atom's image) comes
 * later: fp32 bits move there, within 2·γ(n)·Σ|dm ⊙ W| of the receiver
 * order's sum of n terms (measured on water: ≤ 0.07 of that bound;
 * tests/unit/test_cfconv_rows.c, test_schnet_edges.c).  Every
 * implementation forms the same bits, however the rows are cut into calls.
 * bench/cfconv_rate, water, AVX-512 pipeline: backward ≈ 26 -> ≈ 16 ns an
 * edge (docs/performance.md, session 13 rows).
 *
 * The force passes' convolution (schnet_ops.h) runs here too:
 * pt_cfconv_tangent keeps ṁ_i in registers (receiver order, like the
 * forward), pt_cfconv_backward2 walks senders with x_j, ẋ_j and x̂_j in
 * registers (AVX-512; AVX2 and generic run the generic sender loop, which
 * gcc vectorises).  Both replace loops schnet_ops_forces.c built with
 * fp-contract=fast, and form per element the operations gcc made of them
 * (written out: ṁ + fma(ẋ, W, x·(W'·λ)); P̂ (=|+) fma(s, C, t·Ċ), ...), so
 * the bits are those of the loops they replace (compared with the old
 * object on widths 1-515, with and without ẋ, every implementation).
 *
 * The bound (per real edge, F = 100 floats; a Zen 5 core here at ~4.2 GHz:
 * 2 FMA pipes, 2 vector loads and 1 vector store per cycle from L1, at most
 * 64 B per cycle from L2, ~14 cycles L2 latency; L1 48 KB, L2 1 MB):
 *   forward   reads x_j and W_u (800 B: 14 vector loads, the 7th of each
 *             masked to 4 lanes), 7 FMAs; m_i in 7 registers, stored once
 *             per receiver.  From L1: 7 cycles (loads).  But W_u comes from
 *             L2 (a structure's rows, ~400 KB for water, exceed L1) and so
 *             does part of x (a water pack's x is 141 × 400 B = 56 KB):
 *             400-800 B at 64 B per cycle, 6-12.5 cycles.
 *   backward  reads x_j, W_u, dx_j, dP_u (not on the row's first edge),
 *             writes dx_j and dP_u: 28 loads + 14 stores, 21 multiplies
 *             or FMAs, dm_i in 7 registers.  From L1: 14 cycles (stores);
 *             with W_u and dP_u from L2, 25 cycles.
 * So ≈ 3 ns forward and 6 ns backward per edge at best.  The generic loops
 * keep m_i in memory: each edge's FMA reloads what the previous edge stored
 * (line-split vectors: a 100-float row starts 16 B off a cache line).
 * bench/cfconv_rate.c prints the measured ns and cycles per edge of each
 * implementation against these bounds; docs/performance.md has the figures
 * (the backward stays 2-4x above its bound) and what was tried.  */
#ifndef PT_CFCONV_KERNELS_H
#define PT_CFCONV_KERNELS_H

typedef enum pt_cfconv_impl {
    PT_CFCONV_AUTO = 0,   /* the widest kernel the CPU runs */
    PT_CFCONV_GENERIC,    /* the PT_SIMD_CLONES loops (m_i in memory) */
    PT_CFCONV_AVX512,
    PT_CFCONV_AVX2        /* AVX2 + FMA */
} pt_cfconv_impl;

/* 1 when this CPU (and OS) can run impl; AUTO and GENERIC always. */
int pt_cfconv_supported(pt_cfconv_impl impl);

/* What runs now: AVX512 where the CPU has it, else AVX2 + FMA, else
 * GENERIC; PACKTRAIN_CFCONV=generic | avx512 | avx2 | auto in the
 * environment (read once) or pt_cfconv_force choose another, and a kernel
 * the CPU lacks falls back to the policy. */
pt_cfconv_impl pt_cfconv_choice(void);

/* Forces impl for every later call of the process (AUTO restores the
 * policy and the environment's choice); tests and benches compare
 * implementations with it in one binary.  Not for use while a step runs. */
void pt_cfconv_force(pt_cfconv_impl impl);

/* "auto", "generic", "avx512", "avx2". */
const char *pt_cfconv_impl_name(pt_cfconv_impl impl);

#endif
