/* mhd_panic.h — libmicrohttpd's panic handler: where a panic came from, in the
 * server's log, before the abort. */
#ifndef PT_MHD_PANIC_H
#define PT_MHD_PANIC_H

/* Installs the handler (process-wide; pt_http_init calls it, again is fine).
 * On a panic it writes "packtrain: libmicrohttpd panic at FILE:LINE: REASON"
 * to stderr, then aborts as libmicrohttpd's own handler would. */
void pt_mhd_panic_install(void);

#endif
