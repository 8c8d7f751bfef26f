/* fuzz_worker_proto.c — one line of the worker protocol
 * (server/sched/worker_proto.c), as the scheduler reads a worker's stdout.
 * A refused line must say why and leave the message cleared; an accepted
 * one must hold what worker_proto.h promises for its kind (step and epoch
 * >= 0 where required, strings terminated, extra_json valid JSON). */
#include <jansson.h>

#include "server/sched/worker_proto.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_worker_msg m;
    char err[256] = "";
    if (pt_worker_msg_parse((const char *)data, size, &m, err, sizeof err) != 0) {
        FUZZ_CHECK(err[0] != '\0');
        FUZZ_CHECK(m.extra_json == NULL);
        pt_worker_msg_clear(&m);
        return 0;
    }
    FUZZ_CHECK(pt_worker_msg_kind_name(m.kind) != NULL);
    FUZZ_CHECK(memchr(m.path, '\0', sizeof m.path) && memchr(m.message, '\0', sizeof m.message));
    switch (m.kind) {
    case PT_WORKER_MSG_STEP:
    case PT_WORKER_MSG_EPOCH:
    case PT_WORKER_MSG_PROGRESS:
    case PT_WORKER_MSG_CHECKPOINT: FUZZ_CHECK(m.step >= 0 && m.epoch >= 0); break;
    default: break;
    }
    if (m.kind == PT_WORKER_MSG_PROGRESS) FUZZ_CHECK(m.progress >= 0 && m.progress <= 1);
    if (m.extra_json) {
        json_error_t je;
        json_t *j = json_loads(m.extra_json, 0, &je);
        FUZZ_CHECK(j != NULL && json_is_object(j));
        json_decref(j);
    }
    pt_worker_msg_clear(&m);
    return 0;
}
