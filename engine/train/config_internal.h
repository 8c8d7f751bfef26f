/* config_internal.h — what the files of the job configuration's validator
 * share (config.c: the entry point; config_read.c: the typed readers;
 * config_training.c, config_targets.c: sections; config_json.c: the
 * canonical form): the parse context, the readers (one error list, JSON
 * paths as fields) and the name tables.  The short names are macros for
 * pt_cfg_-prefixed symbols. */
#ifndef PT_CONFIG_INTERNAL_H
#define PT_CONFIG_INTERNAL_H

#include <jansson.h>

#include "engine/train/config.h"

typedef struct parse_ctx {
    pt_errors *errs;
    const char *file;
    int failed;
} parse_ctx;

#define fail pt_cfg_fail
#define type_name pt_cfg_type_name
#define round15 pt_cfg_round15
#define check_keys pt_cfg_check_keys
#define read_number pt_cfg_read_number
#define read_enum pt_cfg_read_enum
#define readout_names pt_cfg_readout_names
#define normalize_names pt_cfg_normalize_names
#define method_names pt_cfg_method_names
#define optimizer_names pt_cfg_optimizer_names
#define schedule_names pt_cfg_schedule_names
#define backend_names pt_cfg_backend_names
#define precision_names pt_cfg_precision_names
#define energy_loss_names pt_cfg_energy_loss_names
#define read_int64 pt_cfg_read_int64
#define read_int pt_cfg_read_int
#define read_bool pt_cfg_read_bool
#define get_section pt_cfg_get_section

/* An error at section.key (or at either alone); sets c->failed. */
void fail(parse_ctx *c, const char *section, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *type_name(const json_t *v);
/* 15 significant digits: printing and re-parsing is exact. */
double round15(double x);
/* Every key of obj must be in the NULL-terminated allowed list. */
void check_keys(parse_ctx *c, const json_t *obj, const char *section, const char *const *allowed);
/* The readers (config_read.c): 1 when set, 0 when absent (out untouched),
 * -1 on error. */
/* An integer in lo..hi, or (when alt is "auto" or "null") that alternative,
 * stored as 0. */
int read_int64(parse_ctx *c, const json_t *obj, const char *section, const char *key,
               long long lo, long long hi, const char *alt, int64_t *out);
int read_int(parse_ctx *c, const json_t *obj, const char *section, const char *key,
             long long lo, long long hi, const char *alt, int32_t *out);
/* true or false; absent leaves out untouched. */
void read_bool(parse_ctx *c, const json_t *obj, const char *section, const char *key, bool *out);
/* The object at key, or NULL when absent (defaults apply) or not an object. */
const json_t *get_section(parse_ctx *c, const json_t *obj, const char *section, const char *key);
/* A number in the interval lo..hi; `open_lo` excludes lo.  With `nullable`,
 * JSON null is accepted and stored as 0. */
int read_number(parse_ctx *c, const json_t *obj, const char *section, const char *key, double lo,
                int open_lo, double hi, int nullable, double *out);
int read_enum(parse_ctx *c, const json_t *obj, const char *section, const char *key,
              const char *const *names, int *out);

extern const char *const readout_names[];    /* indexed by pt_job_readout */
extern const char *const normalize_names[];  /* indexed by pt_norm_kind */
/* config.c's name tables, NULL-terminated, indexed by their enumerations */
extern const char *const method_names[];       /* pt_job_batch_method */
extern const char *const optimizer_names[];    /* pt_optim_kind */
extern const char *const schedule_names[];     /* pt_schedule_kind */
extern const char *const backend_names[];      /* pt_job_backend_kind */
extern const char *const precision_names[];    /* pt_precision */
extern const char *const energy_loss_names[];  /* pt_job_energy_loss */

/* `training` (config_training.c): the section, its schedule, split and loss. */
void pt_cfg_parse_training(parse_ctx *c, const json_t *o, pt_job_training *t);

/* `targets` (config_targets.c): parses the list into cfg->targets, after the
 * sections (its defaults are model.readout and training.normalize), and
 * checks it against target and training.loss. */
void pt_cfg_parse_targets(parse_ctx *c, const json_t *root, pt_job_config *cfg);
/* The canonical list (new reference), or NULL for a job of one `target`. */
json_t *pt_cfg_targets_to_json(const pt_job_config *cfg);

#endif
