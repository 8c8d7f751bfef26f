/* schnet.h — the SchNet model of PyTorch Geometric, in C, with a hand-written
 * backward pass (torch_geometric/nn/models/schnet.py; equations in schnet.c).
 *
 * Layout follows karpathy/llm.c:
 *   - every trainable tensor lives in ONE flat float buffer (params_memory);
 *     pt_schnet_params is a struct of pointers into it.  Gradients use the
 *     same layout in a caller-owned buffer of n_params floats, so the
 *     optimizer and the all-reduce each see one merged buffer;
 *   - pt_schnet_acts is one arena sized once from the batch's fixed shape;
 *     forward, loss and backward never allocate.
 *
 * Tensor order and names are PyG's SchNet.state_dict() (see the table built by
 * pt_schnet_init), which schnet_io.c writes to and reads from safetensors. */
#ifndef PT_SCHNET_H
#define PT_SCHNET_H

#include <stddef.h>
#include <stdint.h>

#include "engine/pack/batch.h"
#include "engine/core/errors.h"
#include "engine/model/schnet_ops.h"

#define PT_SCHNET_MAX_INTERACTIONS 16
#define PT_SCHNET_ZROWS 100          /* embedding / atomref rows, row 0 = padding */
#define PT_SCHNET_NAME_MAX 64

typedef struct pt_schnet_config {
    int32_t hidden;         /* H, hidden_channels */
    int32_t filters;        /* F, num_filters */
    int32_t interactions;   /* T, num_interactions */
    int32_t gaussians;      /* G, num_gaussians */
    float cutoff;           /* r_c in Å */
    int32_t max_neighbors;  /* max_num_neighbors (used by the neighbour lists) */
    pt_readout readout;     /* sum ("add" in PyG) or mean */
    int32_t use_atomref;    /* 1: trainable per-element table atomref.weight [100,1] */
} pt_schnet_config;

typedef struct pt_schnet_block {
    float *mlp0_w, *mlp0_b;   /* filter net A1 [F,G], a1 [F] */
    float *mlp2_w, *mlp2_b;   /* filter net A2 [F,F], a2 [F] */
    float *conv_lin1_w;       /* L1 [F,H], no bias */
    float *conv_lin2_w;       /* L2 [H,F] */
    float *conv_lin2_b;       /* c2 [H] */
    float *lin_w, *lin_b;     /* L3 [H,H], c3 [H] */
} pt_schnet_block;

typedef struct pt_schnet_params {
    float *embedding;         /* [100,H] */
    pt_schnet_block block[PT_SCHNET_MAX_INTERACTIONS];
    float *lin1_w, *lin1_b;   /* W4 [H/2,H], b4 [H/2] */
    float *lin2_w, *lin2_b;   /* w5 [1,H/2], b5 [1] */
    float *atomref;           /* [100] or NULL */
} pt_schnet_params;

typedef struct pt_schnet_tensor {
    char name[PT_SCHNET_NAME_MAX];   /* PyG state_dict key */
    size_t offset;                   /* in floats, into the flat buffer */
    size_t numel;
    int ndim;
    int64_t shape[2];
} pt_schnet_tensor;

typedef struct pt_schnet {
    pt_schnet_config cfg;
    double mean, std;                /* per-atom o·std + mean, as PyG (0 and 1 = off) */
    float initial_atomref[PT_SCHNET_ZROWS]; /* PyG's initial_atomref buffer */
    size_t n_params;
    float *params_memory;            /* [n_params] */
    pt_schnet_params params;         /* views into params_memory */
    size_t n_tensors;
    pt_schnet_tensor *tensors;       /* [n_tensors], in state_dict order */
} pt_schnet;

typedef struct pt_schnet_block_acts {
    float *sig1, *s1;   /* [rows,F] σ and ssp of A1 e + a1 */
    float *w;           /* [rows,F] filter W = (A2 s1 + a2) ⊙ C */
    float *x, *m;       /* [N,F] x = L1 h, m = Σ x_j ⊙ W */
    float *sig2, *u;    /* [N,H] σ and ssp of L2 m + c2 */
} pt_schnet_block_acts;

