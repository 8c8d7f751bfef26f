/* fuzz_extxyz.c — extended XYZ asked for by name (--format extxyz): every
 * comment line goes through xyz_comment.c (ASE's key=value splitting,
 * Properties, Lattice, pbc, stress), whatever it looks like.  The dictionary
 * tests/fuzz/extxyz.dict holds the keys and values ASE writes. */
#include "tests/fuzz/fuzz_structure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_read_options opt = {.format = PT_FORMAT_EXTXYZ, .max_atoms = 1000};
    pt_fuzz_read_file(pt_fuzz_file(data, size), &opt);
    return 0;
}
