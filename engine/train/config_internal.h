/* config_internal.h — what config.c shares with config_targets.c: the parse
 * context and the typed readers (one error list, JSON paths as fields; see
 * config.c).  The short names are macros for pt_cfg_-prefixed symbols. */
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

/* An error at section.key (or at either alone); sets c->failed. */
void fail(parse_ctx *c, const char *section, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *type_name(const json_t *v);
/* 15 significant digits: printing and re-parsing is exact. */
double round15(double x);
/* Every key of obj must be in the NULL-terminated allowed list. */
void check_keys(parse_ctx *c, const json_t *obj, const char *section, const char *const *allowed);
/* The readers: 1 when set, 0 when absent (out untouched), -1 on error. */
int read_number(parse_ctx *c, const json_t *obj, const char *section, const char *key, double lo,
                int open_lo, double hi, int nullable, double *out);
int read_enum(parse_ctx *c, const json_t *obj, const char *section, const char *key,
              const char *const *names, int *out);

extern const char *const readout_names[];    /* indexed by pt_job_readout */
extern const char *const normalize_names[];  /* indexed by pt_norm_kind */

/* `targets` (config_targets.c): parses the list into cfg->targets, after the
 * sections (its defaults are model.readout and training.normalize), and
 * checks it against target and training.loss. */
void pt_cfg_parse_targets(parse_ctx *c, const json_t *root, pt_job_config *cfg);
/* The canonical list (new reference), or NULL for a job of one `target`. */
json_t *pt_cfg_targets_to_json(const pt_job_config *cfg);

#endif
