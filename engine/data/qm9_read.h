/* qm9_read.h — one molecule of the original QM9 format (qm9_read.c), read
 * after its atom-count and "gdb ..." lines were consumed by the framing loop
 * (xyz_frames.c), including its three trailer lines. */
#ifndef PT_QM9_READ_H
#define PT_QM9_READ_H

#include "engine/data/format.h"
#include "engine/data/linereader.h"

#define PT_QM9_TRAILER_LINES 3   /* frequencies, SMILES, InChI */

pt_parse_status pt_qm9_parse(pt_reader *r, pt_structure *s, char *comment);

#endif