/* Where forward and backward spend their time, by kind of work (both
 * passes).  Accumulated only when pt_schnet_acts.profile points to one. */
typedef enum pt_schnet_op {
    PT_SCHNET_OP_EDGE_BASIS = 0, /* e_ij and C_ij */
    PT_SCHNET_OP_FILTER_GEMM,    /* the filter network's products (A1, A2) */
    PT_SCHNET_OP_FILTER_SSP,     /* ssp over E×F and its backward (with a1's gradient) */
    PT_SCHNET_OP_CFCONV,         /* cutoff and a2 fused in, gather, segmented sums, scatter */
    PT_SCHNET_OP_NODE_GEMM,      /* L1, L2, L3, W4, w5 products */
    PT_SCHNET_OP_NODE_SSP,       /* ssp over N×H and N×H/2, and backward */
    PT_SCHNET_OP_OTHER,          /* embedding, residual copies, readout, loss */
    PT_SCHNET_OP_COUNT
} pt_schnet_op;

typedef struct pt_schnet_profile {
    double seconds[PT_SCHNET_OP_COUNT];
    int64_t forwards, backwards;
} pt_schnet_profile;

/* "edge_basis", "filter_gemm", … (snake case of the names above). */
const char *pt_schnet_op_name(pt_schnet_op op);

typedef struct pt_schnet_acts {
    int32_t cap_nodes, cap_edges, cap_graphs;
    /* Optional, set by the caller after pt_schnet_acts_init: */
    pt_schnet_profile *profile;      /* NULL: no timing (the default) */
    pt_precision precision;          /* of the products; FP32 after init */
    int32_t static_shapes;           /* 1: filter rows = edge slots (no sharing,
                                      * padding computed); 0 after init */
    void *memory;                    /* the arena: everything below points into it */
    size_t bytes;
    /* filter rows (engine/edge_rows.h): the filter network runs over
     * n_rows ≤ E rows, one per bond (both directions) at C > 0 */
    int32_t n_rows;
    int32_t *row;                    /* [E] edge → filter row, −1 = no message */
    uint8_t *first;                  /* [E] 1: the row's first edge */
    float *row_dist;                 /* [E] distance of each row */
    float *e, *cut;                  /* [rows,G] Gaussians, [rows] cosine cutoff */
    float *h[PT_SCHNET_MAX_INTERACTIONS + 1]; /* [N,H] input of block t; h[T] feeds the head */
    pt_schnet_block_acts block[PT_SCHNET_MAX_INTERACTIONS];
    float *sig4, *q;                 /* [N,H/2] σ and ssp of W4 h + b4 */
    float *o;                        /* [N] per-atom output before std/mean/atomref */
    double *y;                       /* [graphs] predictions, target units */
    double *dy;                      /* [graphs] dL/dy, set by pt_schnet_loss */
    int32_t *count;                  /* [graphs] real atoms per slot */
    /* backward scratch */
    float *dh, *du;                  /* [N,H] */
    float *dm, *dx;                  /* [N,F] */
    float *dp, *ds1;                 /* [rows,F] */
    float *dq;                       /* [N,H/2] */
    float *dout;                     /* [N] */
} pt_schnet_acts;

/* The setting of seed 000 (H=F=100, T=4, G=25, 6 Å, 32 neighbours, sum). */
pt_schnet_config pt_schnet_config_default(void);

/* Reports every out-of-range hyper-parameter (field = its name); 0 if valid. */
int pt_schnet_config_check(const pt_schnet_config *cfg, pt_errors *errs);

/* Allocates the parameter buffer (zeroed) and the tensor table; mean 0, std 1.
 * Returns 0, or -1 with the reason in errs (may be NULL). */
int pt_schnet_init(pt_schnet *m, const pt_schnet_config *cfg, pt_errors *errs);
void pt_schnet_close(pt_schnet *m);

/* PyG's reset_parameters: xavier-uniform Linear weights, zero biases,
 * embedding N(0,1) with the padding row zeroed, atomref = initial_atomref.
 * Draws from pt_rng stream PT_SCHNET_INIT_STREAM of `seed`. */
