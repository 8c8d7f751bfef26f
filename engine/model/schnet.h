/* schnet.h — the SchNet model of PyTorch Geometric, in C, with a hand-written
 * backward pass (torch_geometric/nn/models/schnet.py; equations in schnet.c).
 *
 * Room engine/model: SchNet, its forward/backward ops and kernels, the model
 * file.  Uses engine/core, data, graph and pack (batches); knows no job
 * configuration, training loop or backend.
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
 * pt_schnet_init), which schnet_io.c writes to and reads from safetensors.
 *
 * Heads (multi-task, HydraGNN-style): one shared trunk (embedding and the T
 * interaction blocks) feeds K ≥ 1 output heads, each its own MLP
 *   o_k,i = w5_k ssp(W4_k h_T,i + b4_k) + b5_k,   o'_k,i = o_k,i std_k + mean_k + atomref_k[z_i]
 * read out per graph (graph heads: sum or mean of o'_k over the graph's atoms)
 * or kept per atom (atom heads: y_k,i = o'_k,i).  A model of config.n_heads 0
 * has exactly one graph head, PyG's (lin1, lin2, atomref; readout and
 * use_atomref of pt_schnet_config), and its file is PyG's; with n_heads ≥ 1
 * head k's tensors are named after its target, heads.KEY.lin1.weight, ...,
 * heads.KEY.atomref.weight.  Forces and stress are −∂/∂r of head 0, which
 * must then be a graph head (the energy). */
#ifndef PT_SCHNET_H
#define PT_SCHNET_H

#include <stddef.h>
#include <stdint.h>

#include "engine/pack/batch.h"
#include "engine/core/errors.h"
#include "engine/model/schnet_ops.h"

#define PT_SCHNET_MAX_INTERACTIONS 16
#define PT_SCHNET_ZROWS 100          /* embedding / atomref rows, row 0 = padding */
#define PT_SCHNET_KEY_MAX 64         /* a head's target key, with NUL (= PT_KEY_MAX) */
#define PT_SCHNET_NAME_MAX 96        /* "heads." KEY ".initial_atomref" fits */
#define PT_SCHNET_MAX_HEADS 16

/* What a head predicts: one number per structure or one per atom. */
typedef enum pt_head_level {
    PT_HEAD_GRAPH = 0,
    PT_HEAD_ATOM = 1
} pt_head_level;

/* One output head of a model of n_heads ≥ 1 (see above). */
typedef struct pt_schnet_head_config {
    char key[PT_SCHNET_KEY_MAX];  /* its target; names its tensors: [A-Za-z0-9_.-]+ */
    pt_head_level level;
    pt_readout readout;           /* graph heads: sum or mean; atom heads: sum */
    int32_t use_atomref;          /* 1: trainable heads.KEY.atomref.weight [100,1] */
} pt_schnet_head_config;

typedef struct pt_schnet_config {
    int32_t hidden;         /* H, hidden_channels */
    int32_t filters;        /* F, num_filters */
    int32_t interactions;   /* T, num_interactions */
    int32_t gaussians;      /* G, num_gaussians */
    float cutoff;           /* r_c in Å */
    int32_t max_neighbors;  /* max_num_neighbors (used by the neighbour lists), 0 = unlimited */
    pt_readout readout;     /* n_heads 0: sum ("add" in PyG) or mean */
    int32_t use_atomref;    /* n_heads 0: 1 = trainable per-element table atomref.weight [100,1] */
    /* 0: PyG's single head (the two fields above; 0 is what every caller
     * that predates heads leaves here); 1..PT_SCHNET_MAX_HEADS: named heads,
     * and readout and use_atomref above must be left at sum and 0 */
    int32_t n_heads;
    pt_schnet_head_config heads[PT_SCHNET_MAX_HEADS];
} pt_schnet_config;

typedef struct pt_schnet_block {
    float *mlp0_w, *mlp0_b;   /* filter net A1 [F,G], a1 [F] */
    float *mlp2_w, *mlp2_b;   /* filter net A2 [F,F], a2 [F] */
    float *conv_lin1_w;       /* L1 [F,H], no bias */
    float *conv_lin2_w;       /* L2 [H,F] */
    float *conv_lin2_b;       /* c2 [H] */
    float *lin_w, *lin_b;     /* L3 [H,H], c3 [H] */
} pt_schnet_block;

