/* version.h — which packtrain this is: the release version and the git
 * commit it was built from (`packtrain version`, /metrics'
 * packtrain_build_info, the User-Agent of the CI client).
 *
 * The commit comes from $(BUILD)/build_info.h, which the Makefile rewrites
 * only when `git describe --always --dirty` changes, so a commit rebuilds one
 * object rather than everything; "unknown" outside a git checkout. */
#ifndef PT_VERSION_H
#define PT_VERSION_H

#define PT_VERSION "0.1.0"

/* PT_VERSION, as a function for symmetry with the commit. */
const char *pt_version(void);
/* The abbreviated commit, with "-dirty" when the tree had changes. */
const char *pt_build_commit(void);

#endif