#define PT_SCHNET_INIT_STREAM 0x5343484eULL
void pt_schnet_init_weights(pt_schnet *m, uint64_t seed);

/* Sets initial_atomref (and, when the model uses one, atomref.weight) from a
 * per-element table ref[0..99] in target units. */
void pt_schnet_set_atomref(pt_schnet *m, const double *ref);

/* Pointers into any buffer with the parameter layout (e.g. the gradients). */
void pt_schnet_params_view(const pt_schnet *m, float *base, pt_schnet_params *view);

/* The tensor whose state_dict name is `name`, or NULL. */
const pt_schnet_tensor *pt_schnet_find_tensor(const pt_schnet *m, const char *name);

/* Floats in the parameter buffer and bytes of the activation arena for a
 * configuration, without allocating (memory planning). */
size_t pt_schnet_param_count(const pt_schnet_config *cfg);
size_t pt_schnet_acts_bytes(const pt_schnet_config *cfg, int32_t cap_nodes, int32_t cap_edges,
                            int32_t cap_graphs);

/* Sizes the arena for batches of at most these capacities.  Returns 0, or -1
 * with the reason in errs (may be NULL). */
int pt_schnet_acts_init(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                        int32_t cap_edges, int32_t cap_graphs, pt_errors *errs);
void pt_schnet_acts_close(pt_schnet_acts *a);

/* Validates a batch against the model and arena (capacities, index ranges,
 * CSR consistency, z range, cutoff of padding edges).  forward trusts its
 * batch; call this wherever batches come from outside the engine's own
 * batcher.  Returns 0 if valid, else the number of problems reported. */
int pt_schnet_batch_check(const pt_schnet *m, const pt_schnet_acts *a, const pt_batch *b,
                          pt_errors *errs);

/* What does not depend on weights, shared by all T blocks: the filter-row
 * table and each row's Gaussians e and cutoff C.  forward calls it; exposed
 * for callers that want to time or cache it. */
void pt_schnet_prepare_edges(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b);

/* Predictions y[g] for every graph slot (0 for padding slots), target units.
 * The returned array lives in the arena until the next forward. */
const double *pt_schnet_forward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b);

/* After forward: L = Σ_{real g} (y_g − t_g)² / n_norm, where real means
 * graph_id ≥ 0 and n_norm ≤ 0 stands for this batch's count of real graphs
 * (plain MSE).  A trainer accumulating micro-batches passes the total count
 * so the summed gradients are those of the overall mean.  Sets dL/dy. */
double pt_schnet_loss(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                      double n_norm);

/* After loss: ACCUMULATES dL/dθ into grads[0..n_params) (zeroing is the
 * caller's).  The embedding's padding row gets nothing. */
void pt_schnet_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                        float *grads);

/* ---- model files (schnet_io.c) ----------------------------------------------
 * safetensors with PyG's state_dict names: the tensors above, plus the names
 * PyG also lists — interactions.t.conv.nn.{0,2}.{weight,bias} (the filter
 * network registered a second time), distance_expansion.offset [G] and, with
 * an atomref, initial_atomref [100,1] — so `load_state_dict(strict=True)`
 * works on the PyG side.  __metadata__ holds the constructor arguments under
 * PyG's names (hidden_channels, num_filters, num_interactions, num_gaussians,
 * cutoff, max_num_neighbors, readout add|mean) and mean, std, atomref. */
struct pt_safetensors;

int pt_schnet_save(const pt_schnet *m, const char *path, pt_errors *errs);

/* Initialises m from a file.  Hyper-parameters come from __metadata__ where
 * present, else from the tensor shapes (cutoff from distance_expansion.offset,
 * readout add, 32 neighbours, mean 0, std 1).  Tensors may come in any order;
 * either of the two names of the filter network is enough.  Every missing or
 * unexpected tensor, wrong dtype or shape is reported; m is then closed. */
int pt_schnet_load(pt_schnet *m, const char *path, pt_errors *errs);
int pt_schnet_load_safetensors(pt_schnet *m, const struct pt_safetensors *st, const char *label,
                               pt_errors *errs);

#endif