/* One head's output MLP (PyG's lin1, lin2, atomref for the single head). */
typedef struct pt_schnet_head {
    float *lin1_w, *lin1_b;   /* W4 [H/2,H], b4 [H/2] */
    float *lin2_w, *lin2_b;   /* w5 [1,H/2], b5 [1] */
    float *atomref;           /* [100] or NULL */
} pt_schnet_head;

typedef struct pt_schnet_params {
    float *embedding;         /* [100,H] */
    pt_schnet_block block[PT_SCHNET_MAX_INTERACTIONS];
    pt_schnet_head head[PT_SCHNET_MAX_HEADS]; /* [0, pt_schnet_head_count) */
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
    int32_t n_heads;                 /* K = pt_schnet_head_count(&cfg) */
    pt_schnet_head_config head[PT_SCHNET_MAX_HEADS]; /* [K] every head's description,
                                      * the single head's too (key "") */
    /* per head: per-atom o·std + mean, as PyG (0 and 1 = off), and PyG's
     * initial_atomref buffer */
    double mean[PT_SCHNET_MAX_HEADS], std[PT_SCHNET_MAX_HEADS];
    float initial_atomref[PT_SCHNET_MAX_HEADS][PT_SCHNET_ZROWS];
    size_t n_params;
    float *params_memory;            /* [n_params] */
    pt_schnet_params params;         /* views into params_memory */
    size_t n_tensors;
    pt_schnet_tensor *tensors;       /* [n_tensors], in state_dict order */
} pt_schnet;

/* What an arena is sized for (pt_schnet_acts_init_mode). */
typedef enum pt_schnet_mode {
    PT_SCHNET_ENERGY = 0,       /* forward, loss, backward of the energy */
    PT_SCHNET_FORCES = 1,       /* + pt_schnet_forces: forces and stress */
    PT_SCHNET_FORCES_TRAIN = 2  /* + pt_schnet_loss_forces, pt_schnet_backward_forces */
} pt_schnet_mode;

/* Per interaction block.  "Pairs" (FORCES_TRAIN) are two arrays back to back,
 * so that one product covers both (schnet_forces.c): the second half of a
 * node pair starts N = batch node slots rows in, of a row pair n_rows rows in
 * (both change with the batch).  In FORCES mode only the bar half exists. */
typedef struct pt_schnet_block_acts {
    float *sig1, *s1;   /* [rows,F] σ and ssp of A1 e + a1; pair [s1; s1'];
                           bf16 energy: s1's bf16 rows only (pt_schnet_s1_bf16);
                           σ1, σ2, σ4: NULL in an energy arena (never stored) */
    float *p;           /* [rows,F] P = A2 s1 + a2 (energy: the array w; forces:
                         * shared scratch, live during the block's forward) */
    float *w;           /* [rows,F] filter W = P ⊙ C */
    float *x, *m;       /* [N,F] x = L1 h, m = Σ x_j ⊙ W; pair [m; ṁ] */
    float *sig2, *u;    /* [N,H] σ and ssp of L2 m + c2; pair [u; u̇] */
    /* FORCES and up */
    float *wd;          /* [rows,F] W' = ∂W/∂d */
    float *z2;          /* [N,H] pair [û → ẑ2; ū → z̄2] */
    float *mbar;        /* [N,F] m̄ */
    float *xb;          /* [N,F] pair [x̂; x̄] */
    float *xdot;        /* [N,F] ẋ (FORCES_TRAIN) */
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
    int64_t forwards;
    int64_t backwards;  /* pt_schnet_backward, pt_schnet_forces, pt_schnet_backward_forces */
} pt_schnet_profile;

/* "edge_basis", "filter_gemm", … (snake case of the names above). */
const char *pt_schnet_op_name(pt_schnet_op op);

/* Layer events for a caller that keeps parameters or gradients elsewhere
 * than the model's flat buffers (ZeRO stages 2 and 3, engine/backend/backend_zero.h).
 * Layers: 0 the embedding, 1 + t interaction block t, T + 1 the heads (each
 * head's lin1, lin2, atomref); each is one contiguous range of the flat layout. */
typedef enum pt_schnet_layer_event {
    PT_LAYER_FORWARD = 0,   /* forward of the layer is next: its parameters are read */
    PT_LAYER_BACKWARD,      /* backward of the layer is next: parameters read, and the
                             * layer's pointers of *grad accumulated into */
    PT_LAYER_BACKWARD_DONE  /* the layer's gradient of this backward is complete */
} pt_schnet_layer_event;

