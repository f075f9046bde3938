"""`compilekit html`: one self-contained HTML page per run, per sweep, and per diff of two runs.

Jinja2 fills the templates in report/templates/; Pygments highlights the variant's source
and the generated kernels. CSS and the few lines of script that make kernels clickable are
inline and nothing is fetched: a page opens from disk or as a CI artifact. Kernel code is
inlined only on its own run's page; a sweep page links to run pages instead, so it stays small
for hundreds of cells.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import sys
from collections import defaultdict

from compilekit.evidence import roofline
from compilekit.model import result as results_mod
from compilekit.model.errors import UserError
from compilekit.model.store import write_text
from compilekit.report import cellview, memoryview, opsview
from compilekit.report import runview as report
from compilekit.report.highlight import highlight_lines

PAGE = "index.html"
# a generated kernel longer than this is cut on the page (the whole file stays linked)
MAX_INLINE_CHARS = 200_000
UNITS = {"_ms": "ms", "_s": "s", "_mb": "MiB", "tflops": "TFLOP/s", "flops": "FLOP"}
# Headless Chromium for the page tests and docs/screenshots.py: as root, on a machine whose
# network is closed (no sandbox, no background fetches)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("compilekit.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context) -> str:
    from pygments.formatters import HtmlFormatter

    css = HtmlFormatter(style="default").get_style_defs(".hl")
    return _env().get_template(template).render(pygments_css=css, **context)


def _unit(name: str) -> str:
    return next((u for suffix, u in UNITS.items() if name.endswith(suffix)), "")


def numbers(result) -> list[tuple[str, str, str]]:
    """(field, value, unit) for every scalar in result.json; nested records come separately."""
    rows = []
    for field in dataclasses.fields(result):
        value = getattr(result, field.name)
        if field.name == "run_dir" or isinstance(value, (dict, list)):
            continue
        if isinstance(value, float):
            value = f"{value:.6g}"
        rows.append((field.name, "-" if value is None else str(value), _unit(field.name)))
    return rows


def nested(result) -> list[tuple[str, str]]:
    """(field, pretty JSON) for the dict and list fields of result.json that hold anything."""
    import json

    return [
        (f.name, json.dumps(getattr(result, f.name), indent=1, default=str))
        for f in dataclasses.fields(result)
        if isinstance(getattr(result, f.name), (dict, list)) and getattr(result, f.name)
    ]


def _resolve_source(path: str) -> tuple[str | None, str]:
    """(a readable path for a source file named in a kernel map, a note if it moved): a run
    made on another machine names files there; a built-in variant is read from this checkout."""
    if os.path.isfile(path):
        return path, ""
    parts = path.replace("\\", "/").split("/")
    if "variants" in parts:  # variants/ in a checkout, compilekit/variants/ installed
        from compilekit.compile.variant import VARIANTS_DIR

        here = os.path.join(VARIANTS_DIR, *parts[parts.index("variants") + 1 :])
        if os.path.isfile(here):
            return here, f"read from {here} (the run's {path} is not on this machine)"
    return None, f"{path} is not on this machine: only the mapped lines are shown"


def _variant_file(variant: str) -> str | None:
    from compilekit.compile import variant as variant_mod

    try:
        return variant_mod.source_file(variant)
    except Exception:  # an unknown or moved variant: the kernel map's files still show
        return None


def source_views(result, kmap: dict) -> list[dict]:
    """Each source file the kernels came from (the variant's own first): its lines, highlighted,
    each with the ms per forward attributed to it, a heat share, and the kernels it feeds. A
    file the run named on another machine is matched to this checkout's copy where it has one."""
    moved = {}  # the run's path -> (a readable path or None, a note)

    def canonical(path: str) -> str:
        if path not in moved:
            moved[path] = _resolve_source(path)
        return moved[path][0] or path

    attributed, recorded, feeds = {}, {}, defaultdict(list)
    for row in kmap["by_source_line"]:
        key = (canonical(row["file"]), row["line"])
        attributed[key] = attributed.get(key, 0.0) + row["attributed_ms"]
        recorded[key] = row["code"]
    for index, rec in enumerate(kmap["kernels"]):
        for ln in rec["source_lines"]:
            feeds[(canonical(ln["file"]), ln["line"])].append(f"k{index}")
    notes = {canonical(p): note for p, (_, note) in moved.items() if note}
    # the variant's own file first, then the others by the time attributed to them (a model's
    # factory file, which no kernel comes from, after the modeling files that carry the time)
    per_file = defaultdict(float)
    for (path, _), ms in attributed.items():
        per_file[path] += ms
    mapped = sorted(
        dict.fromkeys(f for f, _ in list(attributed) + list(feeds)), key=lambda f: -per_file[f]
    )
    own = [f for f in [_variant_file(result.variant)] if f]
    files = list(dict.fromkeys(own + mapped if any(per_file[f] for f in own) else mapped + own))
    peak = max(attributed.values(), default=0.0) or 1.0
    views = []
    for path in files:
        note = notes.get(path, "")
        if os.path.isfile(path):
            with open(path, errors="replace") as f:
                text = f.read()
            numbered = list(enumerate(text.splitlines(), start=1))
            html_lines = highlight_lines(text, path)
        else:
            numbered = sorted((ln, code) for (f, ln), code in recorded.items() if f == path)
            html_lines = [highlight_lines(code, path)[0] for _, code in numbered]
        stale = [
            n
            for n, code in numbered
            if (path, n) in recorded and recorded[(path, n)].strip() != code.strip()
        ]
        if stale:
            note += (
                f"{'; ' if note else ''}lines {', '.join(map(str, stale[:5]))} differ from what "
                "the run recorded: the file changed since"
            )
        rows = []
        for (number, _), html in zip(numbered, html_lines):
            ms = attributed.get((path, number))
            rows.append(
                {
                    "number": number,
                    "html": html,
                    "ms": ms,
                    "heat": round(ms / peak, 3) if ms else 0.0,
                    "kernels": " ".join(feeds.get((path, number), [])),
                }
            )
        views.append({"path": path, "name": os.path.basename(path), "note": note, "rows": rows})
    return views


def _library_note(rec: dict) -> str:
    name = rec["name"].lower()
    for needle, library in (
        ("cudnn", "cuDNN"),
        ("flash", "FlashAttention (PyTorch's build)"),
        ("fmha", "memory-efficient attention (xFormers/CUTLASS)"),
        ("gemm", "cuBLAS / CUTLASS GEMM"),
        ("sm90", "cuBLAS / CUTLASS GEMM"),
        ("memcpy", "a copy"),
        ("memset", "a memset"),
    ):
        if needle in name:
            return f"library kernel: {library}, launched by {rec.get('launcher', '?')}"
    return (
        f"no generated source: a library or eager kernel, launched by {rec.get('launcher', '?')}"
    )


def kernel_views(run_dir: str, kmap: dict) -> list[dict]:
    """The kernel list: id, name, kind, calls, times, share, fused ops, code (highlighted)."""
    ids = report.kernel_ids(kmap)
    views = []
    for index, (kid, rec) in enumerate(zip(ids, kmap["kernels"])):
        code_lines, cut = None, False
        path = rec.get("source_file")
        if path and os.path.isfile(os.path.join(run_dir, path)):
            with open(os.path.join(run_dir, path), errors="replace") as f:
                code = f.read()
            cut = len(code) > MAX_INLINE_CHARS
            code_lines = highlight_lines(code[:MAX_INLINE_CHARS], path)
        views.append(
            {
                "dom_id": f"k{index}",
                "id": kid,
                "rec": rec,
                "per_forward_ms": rec["device_ms"] * rec["calls_per_forward"],
                "share_pct": round(100 * (rec.get("share") or 0.0), 1),
                "code_lines": code_lines,
                "code_cut": cut,
                "library_note": None if code_lines else _library_note(rec),
                "roofline": _roofline_text(rec.get("roofline") or {}),
                "roofline_from": roofline_sources(rec),
                "lines": ", ".join(
                    f"{os.path.basename(ln['file'])}:{ln['line']}" for ln in rec["source_lines"]
                ),
            }
        )
    return views


def roofline_sources(rec: dict) -> str:
    """Where a kernel's bytes and FLOPs came from, where not from the profiler, or why it has
    no bytes (the page's tooltip, as `compilekit kernels` lists them under its table); ""
    where both came from the profiler."""
    found = [
        (what, rec.get(key)) for what, key in (("bytes", "bytes_from"), ("FLOPs", "flops_from"))
    ]
    notes = [report.source_note(what, source) for what, source in found if source]
    if rec.get("bytes_unknown"):  # off the roofline: why, and the tensor where one is named
        at = f" ({rec['bytes_unknown_at']})" if rec.get("bytes_unknown_at") else ""
        notes.append(f"no bytes: {rec['bytes_unknown']}{at}")
    return "; ".join(notes)


def _roofline_text(roof: dict) -> str:
    """ "memory, 41% of copy GB/s" / "compute, 63% of matmul TFLOP/s" / "launch" / "-"; a share
    over the measured ceiling says so."""
    bound = roof.get("bound")
    key, of = roofline.CLASS_SHARE.get(bound, (None, None))
    if key is None or roof.get(key) is None:
        return bound or "-"
    text = f"{bound}, {roof[key]:.0%} of {of}"
    over = roofline.over_ceiling(roof, (key,))
    return text + (" (over the kept ceiling: `compilekit env --remeasure`)" if over else "")


def evidence_links(run_dir: str) -> list[tuple[str, str]]:
    """(relative path, what it is) for the run's files a reader may open next."""
    found = []
    for pattern, what in (
        ("trace.json", "profiler trace: open it in https://ui.perfetto.dev (Open trace file)"),
        ("log.txt", "the cell processes' log"),
        ("result.json", "every number on this page"),
        ("kernels.json", "the kernel map"),
        ("kernels.json.gz", "the kernel map (gzipped)"),
        ("ops.json", "the op cost matrix"),
        ("ops.json.gz", "the op cost matrix (gzipped)"),
        (
            "memory_snapshot.pickle",
            "one forward's CUDA memory: open it in https://pytorch.org/memory_viz",
        ),
        ("memory_timeline.json", "that forward's curve and the tensors live at its peak"),
        ("memory_timeline.json.gz", "that forward's curve and the tensors at its peak (gzipped)"),
        ("output_code*.py", "Inductor's output code"),
        ("kernels/*", "generated kernel"),
        ("depyf/*", "depyf dump"),
        ("torch_trace/*", "TORCH_TRACE log (tlparse reads it)"),
    ):
        for path in sorted(glob.glob(os.path.join(run_dir, pattern))):
            found.append((os.path.relpath(path, run_dir), what))
    return found


def run_page(run_dir: str) -> str:
    """Render run_dir/index.html; return its path."""
    result = results_mod.read_run(run_dir)
    kmap, missing = None, ""
    if result.measured:
        try:
            kmap = report.load_kernel_map(run_dir, result)
        except UserError as exc:  # the numbers stand; the page says what is missing
            missing = str(exc)
    setting = cellview.setting_name(result)  # its config and pass, if any
    html = render(
        "run.html.j2",
        title=f"{result.variant} / {result.mode} / {result.shape}"
        + (f" ({setting})" if setting else ""),
        result=result,
        summary=cellview.cell_summary(result),
        notes=cellview.cell_notes(result),
        numbers=numbers(result),
        nested=nested(result),
        sources=source_views(result, kmap) if kmap else [],
        kernels=kernel_views(run_dir, kmap) if kmap else [],
        kmap=kmap,
        links=evidence_links(run_dir),
        ops=ops_tables(
            opsview.ranked_both(run_dir, result.device == "cuda", 10) if result.measured else None,
            result.device == "cuda",
            result.peak_memory_mb,
            "a profile of its own, after the timed calls",
            "<code>compilekit ops RUN --by time|memory</code> has the whole table.",
        ),
        memory=memoryview.page_timeline(run_dir),
        log_tail=_log_tail(run_dir) if not result.measured else "",
        missing=missing,
    )
    path = os.path.join(run_dir, PAGE)
    write_text(path, html)
    return path


def ops_tables(both, cuda: bool, peak_mb, memory_from: str, whole: str) -> dict | None:
    """What templates/ops.html.j2 shows: `both` (opsview.rank_both) and how to read it."""
    if not both:
        return None
    return {**both, "cuda": cuda, "peak_mb": peak_mb, "memory_from": memory_from, "whole": whole}


def profile_page(found, out_dir: str) -> str:
    """Render out_dir/index.html for a compilekit.profile() block: its op cost matrix by time
    and memory and its kernels; return its path."""
    cuda = found.device == "cuda"
    total = found.forward_device_ms or 1.0
    kernels = [
        {**k, "share_pct": round(100 * k["device_ms"] * k["calls_per_forward"] / total)}
        for k in sorted(found.kernels, key=lambda k: -k["device_ms"] * k["calls_per_forward"])
    ]
    html = render(
        "profile.html.j2",
        title="compilekit.profile()",
        found=found,
        kernels=kernels,
        ops=ops_tables(
            opsview.rank_both(found.ops, cuda, 20),
            cuda,
            found.peak_memory_mb,
            "the same profile, with profile_memory",
            "ops.json beside this page has every op.",
        ),
    )
    path = os.path.join(out_dir, PAGE)
    write_text(path, html)
    return path


def _log_tail(run_dir: str, lines: int = 40) -> str:
    path = os.path.join(run_dir, "log.txt")
    if not os.path.isfile(path):
        return ""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def diff_page(run_a: str, run_b: str, out_path: str) -> str:
    """Render the kernels that appeared, vanished or changed between two runs to out_path."""
    diff = report.diff_rows(run_a, run_b)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    html = render(
        "diff.html.j2",
        title=f"diff {diff['a'].label} vs {diff['b'].label}",
        diff=diff,
        href_a=os.path.relpath(os.path.join(run_a, PAGE), out_dir),
        href_b=os.path.relpath(os.path.join(run_b, PAGE), out_dir),
        peak=max([max(r["a_ms"] or 0, r["b_ms"] or 0) for r in diff["rows"]] + [1e-12]),
    )
    write_text(out_path, html)
    return out_path


def write_quietly(render, *args, log=sys.stderr) -> str | None:
    """Render a page where a run or sweep ends: a page that cannot be drawn is one line on
    `log`, never a failed cell (the numbers are already saved)."""
    try:
        return render(*args)
    except Exception as exc:  # noqa: BLE001 - the page is a view; the run stands without it
        if log is not None:
            print(f"compilekit: no HTML page for {args[0]}: {exc}", file=log)
        return None
