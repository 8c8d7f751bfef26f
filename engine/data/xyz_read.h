/* xyz_read.h — the atom blocks of plain XYZ and extended XYZ (xyz_read.c).
 *
 * Each parser reads the atom lines of one structure whose atom-count line and
 * comment line were consumed by the framing loop (xyz_frames.c) and fills s.
 * comment is the NUL-terminated comment line; it is invalidated by the first
 * read, so parsers take what they need from it first. */
#ifndef PT_XYZ_READ_H
#define PT_XYZ_READ_H

#include "engine/data/format.h"
#include "engine/data/linereader.h"

pt_parse_status pt_xyz_parse(pt_reader *r, pt_structure *s, char *comment);
pt_parse_status pt_extxyz_parse(pt_reader *r, pt_structure *s, char *comment);

#endif