/* May repoint the layer's pointers of the model's params (the caller's own
 * pt_schnet copy) and of *grad; must not touch other layers' pointers. */
typedef void (*pt_schnet_layer_fn)(void *user, pt_schnet_layer_event ev, int layer,
                                   pt_schnet_params *grad);

/* One head's activations.  y and dy are [graphs] for a graph head, [N] for
 * an atom head (0 on padding slots). */
typedef struct pt_schnet_head_acts {
    float *sig4, *q;          /* [N,H/2] σ and ssp of W4 h + b4 (q a pair for head 0
                               * in FORCES_TRAIN) */
    float *o;                 /* [N] per-atom output before std/mean/atomref */
    double *y;                /* predictions, target units */
    double *dy;               /* dL/dy (the losses set it; backward reads it) */
} pt_schnet_head_acts;

typedef struct pt_schnet_acts {
    int32_t cap_nodes, cap_edges, cap_graphs;
    /* Optional, set by the caller after pt_schnet_acts_init: */
    pt_schnet_profile *profile;      /* NULL: no timing (the default) */
    pt_schnet_layer_fn on_layer;     /* NULL: none (the default); called by
                                      * pt_schnet_forward, pt_schnet_backward, and for
                                      * forces pt_schnet_forces (FORWARD events, head
                                      * then blocks down) and pt_schnet_backward_forces
                                      * (FORWARD in the tangent pass, then BACKWARD and
                                      * BACKWARD_DONE in the energy backward's order) */
    void *layer_user;
    pt_precision precision;          /* of the products; FP32 after init */
    int32_t static_shapes;           /* 1: filter rows = edge slots (no sharing,
                                      * padding computed); 0 after init */
    int32_t no_grad;                 /* 1: no backward follows these forwards
                                      * (evaluation, prediction): an ENERGY arena's
                                      * forward skips the shifted softplus' sigmoids,
                                      * which only a backward reads (the same
                                      * outputs; pt_schnet_backward after such a
                                      * forward is not allowed); 0 after init */
    int32_t ieee_subnormals;         /* 1: the force passes' two products with
                                      * subnormals and the filter backward's dA1
                                      * run without the flush scope
                                      * (engine/core/fpflush.h; tests compare the
                                      * bits); 0 after init */
    int32_t forward_only;            /* 1: made by pt_schnet_acts_init_forward (no
                                      * backward arrays, blocks share theirs;
                                      * no_grad is then 1 for good) */
    void *memory;                    /* the arena: everything below points into it;
                                      * 2 MB aligned when bytes >= 2 MB */
    size_t bytes;
    int32_t huge_pages;              /* 1: the arena asked for transparent huge
                                      * pages and the kernel accepted (madvise) */
    /* filter rows (engine/pack/edge_rows.h): the filter network runs over
     * n_rows ≤ E rows, one per bond (both directions) at C > 0.  row, first,
     * row_last and row_dist point at the batch's table when its fill made
     * one at this model's cutoff (read in place, never written), else at
     * the arena's own (own_*), built by pt_schnet_prepare_edges */
    int32_t n_rows;
    int32_t *row;                    /* [E] edge → filter row, −1 = no message */
    uint8_t *first;                  /* [E] 1: the row's first edge */
    int32_t *row_last;               /* [E] receiver of each row's last edge */
    int32_t *own_row, *own_row_last; /* [E] the arena's table */
    uint8_t *own_first;              /* [E] */
    float *own_row_dist;             /* [E] */
    int32_t *snd_offset, *snd_edge, *snd_close; /* [N+1], [E], [N+1] the edges by
                                      * sender (schnet_ops.h's pt_cfconv_senders) for
                                      * the backward */
    int32_t dp_ring;                 /* the backward's dP window in rows, 0: none
                                      * (schnet_edges.c; with the lists) */
    pt_cfconv_sedge *snd_rec;        /* [E] the lists' edges as the backward reads
                                      * them (pt_cfconv_sender_edges, with cut and
                                      * dp_ring) */
    pt_cfconv_redge *row_rec;        /* [E] each row's edges as the backward by rows
                                      * reads them (pt_cfconv_row_edges) */
    int32_t rows_simple;             /* pt_cfconv_row_edges' answer: 1 when every
                                      * row is an edge and at most its reverse */
    int32_t bwd_made;                /* which of the backward's tables this batch
                                      * has (PT_SCHNET_BWD_*, schnet_internal.h):
                                      * made when a reader first runs */
    float *row_dist;                 /* [E] distance of each row */
    float *e, *cut;                  /* [rows,G] Gaussians, [rows] cosine cutoff */
    float *h[PT_SCHNET_MAX_INTERACTIONS + 1]; /* [N,H] input of block t; h[T] feeds the head */
    pt_schnet_block_acts block[PT_SCHNET_MAX_INTERACTIONS];
    pt_schnet_head_acts head[PT_SCHNET_MAX_HEADS]; /* [K] */
    /* head 0's, the same arrays as head[0] (the energy of forces and stress) */
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
    /* FORCES and up (schnet_forces.c; pairs as in pt_schnet_block_acts: in
     * FORCES_TRAIN h[t], q and e are pairs [h; ḣ], [q; q̇], [e; ė]) */
    pt_schnet_mode mode;
    float *de, *dcut;                /* [rows,G], [rows] e' = ∂e/∂d, C' = ∂C/∂d */
    float *dist_grad;                /* [rows] g_u = ∂Y/∂d_u, Y = Σ_g y_g */
    float *rows_a, *rows_b;          /* [rows,F] scratch, pairs in FORCES_TRAIN */
    float *hb[PT_SCHNET_MAX_INTERACTIONS + 1]; /* [N,H] pairs [ĥ_t; h̄_t] */
    float *z4;                       /* [N,H/2] pair [q̂ → ẑ4; q̄ → z̄4] */
    float *ob;                       /* [N] pair [ô; ō] */
    float *zs;                       /* [N,H] scratch z̄ of the distance backward */
    double *ones;                    /* [graphs] ∂Y/∂y: 1 for real graphs */
    double *force;                   /* [N,3] F_i = −∂y/∂r_i, eV/Å (0 for padding) */
    double *stress;                  /* [graphs,9] σ = (1/V) ∂y/∂ε, 0 unless V > 0 */
    /* FORCES_TRAIN */
    double *force_bar;               /* [N,3] ∂L/∂F */
    double *stress_bar;              /* [graphs,9] ∂L/∂σ */
    float *lambda;                   /* [rows] λ_u = ∂L/∂g_u */
    float *mhat;                     /* [N,F] scratch m̂ */
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

/* Heads of a configuration: n_heads, or 1 for PyG's single head. */
int pt_schnet_head_count(const pt_schnet_config *cfg);

/* Sets head k's initial_atomref (and, when the head has one, its
 * atomref.weight) from a per-element table ref[0..99] in target units. */
void pt_schnet_set_atomref(pt_schnet *m, int k, const double *ref);

/* The head predicting `key` (n_heads ≥ 1), or −1. */
int pt_schnet_find_head(const pt_schnet *m, const char *key);

/* Pointers into any buffer with the parameter layout (e.g. the gradients). */
void pt_schnet_params_view(const pt_schnet *m, float *base, pt_schnet_params *view);

/* The tensor table of a valid configuration (names, shapes, offsets) without
 * the parameters, malloc'ed, *n entries; NULL when out of memory.  Lets a
 * model file be checked before the parameters are allocated. */
pt_schnet_tensor *pt_schnet_tensor_table(const pt_schnet_config *cfg, size_t *n);

/* The tensor whose state_dict name is `name`, or NULL. */
const pt_schnet_tensor *pt_schnet_find_tensor(const pt_schnet *m, const char *name);

/* Floats in the parameter buffer and bytes of the activation arena for a
 * configuration, without allocating (memory planning). */
size_t pt_schnet_param_count(const pt_schnet_config *cfg);
size_t pt_schnet_acts_bytes(const pt_schnet_config *cfg, int32_t cap_nodes, int32_t cap_edges,
                            int32_t cap_graphs);

/* The same for an arena of `mode` (pt_schnet_acts_bytes is PT_SCHNET_ENERGY);
 * the memory plan must use this one for force jobs.  With SchNet's default
 * shapes the filter rows dominate: per block 3 [rows,F] arrays for energy,
 * 4 for FORCES, 5 for FORCES_TRAIN, plus 2 (energy's backward scratch) and
 * 2 or 4 shared (forces). */
size_t pt_schnet_acts_bytes_mode(const pt_schnet_config *cfg, int32_t cap_nodes,
                                 int32_t cap_edges, int32_t cap_graphs, pt_schnet_mode mode);

/* Sizes the arena for batches of at most these capacities.  Returns 0, or -1
 * with the reason in errs (may be NULL). */
int pt_schnet_acts_init(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                        int32_t cap_edges, int32_t cap_graphs, pt_errors *errs);
/* The same for `mode`; pt_schnet_acts_init is PT_SCHNET_ENERGY. */
int pt_schnet_acts_init_mode(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                             int32_t cap_edges, int32_t cap_graphs, pt_schnet_mode mode,
                             pt_errors *errs);
/* A forward-only energy arena for evaluation and prediction: no backward
 * and no forces may follow its forwards.  A forward reads h[t] and block t's
 * own arrays only, so the blocks share one set of arrays, h alternates
 * between two buffers, and neither sigmoids nor backward scratch are kept:
 * for SchNet's default shapes 2 [rows,F] arrays in all instead of 3 per
 * block plus 2 (water, 8 packs: ~218 MB -> ~35 MB).  The same predictions,
 * bit for bit, as a full arena with no_grad. */
int pt_schnet_acts_init_forward(pt_schnet_acts *a, const pt_schnet *m, int32_t cap_nodes,
                                int32_t cap_edges, int32_t cap_graphs, pt_errors *errs);
size_t pt_schnet_acts_bytes_forward(const pt_schnet_config *cfg, int32_t cap_nodes,
                                    int32_t cap_edges, int32_t cap_graphs);
void pt_schnet_acts_close(pt_schnet_acts *a);

/* Validates a batch against the model and arena (capacities, index ranges,
 * CSR consistency, z range, cutoff of padding edges; for an arena of mode
 * ≥ FORCES also |edge_vec| = edge_dist).  forward trusts its
 * batch; call this wherever batches come from outside the engine's own
 * batcher.  Returns 0 if valid, else the number of problems reported. */
int pt_schnet_batch_check(const pt_schnet *m, const pt_schnet_acts *a, const pt_batch *b,
                          pt_errors *errs);

/* What does not depend on weights, shared by all T blocks: the filter-row
 * table and each row's Gaussians e and cutoff C.  forward calls it; exposed
 * for callers that want to time or cache it. */
void pt_schnet_prepare_edges(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b);

/* Predictions of every head (a->head[k].y), target units; returns head 0's
 * y[g] for every graph slot (0 for padding slots).  The arrays live in the
 * arena until the next forward. */
const double *pt_schnet_forward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b);

