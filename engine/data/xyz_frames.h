/* xyz_frames.h — the read loop of the atom-count-first text formats (XYZ,
 * extended XYZ, raw QM9), which may be mixed in one file.
 *
 * It finds where each structure starts (atom-count line, comment line), picks
 * the block parser (the format asked for, or per structure: QM9 when the
 * comment starts with "gdb ", extended XYZ when it has a '=', plain XYZ
 * otherwise), checks that no atom lines are left over, and hands each
 * structure to fn.  Framing errors that leave no way to find the next
 * structure stop the file; everything else invalidates one structure only.
 * reader.c dispatches to it. */
#ifndef PT_XYZ_FRAMES_H
#define PT_XYZ_FRAMES_H

#include "engine/data/format.h"

/* Returns 0 when the whole file was read, -1 when reading had to stop
 * (reported in errs), or the nonzero value returned by fn. */
int pt_xyz_frames_read(const char *path, const pt_read_options *opt, pt_structure_fn fn,
                       void *ctx, pt_errors *errs);

#endif
