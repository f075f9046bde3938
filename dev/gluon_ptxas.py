"""What ptxas makes of gluon-flash's kernels for sm90, without a GPU: registers and spill bytes
per tile config (D = 128, bf16, causal), from Triton's own ptxas. A spill in the consumers'
loop costs a local-memory round trip per key block, so try a tile here before timing it.

--module compiles another copy of variants/gluon_flash.py (a patch tried). --where also says
where each spill sits in the SASS (Triton's nvdisasm): inside a loop that
issues the wgmmas (HGMMA: a consumer's key-block loop, so once a key block) or outside one (a
tile's edge, once a tile).

Usage: python dev/gluon_ptxas.py [--tiles BLOCK_M=128,BLOCK_N=128,STAGES=3,num_warps=4 --ws]
       [--where]
(no --tiles: the variant's WS_TILES, PERSISTENT_TILES, PERSISTENT_TILES_D128 (D = 128's default)
and SINGLE_TILES_D128)
"""

from __future__ import annotations

import argparse
import collections
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


def spill_sites(ptx: str) -> str:
    """Each local store and load (STL, LDL) in the sm90a SASS of `ptx`, counted by whether a
    loop around it issues wgmmas (HGMMA): the innermost backward branch's range holding it."""
    import subprocess
    import tempfile

    from triton.backends.nvidia import compiler

    try:
        ptxas = compiler.get_ptxas(90).path
    except TypeError:  # Triton 3.6 takes no arch
        ptxas = compiler.get_ptxas().path
    with tempfile.TemporaryDirectory() as folder:
        src, cubin = os.path.join(folder, "k.ptx"), os.path.join(folder, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run([ptxas, "--gpu-name", "sm_90a", src, "-o", cubin], check=True)
        nvdisasm = os.path.join(os.path.dirname(ptxas), "nvdisasm")
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True).stdout
    code, labels, pending = [], {}, []
    for line in sass.splitlines():
        if label := re.match(r"\s*(\.L_x_\d+):", line):
            pending.append(label[1])
        elif found := re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line):
            address = int(found[1], 16)
            labels.update(dict.fromkeys(pending, address))
            pending = []
            code.append((address, found[2]))
    # the retry stubs of mbarrier waits sit after the last EXIT, each branching back to its
    # wait: not loops of the kernel's own
    end = max((address for address, text in code if "EXIT" in text), default=0)
    loops = [
        (labels[target[1]], address)
        for address, text in code
        if address <= end
        and (target := re.search(r"BRA.*?(\.L_x_\d+)", text))
        and labels.get(target[1], address) < address
    ]
    mma = [address for address, text in code if "HGMMA" in text]
    mma_loops = [(s, e) for s, e in loops if any(s <= a <= e for a in mma)]
    # a key-block loop: one issuing wgmmas around no other such loop (a tile's loop holds one)
    inner = [
        (s, e) for s, e in mma_loops if not any(s <= s2 and e2 <= e and (s2, e2) != (s, e)
                                                 for s2, e2 in mma_loops)
    ]  # fmt: skip
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", help="K=V,... constexprs of the kernel")
    parser.add_argument("--ws", action="store_true", help="the warp-specialized kernel")
    parser.add_argument("--where", action="store_true", help="where in the SASS each spill sits")
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
    else:
        configs = {
            name: getattr(module, name)
            for name in (
                "WS_TILES",
                "PERSISTENT_TILES",
                "PERSISTENT_TILES_D128",
                "SINGLE_TILES_D128",
            )
        }
    for name, tiles in configs.items():
        ptx = _sm90_ptx_of(module, tiles)
        print(f"{name}: {usage(ptx)}" + (f"; {spill_sites(ptx)}" if args.where else ""))


if __name__ == "__main__":
    main()
