/* config.h — the job configuration: one JSON object shared by the CLI
 * (`packtrain train --config job.json`) and the REST API.
 *
 * Parsing fills every missing key with its default, checks types and ranges,
 * rejects unknown keys, and reports ALL problems at once into a pt_errors list
 * whose `field` is the JSON path of the offending value ("model.hidden",
 * "training.split[1]", "training.schedule.factor").  pt_job_config_to_json
 * gives back the canonical form (every key present, defaults filled) that the
 * server stores and hashes for idempotent submissions.
 *
 * Defaults (issue 3's example): target "energy_U0"; model H=F=100, T=4, G=25,
 * cutoff 6 Å, max_neighbors "auto", readout sum; batching lpfhp with auto
 * max_nodes/max_edges/max_graphs and model_batch_size "auto" (a global batch
 * of PT_JOB_AUTO_GLOBAL_PACKS = 16 packs, about 32 QM9 molecules at the auto
 * pack size, split over the replicas: plan.h); training 25 epochs, no max_steps, adam
 * (weight decay 0; 0.01 when the optimizer is adamw, as in PyTorch), lr 1e-3,
 * no clipping, constant schedule, no early stopping, split 0.8/0.1/0.1, seed
 * 0, atomref normalisation, a step line every 10 steps, a checkpoint every 200
 * steps (and at every epoch end), precision "fp32" ("bf16" needs AVX512-BF16,
 * which the parser does not check: see pt_train_check_cpu); backend ipu-emulated,
 * replication_factor "auto" (one single-threaded replica per core: plan.h),
 * A = D = 1, merged all-reduce, async loader with prefetch depth 3,
 * 900 MB per replica (one Bow IPU), threads auto (all cores), 1 rank.
 * Kind "mpi" (engine/mpi/mpi_backend.h) runs `ranks` processes; there
 * replication_factor counts the replicas of all ranks and, when given, must
 * be a multiple of ranks ("auto": one replica per rank); any other kind
 * needs ranks = 1.
 *
 * model.max_neighbors: the neighbours each atom keeps (the nearest) — an
 * integer 1..1024; "all", every neighbour within the cutoff (null, its
 * spelling before "all" existed, is still read and prints as "all"); or
 * "auto", the default, which the plan (plan.h) resolves on the dataset:
 * "all" for a job that trains on forces or stress (SchNetPack and NequIP
 * keep every neighbour within the cutoff; a cap makes the energy jump when
 * the set of the nearest k changes, so forces stop being −∂E/∂r there and
 * depend on how ties are broken), PT_JOB_ENERGY_MAX_NEIGHBORS = 32 (PyG's
 * max_num_neighbors) for an energy-only job, whose results are then those
 * of the jobs run before "auto" existed.
 *
 * Top level, besides the sections: max_runtime_seconds (null, or seconds >
 * 0), printed in the canonical form only when set; forces_key ("forces").
 *
 * Multi-task (engine/model/schnet.h, heads): instead of `target`, `targets`
 * lists 1..PT_JOB_MAX_TARGETS objects {"key", "level": "graph"|"atom",
 * "weight", "normalize", "readout"}: one shared trunk, one output head per
 * target, L = Σ_k weight_k · MSE_k, each head normalised on its own
 * statistics.  key is required (a dataset key: a per-structure number for
 * graph targets, a per-atom column for atom targets; letters, digits, _ . -,
 * as it names the head's tensors); level "graph", weight 1 (0..1e6),
 * normalize training.normalize's and readout model.readout's by default
 * (atom targets: readout "sum" only, normalize not "atomref"... see
 * config_targets.c).  Forces and stress (training.loss) are −∂/∂r of the
 * first target, which is then the energy: training.loss.energy_weight is
 * targets[0].weight (given both, they must agree).  The canonical form of a
 * job of `targets` lists them with every key filled and has no "target"; a
 * job of `target` prints as before. 
 *
 * training.loss (engine/model/schnet.h, pt_schnet_loss_forces): energy_weight
 * 1, forces_weight "auto", stress_weight 0, energy "auto".  On a dataset
 * with force labels "auto" means NequIP's documented default: forces weight
 * 1 and the energy term per atom ("per_atom"; equal weights then balance as
 * SchNetPack's 0.01/0.99 on total energies does for its ~10-atom MD17
 * molecules, and keep that balance for structures of any size); on one
 * without, forces weight 0 and total energies — a job of the defaults then
 * trains exactly as before the key existed.  The plan (plan.h) resolves
 * "auto" and refuses weights the dataset has no labels for.
 *
 * This parser is THE validator of a job: the REST API, `packtrain train`,
 * `packtrain mpirun --config`, the scheduler and the workers all read a job
 * through it, and every user-facing message about a configuration value
 * comes from here (with what a value means on a dataset and on this machine
 * from the plan, plan.h).  web/js/validate.js mirrors its rules for the
 * dashboard's form; tests/integration/validate_agree.sh holds the two
 * together on the same cases.
 *
 * Real numbers are kept to 15 significant digits, so the canonical JSON is a
 * fixed point: parsing it yields the same values it was printed from. */
