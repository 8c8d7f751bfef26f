/* plan.h — what a valid job configuration means on one dataset on this
 * machine, decided in one place: pt_train_plan_init serves the submission
 * check (engine/run: pt_run_check, through server/api/job_check.c) and the
 * training loop (train.c) alike, so "auto" values resolve at submission to
 * exactly what the worker will use, and a job that cannot train is refused
 * before it is queued.  In order:
 *
 *   target        the dataset has the numeric key cfg->target, on every
 *                 structure (none is silently left out); for a job of
 *                 `targets`, every graph target's key the same way (errors at
 *                 targets[k].key), an atom target a per-atom column of that
 *                 name: a dataset keeps none but forces, so it is refused;
 *   loss          training.loss with "auto" resolved on the dataset (config.h):
 *                 forces weight 1 and energies per atom when some structure
 *                 has force labels, else 0 and total energies; a weight the
 *                 dataset has no labels for, or a forces_key that names none,
 *                 is refused (training.loss.forces_weight,
 *                 training.loss.stress_weight, forces_key);
 *   graphs        radius graphs of model.cutoff / max_neighbors: built, or
 *                 only their edges counted (the submission check);
 *                 max_neighbors "auto" resolved with the loss: every
 *                 neighbour within the cutoff for a job trained on forces or
 *                 stress, PT_JOB_ENERGY_MAX_NEIGHBORS otherwise.  The edge
 *                 counts are the dataset's own at that setting, so the
 *                 packers' max_edges ("auto" or given) and the memory plan
 *                 (engine/backend/memplan.h) see every edge a pack will
 *                 hold — untruncated lists of dense cells included;
 *   split         training.split with training.seed over all structures,
 *                 then every element of validation and test also put into
 *                 training (pt_split_cover_elements);
 *   packers       one per part, batching.method with its limits, "auto"
 *                 resolved on each part, so every validation graph fits its
 *                 packs too; the packer's fields come out as "batching.*";
 *   layout        R, A, b, ranks and threads (below).
 *
 * Messages name the configuration's keys (the validator, config.c, checks
 * the values themselves; this the fit with a dataset and a machine).
 *
 * The layout: how the global batch of one optimizer step is computed.
 *
 *   global batch  G = R·A·b packs, the unit of an optimizer step (train.h)
 *   R  replicas   backend.replication_factor, counted over all ranks
 *   A             backend.gradient_accumulation: micro-batches per replica
 *   b             batching.model_batch_size: packs per micro-batch
 *   N  ranks      backend.ranks: processes (kind "mpi"), R/N replicas each
 *   threads       backend.threads: cores of each process ("auto": this
 *                 host's online cores)
 *
 * "auto" (the defaults of replication_factor and model_batch_size) is the
 * layout measured fastest on CPUs (bench/bench_layout.sh, README): one
 * single-threaded replica per core, the global batch fixed.
 *   R auto   kind "mpi": N (one replica per rank, the rank's cores its BLAS
 *            threads); with model_batch_size given: 1 (the global batch is
 *            then A·b, as before "auto" existed); otherwise the largest
 *            power of two <= threads and <= 16 / A (so that R·A divides the
 *            global batch);
 *   b auto   16 / (R·A) packs, at least 1: with both auto the global batch
 *            is PT_JOB_AUTO_GLOBAL_PACKS = 16 packs whatever the machine, as
 *            long as A is a power of two <= 16 (R and A powers of two also
 *            keep every split of it one pairwise reduction tree).
 *            A job trained on forces: 1 pack, and each replica runs
 *            16 / (R·A) times as many micro-batches instead (A·16/(R·A)):
 *            the same global batch and optimizer step, but the force step's
 *            arena (about twice an energy step's) stays in cache — on water
 *            clusters a step of micro-batches of 1 pack ran ~1.5x faster than
 *            of 8, in 1/8 of the memory (bench/bench_forces.sh,
 *            docs/forces.md).
 *            Large packs: while one per-edge array of a micro-batch,
 *            b x max_edges x filters floats, is above
 *            PT_PLAN_MICRO_EDGE_BYTES and b is even, b halves and A
 *            doubles: the same global batch, summed as more micro-batches.
 *            A block's filter pipeline streams several such arrays; at
 *            a few MB each they stay in a core's share of the L3.  Water
 *            (4,500 edge slots per pack): 8 packs -> 2 x 4 micro-batches
 *            of 2, two replicas' CPU per step 84.4-85.5 -> 81.9-83.6 ms in
 *            fp32, 60.6-61.0 -> 59.0 in bf16 (packtrain bench, loaded
 *            machine; docs/performance.md "Session 7"); QM9 (826 edge
 *            slots) keeps b = 8 on 2 cores and 16 on one.
 * So the global batch never depends on the machine: a default job takes the
 * same optimizer steps on 1 core or 64, and its numbers differ across core
 * counts only by float rounding (a micro-batch of 8 packs sums its
 * gradients in another order than one of 16).  Set both keys to pin the
 * split too: the global batch is then R·A·b.
 *
 * Gradient engines are opened with a layout (pt_train_data.layout), never
 * with a modified copy of the configuration: the MPI backend gives each
 * rank's emulated backend the layout {ranks 1, replicas R/N, ...}. */
#ifndef PT_PLAN_H
#define PT_PLAN_H

#include <stdint.h>

#include "engine/core/errors.h"
#include "engine/data/dataset.h"
#include "engine/data/split.h"
#include "engine/graph/graph.h"
#include "engine/pack/packing.h"
#include "engine/model/schnet.h"
#include "engine/train/config.h"