/* After forward: L = Σ_{real g} (y_g − t_g)² / n_norm, where real means
 * graph_id ≥ 0 and n_norm ≤ 0 stands for this batch's count of real graphs
 * (plain MSE).  A trainer accumulating micro-batches passes the total count
 * so the summed gradients are those of the overall mean.  Sets dL/dy. */
double pt_schnet_loss(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                      double n_norm);

/* One head's term of a multi-task loss (pt_schnet_loss_heads). */
typedef struct pt_schnet_head_loss {
    const double *target;  /* graph head [cap_graphs], atom head [cap_nodes], target
                            * units; NULL: the head's dy is left as it is (head 0's
                            * set by pt_schnet_loss_forces) */
    double weight;         /* w_k ≥ 0; 0: dy = 0 */
    double norm;           /* n_k: real graphs (atoms) of the global batch; ≤ 0 this
                            * batch's count */
} pt_schnet_head_loss;

/* After forward:
 *   L = Σ_k w_k Σ_{real g (atoms i)} (y_k − t_k)² / n_k
 * over heads k with a target; sets their dL/dy.  sse[k] (may be NULL)
 * receives Σ (y_k − t_k)² unweighted (0 for heads without a target).
 * With one head, weight 1: pt_schnet_loss's dL/dy bit for bit. */
