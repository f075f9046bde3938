"""What ptxas makes of gluon-flash's kernels for sm90, without a GPU: registers and spill bytes
per tile config (D = 128, bf16, causal), from Triton's own ptxas. A spill in the consumers'
loop costs a local-memory round trip per key block, so try a tile here before timing it.

--module compiles another copy of variants/gluon_flash.py (a patch tried). --where also says
where each spill sits in the SASS (Triton's nvdisasm): inside a loop that
issues the wgmmas (HGMMA: a consumer's key-block loop, so once a key block) or outside one (a
tile's edge, once a tile).

--order prints each key-block loop as ptxas scheduled it, and how many of its exp2s issue
before its wait for P V: the PTX asks for block j's softmax beside P_{j-1} V_{j-1}, but ptxas
may hoist that wait above the softmax (it did, until a branch ended the softmax's basic block).

Usage: python dev/gluon_ptxas.py [--tiles BLOCK_M=128,BLOCK_N=128,STAGES=3,num_warps=4 --ws]
       [--where] [--order] [--head-dim 64]
(no --tiles: the variant's WS_TILES, PERSISTENT_TILES, PERSISTENT_TILES_D128 (D = 128's
default), FREE_ISSUE_TILES_D128 and SINGLE_TILES_D128; with --head-dim 64, tiles(64, 512) and
tiles(64, 8192))
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compilekit.variants import gluon_flash  # noqa: E402
from tests.variants.sm90_sass import (  # noqa: E402
    exp2_before_full_wait,
    key_block_bodies,
    key_block_loops,
    order,
    sass_of,
)
from tests.variants.test_gluon_flash import _ptxas_log, _sm90_ptx_of  # noqa: E402


def usage(ptx: str) -> str:
    """ptxas -v's registers and spill lines for `ptx` assembled for sm90a."""
    log = _ptxas_log(ptx)
    return "; ".join(
        m.strip() for m in re.findall(r"\d+ bytes spill stores[^\n]*|Used [^\n]*", log)
    )


def spill_sites(ptx: str) -> str:
    """Each local store and load (STL, LDL) in the sm90a SASS of `ptx`, counted by whether a
    loop around it issues wgmmas (HGMMA): the innermost backward branch's range holding it."""
    code, labels = sass_of(ptx)
    inner = key_block_loops(code, labels)
    in_mma_loop = {True: 0, False: 0}
    for address, text in code:
        if re.search(r"\b(STL|LDL)", text):
            in_mma_loop[any(s <= address <= e for s, e in inner)] += 1
    syncs = []
    for s, e in inner:  # each key-block loop's rendezvous, barrier waits and arrives
        ops = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for a, t in code if s <= a <= e]
        counted = collections.Counter(op for op in ops if op.startswith(("BAR", "SYNCS")))
        syncs.append(
            f"{len(ops)} instructions, " + ", ".join(f"{n} {op}" for op, n in counted.items())
        )
    return (
        f"{in_mma_loop[True]} local stores/loads in a loop of wgmmas (once a key block), "
        f"{in_mma_loop[False]} outside one; key-block loops: " + "; ".join(syncs)
    )


def loop_orders(ptx: str) -> str:
    """Each key-block loop as ptxas scheduled it (sm90_sass.order), and how many of its exp2s
    issue before its wait for P V: all of them where the softmax overlaps the P V wgmma."""
    lines = []
    for body in key_block_bodies(ptx):
        before, total = exp2_before_full_wait(body)
        lines.append(f"  {before}/{total} exp2 before the P V wait: {order(body)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", help="K=V,... constexprs of the kernel")
    parser.add_argument("--ws", action="store_true", help="the warp-specialized kernel")
    parser.add_argument("--where", action="store_true", help="where in the SASS each spill sits")
    parser.add_argument(
        "--order", action="store_true", help="each key-block loop's order as ptxas scheduled it"
    )
    parser.add_argument("--head-dim", type=int, default=128, help="64 or 128 (default 128)")
    parser.add_argument("--module", help="another copy of variants/gluon_flash.py (a patch tried)")
    args = parser.parse_args()
    module = gluon_flash
    if args.module:  # beside the current one, its op renamed (the bench's --gluon-baseline)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from triton_flash_bench import baseline_module

        module = baseline_module(args.module)
    if args.tiles:
        cfg = {k: int(v) for k, v in (kv.split("=") for kv in args.tiles.split(","))}
        configs = {args.tiles + (" ws" if args.ws else ""): {**cfg, "WS": args.ws}}
    elif args.head_dim == 64:  # D = 64's defaults, either side of PERSISTENT_FROM_SEQ_D64
        configs = {f"tiles(64, {seq})": module.tiles(64, seq) for seq in (512, 8192)}
    else:
        configs = {
            name: getattr(module, name)
            for name in (
                "WS_TILES",
                "PERSISTENT_TILES",
                "PERSISTENT_TILES_D128",
                "FREE_ISSUE_TILES_D128",
                "SINGLE_TILES_D128",
            )
        }
    for name, tiles in configs.items():
        ptx = _sm90_ptx_of(module, tiles, args.head_dim)
        print(f"{name}: {usage(ptx)}" + (f"; {spill_sites(ptx)}" if args.where else ""))
        if args.order:
            print(loop_orders(ptx))


if __name__ == "__main__":
    main()
