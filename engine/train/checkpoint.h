/* checkpoint.h — everything a training run needs to continue exactly where
 * it stopped, in one file.
 *
 * A checkpoint is a safetensors file (engine/safetensors.h): four F32
 * tensors of the flat parameter layout — "params" (the model now), "adam.m",
 * "adam.v" (the optimizer's moments) and "best" (the best-by-validation
 * parameters) — and every scalar of the run's state as a string in
 * __metadata__ (doubles printed with 17 significant digits, so they read
 * back bit for bit).  The data order needs no random-number state: an
 * epoch's packs are a pure function of (seed, epoch), so (epoch, position in
 * the epoch's pack list) is the whole of it.
 *
 * Guards:
 *   - "format" names this layout; another value is refused;
 *   - "state_crc32" is a CRC-32 over every metadata value (in a fixed order)
 *     and the tensor bytes, so a flipped bit anywhere is caught, not trained on;
 *   - "config_sha256" is the SHA-256 of the job's canonical configuration
 *     (pt_job_config_dump) with training.checkpoint_every and
 *     max_runtime_seconds left out, since how often to checkpoint and how
 *     long a run may take do not change what is trained, and with
 *     training.precision left out when it is "fp32", so checkpoints made
 *     before that key existed keep their hash; the training loop refuses a
 *     checkpoint of another configuration;
 *   - "data_crc32" with the structure and split counts identifies the dataset.
 *
 * Keys added after the format's first release (the forces jobs' sums and
 * errors) are optional on reading: a checkpoint written before them holds an
 * energy-only run, for which their absence means 0 (sums) or NaN (errors),
 * and its CRC covers the keys it has.
 *
 * Writing is atomic and durable: PATH.partial is written, fsync'ed, renamed
 * over PATH, and the directory is fsync'ed, so after pt_checkpoint_save
 * returns the file survives a crash and a reader never sees half of it. */
#ifndef PT_CHECKPOINT_H
#define PT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/train/config.h"
#include "engine/data/dataset.h"
#include "engine/core/errors.h"
#include "engine/core/safetensors.h"

#define PT_CHECKPOINT_FORMAT "packtrain-checkpoint-1"
#define PT_CHECKPOINT_HASH_HEX 64
#define PT_CHECKPOINT_REASON_MAX 32

/* Totals of the optimizer steps since a metrics line (train.c's windows). */
typedef struct pt_checkpoint_window {
    double loss_sum, seconds;
    int64_t graphs, nodes, node_slots, edges, edge_slots, steps;
    double forces_sse, stress_sse;               /* forces jobs */
    int64_t force_components, stress_components;
    double heads_loss_sum;                       /* multi-task jobs */
} pt_checkpoint_window;

typedef struct pt_checkpoint_state {
    /* identity of the run */
    char config_sha256[PT_CHECKPOINT_HASH_HEX + 1];
    uint32_t data_crc32, n_structs, n_train, n_val, n_test;
    /* where training stands: the next optimizer step takes packs from
     * `position` on of epoch `epoch`'s list (0-based; position may equal the
     * list's length: the epoch's evaluation is still to do) */
    int32_t epoch;
    uint32_t position;
    int64_t steps;            /* optimizer steps done */
    int64_t lines;            /* metrics lines emitted */
    double seconds;           /* training wall time so far */
    char stop_reason[PT_CHECKPOINT_REASON_MAX];  /* "" while training goes on */
    /* optimizer (moments are tensors) */
    int64_t optim_step;
    /* learning-rate schedule (its parameters come from the configuration) */
    double sched_lr, sched_best;
    int64_t sched_step;
    int32_t sched_bad_epochs, sched_cooldown, sched_reductions;
    /* early stopping */
    double early_best;
    int32_t early_bad_epochs;
    /* results so far */
    int32_t epochs_done, best_epoch;
    double best_val_loss, best_val_mae, best_val_rmse, first_loss, last_loss, step_seconds;
    double best_val_forces_mae, best_val_forces_rmse, best_val_stress_mae;   /* forces jobs */
    int64_t graphs, nodes, edges, node_slots, edge_slots;
    /* metrics windows still open: the epoch's, and the steps since the last step line */
    pt_checkpoint_window epoch_window, step_window;
    /* target normalisation */
    double norm_mean, norm_std;
    double norm_atomref[PT_Z_MAX + 1];
} pt_checkpoint_state;

/* The flat parameter-layout buffers, n floats each. */
typedef struct pt_checkpoint_tensors {
    size_t n;
    float *params, *adam_m, *adam_v, *best;
} pt_checkpoint_tensors;

/* An opened, verified checkpoint: the state is read, the tensors wait in
 * the file image for pt_checkpoint_tensors_get. */
typedef struct pt_checkpoint {
    pt_checkpoint_state state;
    pt_safetensors file;
    char path[PT_ERR_FILE_MAX];
} pt_checkpoint;

/* Writes s and t to path atomically and durably (see above).  Returns 0,
 * or -1 with the reason in errs (file = path). */
int pt_checkpoint_save(const char *path, const pt_checkpoint_state *s,
                       const pt_checkpoint_tensors *t, pt_errors *errs);

/* Reads path and checks it whole: safetensors structure, format, every
 * state key present and well-formed, the four tensors present as F32
 * vectors of one common length, and the CRC.  Returns 0, or -1 with every
 * problem in errs (file = path, field = the key or tensor); ck is then
 * closed. */
int pt_checkpoint_open(pt_checkpoint *ck, const char *path, pt_errors *errs);
void pt_checkpoint_close(pt_checkpoint *ck);

/* Floats per tensor in an opened checkpoint. */
size_t pt_checkpoint_numel(const pt_checkpoint *ck);

/* Copies the tensors into t's buffers.  Returns 0, or -1 when t->n differs
 * from the checkpoint's (a model of another size). */
int pt_checkpoint_tensors_get(const pt_checkpoint *ck, const pt_checkpoint_tensors *t,
                              pt_errors *errs);

/* Lowercase hex SHA-256 of cfg's canonical text as described above (the
 * training loop passes cfg with model.max_neighbors "auto" resolved on its
 * dataset: train.c).  Returns 0, or -1 when out of memory (out is then ""). */
int pt_checkpoint_config_hash(const pt_job_config *cfg, char out[PT_CHECKPOINT_HASH_HEX + 1]);

/* CRC-32 identifying the training data: atomic numbers, positions and the
 * values of target column `key` (none when key >= ds->n_targets); with `labels` (a forces job) the force and
 * stress labels too (without, the CRC of energy-only runs is unchanged). */
uint32_t pt_checkpoint_data_crc(const pt_dataset *ds, uint32_t key, int labels);
/* CRC-32 of per-atom column `col` (an atom-level target's labels). */
uint32_t pt_checkpoint_atom_col_crc(const pt_dataset *ds, uint32_t col);

#endif
