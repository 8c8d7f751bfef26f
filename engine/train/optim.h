/* optim.h — Adam and AdamW over one merged flat parameter buffer.
 *
 * The model keeps all its parameters in one float array and all gradients in
 * another of the same layout, so the optimizer (like the all-reduce of the
 * multi-replica backend) is one loop over n floats and knows nothing of
 * tensors.  Semantics follow torch.optim.Adam / torch.optim.AdamW exactly
 * (amsgrad=False, maximize=False), including bias correction and AdamW's
 * decoupled weight decay; pt_grad_clip is torch.nn.utils.clip_grad_norm_. */
#ifndef PT_OPTIM_H
#define PT_OPTIM_H

#include <stddef.h>

typedef enum pt_optim_kind {
    PT_OPTIM_ADAM = 0,   /* L2 penalty folded into the gradient */
    PT_OPTIM_ADAMW = 1   /* decoupled weight decay: theta *= 1 - lr*lambda */
} pt_optim_kind;

typedef struct pt_optim_params {
    pt_optim_kind kind;
    double beta1;         /* 0.9 */
    double beta2;         /* 0.999 */
    double eps;           /* 1e-8 */
    double weight_decay;  /* lambda; 0 disables */
} pt_optim_params;

typedef struct pt_optim {
    pt_optim_params p;
    size_t n;            /* floats in the parameter buffer */
    long step;           /* optimizer steps taken (torch's state['step']) */
    float *m;            /* [n] first moment */
    float *v;            /* [n] second moment */
    float *decay_scale;  /* [n] 1 = weight decay applies, 0 = exempt; NULL = all decay */
} pt_optim;

/* PyTorch's defaults for `kind` (betas 0.9/0.999, eps 1e-8, weight decay 0 for
 * Adam and 0.01 for AdamW). */
pt_optim_params pt_optim_defaults(pt_optim_kind kind);

/* Allocates zeroed moments for n parameters.  Returns 0, or -1 when out of
 * memory (the optimizer is then left closed). */
int pt_optim_init(pt_optim *opt, const pt_optim_params *params, size_t n);
void pt_optim_close(pt_optim *opt);

/* Exempts param[offset .. offset+count) from weight decay, like a torch
 * parameter group with weight_decay 0.  The trainer exempts SchNet's atomref
 * table: it holds per-element energies in target units (hundreds of eV),
 * which decay would drag towards zero.  Returns 0, or -1 out of memory. */
int pt_optim_exempt_decay(pt_optim *opt, size_t offset, size_t count);

/* Forgets the moments and the step count (a fresh optimizer, same buffers). */
void pt_optim_reset(pt_optim *opt);

/* One update of param[0..n) from grad[0..n) at learning rate lr.  grad is
 * read only (Adam's L2 term is added on the fly, not written back).
 * Equal, bit for bit, to pt_optim_begin followed by pt_optim_update over
 * any partition of [0, n) (every element's arithmetic is its own). */
void pt_optim_step(pt_optim *opt, float *param, const float *grad, double lr);

/* The scalars of one step, formed once and shared by every shard's update. */
typedef struct pt_optim_coeffs {
    float b1, b2, one_b1, one_b2, step_size, inv_bc2_sqrt, eps, l2, decay;
} pt_optim_coeffs;

/* Counts the step (opt->step + 1) and forms its scalars at rate lr. */
pt_optim_coeffs pt_optim_begin(pt_optim *opt, double lr);

/* The scalars pt_optim_begin would form for the next step, without counting
 * it: an engine that applies the update inside its gradient pass forms them
 * before the pass and counts the step only once it has applied it. */
pt_optim_coeffs pt_optim_coeffs_next(const pt_optim *opt, double lr);

/* The update of elements [first, first + n) of the flat buffer, for ZeRO
 * shards (engine/backend/backend_zero.h): param, grad, m and v point at element
 * `first` (m and v may be opt->m + first, or a staging copy of them);
 * `first` locates the decay exemptions. */
void pt_optim_update(const pt_optim *opt, const pt_optim_coeffs *c, float *param,
                     const float *grad, float *m, float *v, size_t first, size_t n);

/* Euclidean norm of grad[0..n), accumulated in double. */
double pt_grad_norm(const float *grad, size_t n);

/* Σ grad[i]² over [0, n) in double: a shard's share of the squared norm. */
double pt_grad_sumsq(const float *grad, size_t n);

/* The factor clip_grad_norm_ applies for a gradient of this norm: 1 when
 * the norm is within max_norm, else max_norm / (norm + 1e-6) (as a float). */
float pt_grad_clip_coef(double norm, double max_norm);

/* clip_grad_norm_: if the norm exceeds max_norm, scales grad by
 * max_norm / (norm + 1e-6).  Returns the norm before clipping. */
double pt_grad_clip(float *grad, size_t n, double max_norm);

#endif
