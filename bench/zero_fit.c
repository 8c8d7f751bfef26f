/* zero_fit.c — the largest SchNet (hidden = filters = H, T interactions)
 * whose per-replica memory plan (engine/backend/memplan.h) fits a device
 * budget, for every ZeRO stage with and without optimizer offload, at R
 * replicas, one micro-batch of b packs of the given limits.  Used by
 * bench/bench_zero.sh with the limits its measured runs packed; prints one
 * JSON object per line:
 *   {"zero_stage","offload_optimizer","hidden","n_params","total_bytes","budget_bytes"}
 *
 *   zero_fit MAX_NODES MAX_EDGES MAX_GRAPHS [R] [T] [BUDGET_MB] [A] [b] */
#include <stdio.h>
#include <stdlib.h>

#include "engine/backend/memplan.h"
#include "engine/train/config.h"

static int plan_of(int H, int stage, int off, const pt_pack_limits *L, int R, int T, int budget,
                   int A, int b, pt_memplan *out)
{
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.model.hidden = cfg.model.filters = H;
    cfg.model.interactions = T;
    cfg.backend.zero_stage = stage;
    cfg.backend.offload_optimizer = off;
    cfg.backend.device_memory_mb = budget;
    pt_train_layout l = {.ranks = 1, .replicas = R, .accumulation = A, .micro_packs = b,
                         .threads = 1};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_memplan_for_job(out, &cfg, &l, *L, 0 /* energy only */, &errs);
    pt_errors_close(&errs);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: zero_fit MAX_NODES MAX_EDGES MAX_GRAPHS [R] [T] [BUDGET_MB] [A] [b]\n");
        return 2;
    }
    pt_pack_limits L = {atoi(argv[1]), atoi(argv[2]), atoi(argv[3])};
    int R = argc > 4 ? atoi(argv[4]) : 4, T = argc > 5 ? atoi(argv[5]) : 6;
    int budget = argc > 6 ? atoi(argv[6]) : 900, A = argc > 7 ? atoi(argv[7]) : 1;
    int b = argc > 8 ? atoi(argv[8]) : 1;
    for (int stage = 0; stage <= 3; stage++)
        for (int off = 0; off <= (stage > 0); off++) {
            /* the plan grows with H: the largest even H in [2, 4096] that fits */
            int lo = 0, hi = 4098;   /* lo fits (0 = none), hi does not */
            pt_memplan p;
            while (hi - lo > 2) {
                int mid = (lo + (hi - lo) / 2) & ~1;
                if (mid <= lo) mid = lo + 2;
                if (plan_of(mid, stage, off, &L, R, T, budget, A, b, &p) == 0 &&
                    p.total <= p.budget)
                    lo = mid;
                else
                    hi = mid;
            }
            if (lo > 4096) lo = 4096;
            size_t n = 0, total = 0, bud = (size_t)budget << 20;
            if (lo > 0 && plan_of(lo, stage, off, &L, R, T, budget, A, b, &p) == 0) {
                n = p.n_params;
                total = p.total;
            }
            printf("{\"zero_stage\":%d,\"offload_optimizer\":%s,\"hidden\":%d,\"n_params\":%zu,"
                   "\"total_bytes\":%zu,\"budget_bytes\":%zu}\n", stage, off ? "true" : "false", lo,
                   n, total, bud);
        }
    return 0;
}
