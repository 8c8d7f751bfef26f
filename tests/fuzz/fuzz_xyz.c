/* fuzz_xyz.c — the text formats as an upload reaches them: pt_read_structures
 * with the format detected (reader.c's dispatch and sniff, then per structure
 * extended XYZ, plain XYZ or raw QM9: xyz_frames.c, xyz_read.c,
 * xyz_comment.c, qm9_read.c, linereader.c, numparse.c), at the server's
 * default max_atoms.  Every structure handed out is checked
 * (fuzz_structure.h). */
#include "tests/fuzz/fuzz_structure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_read_options opt = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .display_name = "upload.xyz"};
    pt_fuzz_read_file(pt_fuzz_file(data, size), &opt);
    return 0;
}