double pt_schnet_loss_heads(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                            const pt_schnet_head_loss *heads, double *sse);

/* After a loss: ACCUMULATES dL/dθ into grads[0..n_params) (zeroing is the
 * caller's), through every head's dy.  The embedding's padding row gets
 * nothing.  grads may be NULL when a->on_layer points every layer's
 * gradient somewhere at PT_LAYER_BACKWARD. */
void pt_schnet_backward(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                        float *grads);

/* ---- forces, stress and training on them (schnet_forces.c) -----------------
 * The energy depends on positions only through the distances d_e = |v_e|,
 * v_e = r_src + S_e·cell − r_dst (batch.h: edge_vec).  Both directions of a
 * bond share one filter row u (v of one is −v of the other), so with
 * g_u = ∂Y/∂d_u (Y = Σ_g y_g: atoms of different graphs never interact)
 *   F_i = −∂y/∂r_i = Σ_u g_u v_u/d_u ([i = dst_u] − [i = src_u])
 *   σ_g = (1/V_g) ∂y_g/∂ε = (1/V_g) Σ_{u ∈ g} g_u v_u v_uᵀ / d_u
 * with v_u, src_u, dst_u those of the row's first edge; ε is a homogeneous
 * strain of positions and cell (r → (1+ε) r), as ASE defines stress (eV/Å³,
 * negative under compression).  The energy's std scaling is in g; mean and
 * atomref give no force. */