#ifndef PT_CONFIG_H
#define PT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "engine/data/dataset.h"
#include "engine/data/normalize.h"   /* pt_norm_kind */
#include "engine/core/errors.h"
#include "engine/train/optim.h"
#include "engine/train/schedule.h"
#include "engine/model/schnet_ops.h"   /* pt_precision */

typedef enum pt_job_readout {
    PT_JOB_READOUT_SUM = 0,
    PT_JOB_READOUT_MEAN = 1
} pt_job_readout;

typedef enum pt_job_batch_method {
    PT_JOB_BATCH_LPFHP = 0,
    PT_JOB_BATCH_TUPLE,
    PT_JOB_BATCH_PAD,
    PT_JOB_BATCH_STATIC64,
    PT_JOB_BATCH_STATIC2N,
    PT_JOB_BATCH_DYNAMIC
} pt_job_batch_method;

typedef enum pt_job_backend_kind {
    PT_JOB_BACKEND_IPU_EMULATED = 0,
    PT_JOB_BACKEND_MPI
} pt_job_backend_kind;

/* model.max_neighbors' words (the integers 1..1024 are themselves). */
#define PT_JOB_NEIGHBORS_ALL 0      /* = PT_GRAPH_UNLIMITED: every neighbour within the cutoff */
#define PT_JOB_NEIGHBORS_AUTO (-1)  /* all when training on forces or stress, else 32 */
/* What "auto" means for an energy-only job: PyG's max_num_neighbors. */
#define PT_JOB_ENERGY_MAX_NEIGHBORS 32

typedef struct pt_job_model {
    int32_t hidden;          /* H, 2..4096 */
    int32_t filters;         /* F, 1..4096 */
    int32_t interactions;    /* T, 1..PT_SCHNET_MAX_INTERACTIONS (16) */
    int32_t gaussians;       /* G, 2..1024 */
    double cutoff;           /* Å, (0, 100] */
    int32_t max_neighbors;   /* 1..1024, PT_JOB_NEIGHBORS_ALL ("all" or null) or
                                PT_JOB_NEIGHBORS_AUTO ("auto", the default; plan.h) */
    pt_job_readout readout;
} pt_job_model;

typedef struct pt_job_batching {
    pt_job_batch_method method;
    int32_t max_nodes;         /* 0 = "auto" */
    int32_t max_edges;         /* 0 = "auto" */
    int32_t max_graphs;        /* 0 = "auto" */
    int32_t model_batch_size;  /* packs per micro-batch; 0 = "auto" (plan.h) */
} pt_job_batching;

/* training.loss.energy: the energy term's form (engine/model/schnet.h,
 * pt_schnet_loss_weights.energy_per_atom). */
typedef enum pt_job_energy_loss {
    PT_JOB_ENERGY_AUTO = 0,    /* "auto": per_atom when forces or stress are trained, else total */
    PT_JOB_ENERGY_TOTAL,       /* "total": (E - E_ref)² */
    PT_JOB_ENERGY_PER_ATOM     /* "per_atom": ((E - E_ref)/n_atoms)², NequIP's PerAtomMSELoss */
} pt_job_energy_loss;

/* forces_weight "auto" (plan.h resolves it on the dataset). */
#define PT_JOB_WEIGHT_AUTO (-1.0)

/* training.loss: L = w_E MSE(E) + w_F MSE(F components) + w_S MSE(σ components),
 * in target units (eV, or eV/atom per atom; eV/Å; eV/Å³). */
typedef struct pt_job_loss {
    double energy_weight;          /* w_E in [0, 1e6], default 1 */
    double forces_weight;          /* w_F in [0, 1e6], or PT_JOB_WEIGHT_AUTO (the default) */
    double stress_weight;          /* w_S in [0, 1e6], default 0 */
    pt_job_energy_loss energy;     /* default auto */
} pt_job_loss;

typedef struct pt_job_training {
    int32_t epochs;
    int64_t max_steps;                  /* 0 = null (no limit) */
    pt_optim_kind optimizer;
    double lr;
    double weight_decay;
    double clip_grad_norm;              /* 0 = null (no clipping) */
    pt_schedule_params schedule;        /* .lr mirrors lr; .total_steps set by training */
    int32_t early_stopping_patience;    /* 0 = null (never stop early) */
    double split[3];                    /* train, validation, test */
    uint64_t seed;                      /* 0 .. 2^63-1 */
    pt_norm_kind normalize;
    int32_t log_every;                  /* optimizer steps between step lines */
    int32_t checkpoint_every;           /* optimizer steps between checkpoints; 0 = null
                                           (only at epoch ends and when stopped) */
    pt_precision precision;             /* of the model's matrix products, in training
                                           and in the job's own evaluations */
    pt_job_loss loss;                   /* what the optimizer minimises */
} pt_job_training;

