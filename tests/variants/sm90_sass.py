"""The sm90a SASS of a PTX, read without a GPU through Triton's own ptxas and nvdisasm: its
instructions, the key-block loops of gluon-flash's consumers, and what ptxas made of the order
the kernel asked for in them (PTX order is a request: ptxas schedules). Used by
tests/variants/test_gluon_flash.py and dev/gluon_ptxas.py."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

# the wait for every wgmma group of the warpgroup: P V's too, in a consumer's loop
FULL_WAIT = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x0\b")


def ptxas() -> str | None:
    """The path of the ptxas Triton ships for sm90, or None where this Triton brings none."""
    try:
        from triton.backends.nvidia import compiler
    except ImportError:
        return None
    try:
        tool = compiler.get_ptxas(90)
    except TypeError:  # Triton 3.6 takes no arch
        tool = compiler.get_ptxas()
    path = getattr(tool, "path", None) if tool else None
    return path if path and os.path.exists(path) else None


def tools() -> tuple[str, str] | None:
    """(ptxas, nvdisasm) as Triton ships them, or None where this Triton brings none."""
    path = ptxas()
    if path is None:
        return None
    nvdisasm = os.path.join(os.path.dirname(path), "nvdisasm")
    return (path, nvdisasm) if os.path.exists(nvdisasm) else None


def sass_of(ptx: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """(instructions as (address, text), label -> address) of `ptx` assembled for sm90a."""
    assembler, nvdisasm = tools() or (None, None)
    if assembler is None:
        raise FileNotFoundError("this Triton brings no ptxas and nvdisasm")
    with tempfile.TemporaryDirectory() as folder:
        src, cubin = os.path.join(folder, "k.ptx"), os.path.join(folder, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run([assembler, "--gpu-name", "sm_90a", src, "-o", cubin], check=True)
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
    return code, labels


def key_block_loops(code: list[tuple[int, str]], labels: dict[str, int]) -> list[tuple[int, int]]:
    """The (first, last) addresses of each innermost loop that issues wgmmas (HGMMA): a
    consumer's loop over key blocks (a loop over tiles holds one)."""
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
    with_mma = [(s, e) for s, e in loops if any(s <= a <= e for a in mma)]
    return [
        (s, e) for s, e in with_mma if not any(s <= s2 and e2 <= e and (s2, e2) != (s, e)
                                               for s2, e2 in with_mma)
    ]  # fmt: skip


def key_block_bodies(ptx: str) -> list[list[str]]:
    """The instructions of each key-block loop (key_block_loops) of `ptx` in sm90a SASS."""
    code, labels = sass_of(ptx)
    return [
        [text for address, text in code if first <= address <= last]
        for first, last in key_block_loops(code, labels)
    ]


def exp2_before_full_wait(body: list[str]) -> tuple[int, int]:
    """(the exp2s (MUFU.EX2) a loop body issues before its wait for every wgmma group, all of
    them): equal where block j's softmax runs while P_{j-1} V_{j-1} is still in flight."""
    exp2 = [i for i, text in enumerate(body) if "MUFU.EX2" in text]
    wait = next((i for i, text in enumerate(body) if FULL_WAIT.search(text)), len(body))
    return sum(i < wait for i in exp2), len(exp2)


def order(body: list[str]) -> str:
    """A loop body in a line: G a wgmma, E an exp2, c a conversion to 16 bits, m a multiply,
    b a named barrier, s an mbarrier operation, [W n] a wait for all but n wgmma groups;
    runs of four or more as Gx16."""
    marks = []
    for text in body:
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]
        wait = re.search(r"DEPBAR\.LE\s+gsb0,\s*(0x\d+)", text)
        marks.append(
            f"[W{int(wait[1], 16)}]" if wait
            else next((m for p, m in _MARKS if op.startswith(p)), "")
        )  # fmt: skip
    return re.sub(r"([A-Za-z])\1{3,}", lambda m: f"{m[1]}x{len(m[0])}", "".join(marks))


_MARKS = (("HGMMA", "G"), ("MUFU.EX2", "E"), ("F2FP", "c"), ("FMUL", "m"), ("BAR", "b"),
          ("SYNCS", "s"))  # fmt: skip
