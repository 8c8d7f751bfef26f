/* version.c — the version and the build's commit; see version.h. */
#include "engine/core/version.h"

#include "build_info.h"   /* PT_BUILD_COMMIT, generated into $(BUILD) by the Makefile */

const char *pt_version(void)
{
    return PT_VERSION;
}

const char *pt_build_commit(void)
{
    return PT_BUILD_COMMIT;
}
