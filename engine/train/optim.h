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
 * read only (Adam's L2 term is added on the fly, not written back). */
void pt_optim_step(pt_optim *opt, float *param, const float *grad, double lr);

/* Euclidean norm of grad[0..n), accumulated in double. */
double pt_grad_norm(const float *grad, size_t n);

/* clip_grad_norm_: if the norm exceeds max_norm, scales grad by
 * max_norm / (norm + 1e-6).  Returns the norm before clipping. */
double pt_grad_clip(float *grad, size_t n, double max_norm);

#endif
