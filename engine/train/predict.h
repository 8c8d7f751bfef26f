/* predict.h — energies of structures from a trained model file: the work
 * behind POST /v1/jobs/{id}/predict.
 *
 *   pt_prediction p;
 *   if (pt_predict_dataset(&p, "jobs/J/model.safetensors", &ds, errs) == 0)
 *       ... p.y[s] is structure s's prediction, in the model's target units
 *   pt_prediction_close(&p);
 *
 * The structures are laid out PREDICT_BATCH at a time in one fixed-shape pack
 * each (engine/batch.h's layout) and run through pt_schnet_forward; the
 * neighbour graphs use the model's own cutoff and neighbour cap, read from
 * the file, so predictions match what the trainer computed. */
#ifndef PT_PREDICT_H
#define PT_PREDICT_H

#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/core/errors.h"

#define PT_PREDICT_MAX_HEADS 16   /* = PT_SCHNET_MAX_HEADS */

typedef struct pt_prediction {
    uint32_t n;        /* structures */
    double *y;         /* [n] head 0's (the single head's); NaN when head 0 is
                        * per atom (a job whose first target is per atom):
                        * its predictions are head_y[0] */
    /* a model of named heads (engine/model/schnet.h): every head's, by its
     * key; graph heads [n], atom heads [atoms of the dataset] */
    int32_t n_heads;   /* 0 for PyG's single head */
    char head_key[PT_PREDICT_MAX_HEADS][PT_KEY_MAX];
    int head_atom[PT_PREDICT_MAX_HEADS];   /* 1: per atom */
    double *head_y[PT_PREDICT_MAX_HEADS];
    double cutoff;     /* of the model, Å */
    int32_t hidden, interactions;
} pt_prediction;

/* Returns 0, or -1 with the reason in errs (model file problems, structures
 * too large, out of memory).  p is zeroed on failure. */
int pt_predict_dataset(pt_prediction *p, const char *model_path, const pt_dataset *ds, pt_errors *errs);

/* What one call may cost, for a server answering requests: */
typedef struct pt_predict_options {
    /* the neighbour edges of all structures at the model's cutoff; past it
     * the call fails before any forward pass (0: no limit) */
    uint64_t max_edges;
    /* asked before each pack (may be NULL): nonzero stops the call */
    int (*should_stop)(void *user);
    void *user;
    /* out: 1 when max_edges stopped it, 2 when should_stop did */
    int stopped;
} pt_predict_options;

int pt_predict_dataset_ex(pt_prediction *p, const char *model_path, const pt_dataset *ds,
                          pt_predict_options *o, pt_errors *errs);
void pt_prediction_close(pt_prediction *p);

#endif
