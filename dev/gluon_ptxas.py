"""What ptxas makes of gluon-flash's kernels for sm90, without a GPU: registers and spill bytes
per tile config (D = 128, bf16, causal), from Triton's own ptxas. A spill in the consumers'
loop costs a local-memory round trip per key block, so try a tile here before timing it.

Usage: python dev/gluon_ptxas.py [--tiles BLOCK_M=128,BLOCK_N=128,STAGES=3,num_warps=4 --ws]
(no --tiles: the variant's WS_TILES, PERSISTENT_TILES, PERSISTENT_TILES_D128 (D = 128's default)
and SINGLE_TILES_D128)
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.variants.test_gluon_flash import _ptxas_log, _sm90_ptx_of  # noqa: E402
from variants import gluon_flash  # noqa: E402


def usage(ptx: str) -> str:
    """ptxas -v's registers and spill lines for `ptx` assembled for sm90a."""
    log = _ptxas_log(ptx)
    return "; ".join(
        m.strip() for m in re.findall(r"\d+ bytes spill stores[^\n]*|Used [^\n]*", log)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", help="K=V,... constexprs of the kernel")
    parser.add_argument("--ws", action="store_true", help="the warp-specialized kernel")
    args = parser.parse_args()
    if args.tiles:
        cfg = {k: int(v) for k, v in (kv.split("=") for kv in args.tiles.split(","))}
        configs = {args.tiles + (" ws" if args.ws else ""): {**cfg, "WS": args.ws}}
    else:
        configs = {
            name: getattr(gluon_flash, name)
            for name in (
                "WS_TILES",
                "PERSISTENT_TILES",
                "PERSISTENT_TILES_D128",
                "SINGLE_TILES_D128",
            )
        }
    for name, tiles in configs.items():
        print(f"{name}: {usage(_sm90_ptx_of(gluon_flash, tiles))}")


if __name__ == "__main__":
    main()