typedef struct pt_train_layout {
    int32_t ranks;          /* N: processes computing each step (1 unless kind "mpi") */
    int32_t replicas;       /* R: replicas of all those processes together */
    int32_t accumulation;   /* A */
    int32_t micro_packs;    /* b */
    int32_t threads;        /* cores of each process, >= 1 */
    /* ZeRO (backend.zero_stage): the data-parallel group the shards are cut
     * over — the replicas of all ranks — and this process's first replica in
     * it.  0 and 0 (what the plan gives) mean this process is the group. */
    int32_t shard_replicas;
    int32_t shard_first;
} pt_train_layout;

/* Packs per optimizer step, R·A·b. */
int64_t pt_train_layout_global_packs(const pt_train_layout *l);

/* This host's online cores (at least 1). */
int pt_online_cores(void);

/* Bytes of one per-edge array (b x max_edges x filters floats) a
 * micro-batch of "auto" size stays within, when halving b can (above). */
#define PT_PLAN_MICRO_EDGE_BYTES (6 << 20)

/* The layout of a valid cfg on this machine (cores: this host's, as
 * pt_online_cores gives them; forces: the job's steps compute forces,
 * pt_train_loss.forces; max_edges: the training packs' edge slots,
 * pt_pack_limits.max_edges, 0 when not known: no halving for large packs).
 * Returns 0, or -1 with errs filled. */
int pt_train_layout_resolve(pt_train_layout *l, const pt_job_config *cfg, int cores, int forces,
                            int32_t max_edges, pt_errors *errs);

/* What the optimizer minimises on this dataset (training.loss resolved). */
typedef struct pt_train_loss {
    pt_schnet_loss_weights w;   /* weights and the energy term's form (head 0's) */
    int32_t heads;              /* K: the job's targets (1 for a job of `target`) */
    double head_weight[PT_JOB_MAX_TARGETS]; /* w_k; head_weight[0] = w.energy */
    uint8_t head_atom[PT_JOB_MAX_TARGETS];  /* 1: head k is atom-level (head 0 too: then
                                               w.energy weighs its per-atom MSE) */
    int forces;                 /* 1: steps and evaluations compute forces (and stress):
                                   w.forces or w.stress above 0 */
    uint32_t with_forces;       /* structures with force labels */
    uint32_t with_stress;       /* structures with a stress label and a cell periodic
                                   along a, b and c */
} pt_train_loss;

/* The dataset's labels counted and cfg's training.loss resolved on them.
 * Returns 0, or -1 with errs filled (fields as above). */
int pt_train_loss_resolve(pt_train_loss *out, const pt_job_config *cfg, const pt_dataset *ds,
                          pt_errors *errs);

/* model.max_neighbors as the neighbour lists use it: the integer, or
 * PT_GRAPH_UNLIMITED for "all"; "auto" is PT_GRAPH_UNLIMITED when `forces`
 * (the job trains on forces or stress: pt_train_loss.forces), else
 * PT_JOB_ENERGY_MAX_NEIGHBORS. */
int32_t pt_train_max_neighbors(const pt_job_config *cfg, int forces);

/* The model a job trains: SchNet of model.* (max_neighbors resolved as
 * above: the model file records what the graphs used), PyG's single head
 * for one graph target (its file loads into PyG), a named head per target
 * for several targets or an atom-level one (engine/model/schnet.h); each
 * head's readout and atomref from its target's readout and normalize. */
pt_schnet_config pt_train_model_config(const pt_job_config *cfg, int forces);

/* Whether structure s has force labels (the loss counts its atoms) and a
 * stress label on a fully periodic cell. */
int pt_train_has_forces(const pt_dataset *ds, uint32_t s);
int pt_train_has_stress(const pt_dataset *ds, uint32_t s);

typedef struct pt_train_plan {
    uint32_t target_key;           /* head_key[0]: into ds->targets, or ds->atom_cols
                                      when loss.head_atom[0] */
    int32_t n_heads;               /* the job's targets, one head each */
    uint32_t head_key[PT_JOB_MAX_TARGETS]; /* [n_heads] their indices into ds->targets,
                                            * an atom head's into ds->atom_cols */
    pt_train_loss loss;
    uint32_t n_structs;
    int32_t max_neighbors;         /* model.max_neighbors resolved (pt_train_max_neighbors) */
    uint32_t *natoms, *nedges;     /* [n_structs] sizes of every structure's graph */
    pt_graphs graphs;              /* built with PT_PLAN_GRAPHS */
    int has_graphs;
    pt_split split;
    uint32_t split_moved;          /* structures swapped into training */
    pt_packer train_pk, val_pk, test_pk;   /* test_pk only when split.n_test */
    pt_train_layout layout;
} pt_train_plan;

enum { PT_PLAN_COUNT_EDGES = 0, PT_PLAN_GRAPHS = 1 };

/* Plans a valid cfg on ds (graphs: PT_PLAN_GRAPHS to build the neighbour
 * lists, PT_PLAN_COUNT_EDGES to count their edges only), with this host's
 * `cores`.  Returns 0, or -1 with errs filled (p is then closed). */
int pt_train_plan_init(pt_train_plan *p, const pt_job_config *cfg, const pt_dataset *ds,
                       int graphs, int cores, pt_errors *errs);
void pt_train_plan_close(pt_train_plan *p);

#endif