/* After pt_schnet_forward on an arena of mode ≥ FORCES: a->force for every
 * node slot (0 for padding), a->stress for graph slots with graph_volume > 0
 * (0 otherwise), a->dist_grad per row. */
void pt_schnet_forces(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b);

/* Loss weights (training.loss: energy_weight, forces_weight, stress_weight)
 * and the energy term's form: energy_per_atom 0 compares total energies,
 * 1 energies per atom, (y_g − t_g)/n_g with n_g the graph's real atoms
 * (NequIP's PerAtomMSELoss: the balance of energy and forces then does not
 * depend on the structures' sizes). */
typedef struct pt_schnet_loss_weights {
    double energy, forces, stress;
    int energy_per_atom;
} pt_schnet_loss_weights;

/* Denominators of the three means; ≤ 0 stands for this batch's count.  A
 * trainer accumulating micro-batches passes the totals of the step. */
typedef struct pt_schnet_loss_norm {
    double graphs;            /* real graphs */
    double force_components;  /* 3 × real atoms of graphs with graph_has_forces */
    double stress_components; /* 9 × real graphs with graph_has_stress and V > 0 */
    double atoms;             /* real atoms (atom heads' n_k, pt_schnet_head_loss) */
} pt_schnet_loss_norm;

/* The three mean squared errors (unweighted) and the weighted total. */
typedef struct pt_schnet_loss_parts {
    double energy, forces, stress, total;
} pt_schnet_loss_parts;

/* After pt_schnet_forces:
 *   L = w_E Σ_g (e_g − t_g)²/n_E + w_F Σ_{i,c} (F_ic − F^ref_ic)²/n_F
 *       + w_S Σ_{g,ab} (σ_g,ab − σ^ref_g,ab)²/n_S
 * over real graphs, e_g − t_g = y_g − t_g, or (y_g − t_g)/natoms_g with
 * energy_per_atom; forces over the atoms of graphs with graph_has_forces,
 * stress over graphs with graph_has_stress and graph_volume > 0.  A term of
 * weight 0 is not evaluated (its targets may be absent).  Returns the total,
 * with the parts in `parts` (may be NULL); on a FORCES_TRAIN arena also sets
 * dL/dy and λ = ∂L/∂g for pt_schnet_backward_forces.  With w_F = w_S = 0 it
 * needs no pt_schnet_forces and works on an arena of any mode (an energy-only
 * loss of another form than pt_schnet_loss's: weighted, or per atom); with
 * w = {1, 0, 0, 0} its dL/dy are pt_schnet_loss's, bit for bit. */
double pt_schnet_loss_forces(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
                             const pt_schnet_loss_weights *w, const pt_schnet_loss_norm *norm,
                             pt_schnet_loss_parts *parts);

/* After pt_schnet_loss_forces (and pt_schnet_loss_heads for the other
 * heads): ACCUMULATES dL/dθ into grads, the energy term and the force and
 * stress terms (the latter through the parameter gradient of Σ_u λ_u g_u: a
 * tangent pass along λ and a second backward pass), and every other head's
 * term through its dy.  grads may be NULL when a->on_layer points every
 * layer's gradient (as for pt_schnet_backward). */
void pt_schnet_backward_forces(const pt_schnet *m, pt_schnet_acts *a, const pt_batch *b,
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
