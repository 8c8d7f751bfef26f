/* store_writer.h — one thread that owns a pt_store and runs queued operations
 * for a libuv loop, so blocking SQLite work (fsync on commit, busy waits)
 * never stalls the loop.
 *
 * Why a single thread and not uv_queue_work: the scheduler's writes must land
 * in the order it issues them (a job's steps before its terminal state, the
 * crash requeue before the claim that resumes it), and a pt_store handle must
 * stay on one thread.  A FIFO drained by one thread gives both for free; the
 * loop thread never touches the database.
 *
 * An operation is a struct the caller embeds first in its own struct:
 * `work(store, op)` runs on the writer thread, then `done(op)` (may be NULL)
 * runs on the loop thread, in submission order.  `done` usually frees the op.
 * After pt_store_writer_close() has stopped the thread, a submitted op runs
 * inline on the submitting thread, so nothing is ever lost at shutdown. */
#ifndef PT_STORE_WRITER_H
#define PT_STORE_WRITER_H

#include <pthread.h>
#include <stddef.h>

#include <uv.h>

#include "store/store.h"

typedef struct pt_store_op pt_store_op;
typedef void (*pt_store_op_work_fn)(pt_store *s, pt_store_op *op);
typedef void (*pt_store_op_done_fn)(pt_store_op *op);

struct pt_store_op {
    pt_store_op_work_fn work;
    pt_store_op_done_fn done;
    pt_store_op *next;           /* private: queue link */
};

typedef struct pt_store_writer {
    pt_store *store;
    uv_async_t done_async;       /* wakes the loop to run done callbacks */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pt_store_op *pending_head, *pending_tail;   /* waiting for the writer thread */
    pt_store_op *done_head, *done_tail;   /* waiting for the loop thread */
    int stopping;                /* close asked the thread to finish */
    int stopped;                 /* thread joined: submit runs inline */
    int started;
} pt_store_writer;

/* Opens the database at db_path and starts the thread; `loop` is the loop on
 * which done callbacks run.  Call on the loop's thread, or before the loop
 * runs.  Returns 0, or -1 with the reason in err. */
int pt_store_writer_init(pt_store_writer *w, uv_loop_t *loop, const char *db_path, char *err,
                         size_t errlen);
/* Queues an op.  Thread-safe, but done callbacks always run on the loop. */
void pt_store_writer_submit(pt_store_writer *w, pt_store_op *op);
/* Runs every queued op, joins the thread, runs the remaining done callbacks,
 * closes the database and starts closing the async handle (the loop must run
 * once more to finish).  Call on the loop thread. */
void pt_store_writer_close(pt_store_writer *w);

#endif
