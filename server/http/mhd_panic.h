/* mhd_panic.h — libmicrohttpd's panic handler: where a panic came from, in the
 * server's logs, before the abort. */
#ifndef PT_MHD_PANIC_H
#define PT_MHD_PANIC_H

/* Installs the handler (process-wide; pt_http_init calls it, again is fine).
 * On a panic it writes "packtrain: libmicrohttpd panic at FILE:LINE: REASON"
 * to stderr and, when a log is set (pt_mhd_panic_log), to that log too as
 * "TIMESTAMP packtrain: libmicrohttpd panic at ...", then aborts as
 * libmicrohttpd's own handler would. */
void pt_mhd_panic_install(void);

/* The descriptor of the log the operator configured (--access-log FILE),
 * or -1: none.  One per process, as the handler is: pt_http_init sets its
 * server's, pt_http_close releases it. */
void pt_mhd_panic_log(int fd);
/* Stops writing to fd if it is still the log (another server's stays). */
void pt_mhd_panic_log_release(int fd);

#endif
