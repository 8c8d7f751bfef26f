/* cmd_eval_internal.h — what `packtrain eval` (cmd_eval.c) shares with its
 * named-heads part (cmd_eval_heads.c): the parsed arguments and the state of
 * one evaluation.  Not for use outside server/cli. */
#ifndef PT_CMD_EVAL_INTERNAL_H
#define PT_CMD_EVAL_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "engine/data/dataset.h"
#include "engine/graph/graph.h"
#include "engine/model/schnet.h"
#include "engine/pack/batch.h"
#include "engine/pack/packing.h"
#include "engine/core/errors.h"

typedef struct eval_args {
    const char *model, *data, *target, *grads, *forces_key;
    long n;
    int batch_graphs;
    int forces;                 /* --forces-weight or --stress-weight given */
    pt_schnet_loss_weights w;
    int n_head_weights;
    char head_key[PT_SCHNET_MAX_HEADS][PT_SCHNET_KEY_MAX];
    double head_weight[PT_SCHNET_MAX_HEADS];
    int help;
} eval_args;

typedef struct eval_state {
    pt_schnet model;
    pt_dataset ds;
    pt_graphs graphs;
    pt_packs packs;
    pt_batch batch;
    pt_schnet_acts acts;
    float *grads;
    double *pred;
    double *force;      /* [atoms of the n structures, 3] with --forces-weight */
    double *stress;     /* [n, 9] */
    /* a model of named heads: each head's dataset key (an atom head's
     * per-atom column), weight, targets of the batch's graph (node) slots
     * and predictions per structure (per atom of the n structures) */
    uint32_t head_key[PT_SCHNET_MAX_HEADS];
    uint8_t head_atom[PT_SCHNET_MAX_HEADS];
    pt_schnet_head_loss hl[PT_SCHNET_MAX_HEADS];
    double *head_target[PT_SCHNET_MAX_HEADS];  /* [max_graphs] or atom heads [max_nodes] */
    double *head_pred[PT_SCHNET_MAX_HEADS];    /* [n] or atom heads [atoms of the n] */
} eval_state;


/* Each named head's dataset key and weight: a graph head's numeric key, an
 * atom head's per-atom column, on every one of the first n structures;
 * every --head-weight must name a head.  0, or -1 with errs filled. */
int pt_eval_heads_resolve(const eval_args *a, eval_state *st, uint32_t n, pt_errors *errs);
/* Buffers for n structures (after resolve); each head's loss normaliser:
 * the n structures, an atom head's their atoms. */
int pt_eval_heads_alloc(eval_state *st, uint32_t n, pt_errors *errs);
/* After a forward of the batch: every head's targets (hl[k].target) and
 * predictions kept by structure (atom). */
void pt_eval_heads_batch(eval_state *st);
/* {KEY: number (graph head) or [per-atom numbers] (atom head)} of structure s. */
json_t *pt_eval_heads_prediction(const eval_state *st, uint32_t s);
/* {KEY: {"weight","loss","mae","rmse"}} over the n structures (an atom
 * head's over their atoms). */
json_t *pt_eval_heads_summary(const eval_args *a, const eval_state *st, uint32_t n);
/* Head k's MAE and RMSE over the first n structures (per atom for an atom
 * head), against the dataset's labels. */
void pt_eval_heads_errors(const eval_state *st, int k, uint32_t n, double *mae, double *rmse);
/* Atom head k's values for structure s as a JSON array: its predictions, or
 * with `labels` the dataset's column. */
json_t *pt_eval_heads_atoms(const eval_state *st, int k, uint32_t s, int labels);
void pt_eval_heads_close(eval_state *st);

#endif
