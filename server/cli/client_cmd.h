/* client_cmd.h — what the CI commands (submit, status, wait, logs, cancel)
 * share: their parsed command line, the exit statuses, and the ways of
 * following a job to its end:
 *   cmd_client.c     the command line and the commands themselves
 *   client_wait.c    long-polling the job (--wait), the status line, the end
 *   client_follow.c  the job's log as it is written (--follow, event stream)
 * Internal to server/cli. */
#ifndef PT_CLIENT_CMD_H
#define PT_CLIENT_CMD_H

#include <jansson.h>
#include <stdio.h>

#include "server/cli/client.h"

/* The exit statuses, one meaning each (printed by --help, in docs/api.md). */
enum {
    EXIT_OK = 0,            /* done; with --wait: the job succeeded */
    EXIT_JOB = 1,           /* the job ended without succeeding: failed, stopped or cancelled */
    EXIT_USAGE = 2,         /* bad command line or configuration file */
    EXIT_SERVER = 3,        /* the server cannot be reached, refused the token, or kept failing */
    EXIT_REFUSED = 4,       /* the server refused the request (an invalid job, an unknown job...) */
    EXIT_TIMEOUT = 5,       /* --timeout passed before the job ended */
    EXIT_INTERRUPTED = 130  /* SIGINT or SIGTERM (128 + 2) */
};

typedef struct client_args {
    const char *cmd, *server, *token, *dataset, *dataset_id, *config, *name, *format, *job, *idem;
    int wait, follow, skip_invalid, detach, json;
    long lines;                  /* logs: the tail's length */
    double retry_s, timeout_s;   /* timeout 0: none */
} client_args;

/* The exit status of a request that got no answer (EXIT_SERVER, or why it
 * was given up) or a refusing one (by its HTTP status), said on stderr. */
int pt_cli_transport_failed(const char *cmd, const pt_client *c);
int pt_cli_http_failed(const char *cmd, const char *what, const pt_client_resp *r);

/* The job's status line on stderr: on a terminal redrawn in place, else
 * printed when the state or the epoch changes. */
typedef struct pt_status_view {
    int tty, open;          /* open: a line is drawn without its newline */
    char state[32];
    double epoch;
    char line[512];         /* the line last shown */
} pt_status_view;
void pt_status_view_init(pt_status_view *v);
void pt_status_view_show(pt_status_view *v, const char *cmd, const json_t *job);
/* Ends a line drawn in place before anything else is printed. */
void pt_status_view_close(pt_status_view *v);
/* On a terminal: erases the line (a log line is printed in its place),
 * then draws it again below. */
void pt_status_view_hide(pt_status_view *v);
void pt_status_view_redraw(pt_status_view *v);

/* Follows the job to its end, by long-polling (--wait) or by its log's
 * event stream (--follow); *final gets the job's last document.  EXIT_OK,
 * or why it stopped following (EXIT_INTERRUPTED, EXIT_TIMEOUT, EXIT_SERVER,
 * EXIT_REFUSED).  Connection failures are retried for --retry-for seconds. */
int pt_follow_wait(pt_client *c, const client_args *a, const char *job, json_t **final);
/* `log` is where the log's lines go (stdout for `logs`, else stderr);
 * with --json every event is one JSON object on a line of stdout. */
int pt_follow_stream(pt_client *c, const client_args *a, const char *job, FILE *log, json_t **final);

/* The exit status of a finished job (EXIT_OK or EXIT_JOB), its story on stderr. */
int pt_follow_report_end(const client_args *a, const json_t *job);
/* After Ctrl-C or --timeout (why): the job submit started is cancelled
 * unless --detach, one only watched keeps running; says which.  Returns why. */
int pt_follow_stop(pt_client *c, const client_args *a, const char *job, int why);
/* Follows (by a->follow's way), reports the end and returns its status;
 * `log` as for pt_follow_stream.  With --json, the final document is on
 * stdout (--follow: as the last JSON line). */
int pt_follow_job(pt_client *c, const client_args *a, const char *job, FILE *log);

#endif
