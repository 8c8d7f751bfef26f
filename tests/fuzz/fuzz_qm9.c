/* fuzz_qm9.c — the raw QM9 format asked for by name (--format qm9): every
 * structure goes through qm9_read.c (the "gdb" property line, atom lines
 * with Mathematica numbers, the three trailer lines). */
#include "tests/fuzz/fuzz_structure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_read_options opt = {.format = PT_FORMAT_QM9, .max_atoms = 1000};
    pt_fuzz_read_file(pt_fuzz_file(data, size), &opt);
    return 0;
}
