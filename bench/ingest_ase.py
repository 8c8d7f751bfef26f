#!/usr/bin/python3
"""ingest_ase.py FILE — the ASE side of bench_ingest.sh.

Times only ase.io.read(FILE, index=":") (the import of ASE is not counted)
and prints one JSON line: {"seconds", "structures", "atoms"}.  Run it with
Debian's /usr/bin/python3, which has python3-ase."""
import json
import sys
import time

import ase.io


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ingest_ase.py FILE")
    t0 = time.perf_counter()
    images = ase.io.read(sys.argv[1], index=":")
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "structures": len(images),
                      "atoms": sum(len(a) for a in images)}))


if __name__ == "__main__":
    main()