typedef struct pt_job_backend {
    pt_job_backend_kind kind;
    int32_t replication_factor;   /* R; 0 = "auto" (plan.h) */
    int32_t gradient_accumulation;/* A */
    int32_t device_iterations;    /* D */
    bool merge_all_reduce;
    bool use_async_loader;
    bool static_shapes;           /* compute every slot, as an IPU's static program
                                     would: the filter network on every edge slot,
                                     padding included (default false: once per
                                     bond, padding edges skipped; engine/pack/edge_rows.h) */
    int32_t prefetch_depth;
    int32_t device_memory_mb;
    int32_t threads;              /* 0 = "auto" (all cores) */
    int32_t ranks;                /* MPI processes (kind "mpi"), 1 otherwise */
    int32_t zero_stage;           /* ZeRO 0-3 (engine/backend/backend_zero.h): 1 Adam state
                                     sharded over the replicas, 2 + gradients
                                     reduce-scattered, 3 + parameters sharded */
    bool offload_optimizer;       /* Adam state in host (streaming) memory, streamed
                                     through the device per step; needs zero_stage >= 1 */
} pt_job_backend;

/* The global batch of a job whose model_batch_size is "auto": packs per
 * optimizer step (≈32 QM9 molecules at the auto pack size), split over the
 * replicas (plan.h). */
#define PT_JOB_AUTO_GLOBAL_PACKS 16

/* Packs of one optimizer step, and batch buffers, one process may hold. */
#define PT_JOB_MAX_STEP_PACKS (1 << 30)

#define PT_JOB_MAX_TARGETS 16   /* = PT_SCHNET_MAX_HEADS */

typedef enum pt_job_level {
    PT_JOB_LEVEL_GRAPH = 0,  /* one number per structure */
    PT_JOB_LEVEL_ATOM        /* one number per atom */
} pt_job_level;

/* One entry of `targets`: one output head. */
typedef struct pt_job_target {
    char key[PT_KEY_MAX];
    pt_job_level level;
    double weight;            /* w_k in [0, 1e6] */
    pt_norm_kind normalize;
    pt_job_readout readout;   /* graph targets; PT_JOB_READOUT_SUM for atom targets */
} pt_job_target;

typedef struct pt_job_config {
    char target[PT_KEY_MAX];      /* the single target, or targets[0].key */
    int32_t n_targets;            /* 0: a job of `target`; 1..16: of `targets` */
    pt_job_target targets[PT_JOB_MAX_TARGETS];
    char forces_key[PT_KEY_MAX];  /* the force labels: "forces" (the default), the
                                     dataset's per-atom forces (plan.h) */
    pt_job_model model;
    pt_job_batching batching;
    pt_job_training training;
    pt_job_backend backend;
    double max_runtime_seconds;   /* wall-clock limit of one run; 0 = null (none of its
                                     own: the server's --max-runtime applies).  The
                                     server's scheduler enforces it; a local
                                     `packtrain train` stops there as if by Ctrl-C */
} pt_job_config;

/* The defaults listed above. */
void pt_job_config_defaults(pt_job_config *cfg);

/* Fills cfg from a parsed JSON object (defaults first, then the keys given).
 * Returns 0, or -1 with every problem added to errs (`file` names the source
 * in the errors, may be NULL). */
int pt_job_config_from_json(pt_job_config *cfg, const json_t *root, const char *file,
                            pt_errors *errs);

/* Parses JSON text of length len; syntax errors carry line and column. */
int pt_job_config_parse(pt_job_config *cfg, const char *text, size_t len, const char *file,
                        pt_errors *errs);

/* Reads and parses the file at path. */
int pt_job_config_load(pt_job_config *cfg, const char *path, pt_errors *errs);

/* Canonical JSON object of cfg (new reference, NULL when out of memory). */
json_t *pt_job_config_to_json(const pt_job_config *cfg);

/* Canonical text: compact, keys sorted; malloc'd, caller frees.  Equal
 * configurations give byte-identical text. */
char *pt_job_config_dump(const pt_job_config *cfg);

/* Names used in the JSON, for messages and metrics. */
const char *pt_job_batch_method_name(pt_job_batch_method m);
const char *pt_job_normalize_name(pt_norm_kind n);
const char *pt_job_precision_name(pt_precision p);
const char *pt_job_energy_loss_name(pt_job_energy_loss e);
const char *pt_job_level_name(pt_job_level l);

/* The job's targets whatever its form: a job of `target` has one, {target,
 * graph, training.loss.energy_weight, training.normalize, model.readout}. */
int pt_job_config_n_targets(const pt_job_config *cfg);
pt_job_target pt_job_config_target(const pt_job_config *cfg, int k);
/* 1 when the model has named heads (engine/model/schnet.h): several targets,
 * or one per atom; a single graph target is PyG's single head, whichever
 * form the job gives it in. */
int pt_job_config_multi_head(const pt_job_config *cfg);
const char *pt_job_readout_name(pt_job_readout r);

#endif
