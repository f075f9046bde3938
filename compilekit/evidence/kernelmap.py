"""One record per kernel of a forward, joined with its ATen ops, source lines and time.

Pure functions over text and dicts, so they are testable without a compile. Source of truth, in
order: Inductor's provenance artifacts (torch >= 2.9, a real compile), else the comments Inductor
writes into Triton kernels joined with the FX graph's `# File:` comments. Each record says which.
"""

from __future__ import annotations

import json
import os
import re

from compilekit.evidence import codecost, partial
from compilekit.evidence.frames import origin, user_frames
from compilekit.evidence.shares import HELPER_KERNEL, library_class

NO_OP = "(no torch op)"  # the launcher of a kernel the profiler linked to no CPU op
NODE_RE = re.compile(
    r'^\s*(?P<node>\w+): "[^"]*" = torch\.ops\.'
    r"(?P<target>[\w.]+?)(?:\.default|\.Tensor|\.Scalar|\.\w+)?\(",
    re.MULTILINE,
)
FILE_COMMENT_RE = re.compile(
    r"^\s*# File: (?P<file>.+?):(?P<line>\d+) in (?P<func>\S+), code: (?P<code>.*)$"
)
TRITON_COMMENT_RE = re.compile(
    r"# Topologically Sorted Source Nodes: \[(?P<nodes>[^\]]*)\], "
    r"Original ATen: \[(?P<aten>[^\]]*)\]"
)
GENERATED_PREFIXES = ("triton_", "cpp_")
LIBRARY_RE = re.compile(r"flash|fmha|cudnn|cutlassF|efficient_attention|sdpa", re.IGNORECASE)


def parse_graph_code(code: str) -> dict[str, dict]:
    """{node: {"target": "aten.mul", "file", "line", "code"}} from printed FX graph code."""
    nodes, where = {}, None
    for line in code.splitlines():
        comment = FILE_COMMENT_RE.match(line)
        if comment:
            where = {
                "file": comment["file"],
                "line": int(comment["line"]),
                "code": comment["code"].strip(),
            }
            continue
        node = NODE_RE.match(line)
        if node:
            nodes[node["node"]] = {"target": node["target"], **(where or {})}
    return nodes


def _dedupe(lines: list[dict]) -> list[dict]:
    seen, out = set(), []
    for ln in lines:
        if (ln["file"], ln["line"]) not in seen:
            seen.add((ln["file"], ln["line"]))
            out.append(ln)
    return out


def _key_base(key: str) -> str:
    """`extern_kernels.bmm:3` -> `bmm`; `triton_per_fused_x_0:2` -> `triton_per_fused_x_0`."""
    base = key.rsplit(":", 1)[0]
    for prefix in ("extern_kernels.", "torch.ops.aten.", "aten."):
        base = base.removeprefix(prefix)
    return base.removesuffix(".default")


def provenance_index(graph: dict) -> dict[str, list[dict]]:
    """{kernel or extern op: [{"aten_ops", "source_lines"}] per call site, in graph order}.

    From one graph's provenance artifacts: `extern_kernels.bmm:1` and `:3` are the first and
    second bmm of the graph. A site whose call in the output code gives its tensors' sizes
    carries its bytes and a matmul's FLOPs ("code_bytes", "code_flops", "graph_flops":
    codecost.site_costs).
    """
    stacks = graph.get("kernel_stack_traces") or {}
    mappings = graph.get("node_mappings") or {}
    code_to_post = mappings.get("cppCodeToPost") or {}
    post_nodes = parse_graph_code(graph.get("post_grad_graph", ""))
    costs = codecost.site_costs(graph)
    for key, nodes in code_to_post.items():  # what its gathers and slices do not touch
        names = costs.get(key, {}).get("code_args") or []
        untouched = partial.untouched_bytes(graph.get("post_grad_graph", ""), nodes, names)
        if untouched:
            costs[key]["untouched_bytes"] = untouched
    index: dict[str, list] = {}
    by_number = lambda key: int(key.rsplit(":", 1)[1]) if key.rsplit(":", 1)[-1].isdigit() else 0  # noqa: E731
    for key in sorted(set(stacks) | set(code_to_post), key=by_number):
        rec = {"aten_ops": [], "source_lines": [], "order": by_number(key), "site": _key_base(key)}
        rec.update(costs.get(key, {}))
        index.setdefault(_key_base(key), []).append(rec)
        for node in code_to_post.get(key, []):
            target = post_nodes.get(node, {}).get("target")
            if target and target not in rec["aten_ops"]:
                rec["aten_ops"].append(target)
        for stack in stacks.get(key, []):
            frames = user_frames(stack)
            rec["source_lines"] = _dedupe(rec["source_lines"] + frames)
            rec["origin_lines"] = _dedupe(rec.get("origin_lines", []) + origin(frames))
    return index


def comment_index(graph: dict, kernel_sources: dict[str, str]) -> dict[str, list[dict]]:
    """The fallback: Triton kernels' `Source Nodes` comments joined with the Dynamo graph's
    `# File:` lines."""
    dynamo_nodes = parse_graph_code(graph.get("dynamo_graph", ""))
    index = {}
    for name, src in kernel_sources.items():
        m = TRITON_COMMENT_RE.search(src)
        if not m:
            continue
        nodes = [n.strip() for n in m["nodes"].split(",") if n.strip()]
        lines = [
            {k: dynamo_nodes[n][k] for k in ("file", "line", "code")}
            for n in nodes
            if "file" in dynamo_nodes.get(n, {})
        ]
        index[name] = [
            {
                "aten_ops": [a.strip() for a in m["aten"].split(",") if a.strip()],
                "source_lines": _dedupe(lines),
                "origin_lines": _dedupe(lines),
            }
        ]
    return index


def classify(name: str, launcher: str, source: str | None, compiled: bool) -> str:
    """generated | template | extern | library | memcpy | aten (an eager op)."""
    if name.startswith("triton_tem_") or (source and "micro_gemm" in source.lower()):
        return "template"
    if name.startswith(GENERATED_PREFIXES):
        return "generated"
    if name.lower().startswith(("memcpy", "memset")):
        return "memcpy"
    if LIBRARY_RE.search(name) or LIBRARY_RE.search(launcher):
        return "library"
    return "extern" if compiled else "aten"


def _compiled_site(k: dict, by_provenance: dict, by_comments: dict) -> tuple[dict | None, str]:
    """(what the compile recorded about a profiled kernel, by its name or its launching op,
    and where that came from), or (None, "none")."""
    for key in (k["name"], k["launcher"].removeprefix("aten::")):
        for index, how in (
            (by_provenance, "inductor provenance"),
            (by_comments, "kernel comments"),
        ):
            sites = index.get(key)
            if sites:
                # the n-th call of an op in the forward is its n-th call site in the graph; in
                # a replay, the n-th launch of a kernel by the region
                n = k.get("launcher_index", 0) + k.get("launch_in_op", 0)
                return sites[min(n, len(sites) - 1)], how
    return None, "none"


def build_map(
    forward: dict,
    graphs: dict,
    kernel_files: dict[str, str],
    run_dir: str,
    compiled: bool,
    eager_lines: dict | None = None,
    kernel_definitions: dict | None = None,
) -> list[dict]:
    """Join the profiled kernels of one forward with what the compile recorded about each
    (or, for an eager run, with the stacks of the ops that launched them: `eager_lines`; for a
    kernel launched outside any op, its definition: `kernel_definitions`, from
    eagerlines.raw_kernel_definitions)."""

    sources = {}
    for name, path in kernel_files.items():
        with open(os.path.join(run_dir, path)) as f:
            sources[name] = f.read()
    by_provenance, by_comments = {}, {}
    for graph in graphs.values():
        by_provenance.update(provenance_index(graph))
        by_comments.update(comment_index(graph, sources))
    total_ms = forward["forward_device_ms"] or 1.0
    # Extern/library call sites in graph order. Under a CUDA-graph replay the profiler cannot tell
    # which op launched a cuBLAS kernel (the launcher is the replay), but the replay keeps the
    # graph's order, so the n-th unmatched extern kernel is the n-th unused extern call site.
    extern_sites = sorted(
        (
            rec
            for base, recs in by_provenance.items()
            if not base.startswith(GENERATED_PREFIXES)
            for rec in recs
        ),
        key=lambda rec: rec["order"],
    )
    used: list = []
    records = []
    for k in forward["kernels"]:
        found, via = _compiled_site(k, by_provenance, by_comments) if compiled else (None, "none")
        kind = classify(k["name"], k["launcher"], sources.get(k["name"]), compiled)
        if found is None and compiled and kind in ("extern", "library"):
            found = _replayed_site(k, extern_sites, used)
            via = "inductor provenance (by launch order in a CUDA-graph replay)" if found else via
        if found is not None:
            used.append(found)
        if found is None and not compiled:
            found, via = eager_site(k, eager_lines, kernel_definitions)
        records.append(
            {
                "name": k["name"],
                "kind": kind,
                "launcher": k["launcher"],
                "aten_ops": (found or {}).get("aten_ops")
                or ([k["launcher"]] if k["launcher"] else []),
                "source_lines": (found or {}).get("source_lines", []),
                # the innermost line of each op fused into the kernel: what by_source_line charges
                "origin_lines": (found or {}).get("origin_lines")
                or (found or {}).get("source_lines", [])[:1],
                "source_via": via,
                "source_file": kernel_files.get(k["name"]),
                "calls_per_forward": k["calls_per_forward"],
                "device_ms": k["device_ms"],
                "share": k["device_ms"] * k["calls_per_forward"] / total_ms,
                **_costs(k, found or {}, kind),
            }
        )
    return merge_repeats(records)


def _replayed_site(k: dict, sites: list, used: list) -> dict | None:
    """A replayed library kernel's call site: the next unused one of its class (an attention
    kernel an attention op's, a GEMM a matmul's), so a kernel without a site of its own (the
    input copies launched before a CUDA-graph replay) shifts no later kernel onto another's
    line; a helper kernel (a split-K reduction) the site of the library kernel just before it.
    Kernels an op launched outright (aten::...) are not replayed: they take none."""
    if k["launcher"].startswith("aten::"):
        return None
    if HELPER_KERNEL.search(k["name"]):
        return next((u for u in reversed(used) if any(u is rec for rec in sites)), None)
    kind = library_class(k["name"])
    return next(
        (
            rec
            for rec in sites
            if not any(rec is u for u in used)
            and library_class(" ".join([rec["site"], *rec["aten_ops"]])) == kind
        ),
        None,
    )


def eager_site(k: dict, eager_lines: dict | None, definitions: dict | None) -> tuple[dict, str]:
    """(its ops and lines, how they were found) for one kernel of eager code: the recorded call
    stack of the op that launched it (eagerlines.recording), else for a kernel launched outside
    any op, its definition (eagerlines.raw_kernel_definitions)."""
    frames = (eager_lines or {}).get((k["launcher"], k.get("launcher_index", 0)), [])
    via = "call stack of the launching op (eager)"
    for name, index in k.get("outer", []) if not frames else []:  # an op inside another op
        frames = (eager_lines or {}).get((name, index), [])
        if frames:
            via = f"call stack of {name}, around the launching op (eager)"
            break
    if not frames and k["launcher"] == NO_OP and k["name"] in (definitions or {}):
        frames = definitions[k["name"]]
        via = "the kernel's definition (launched outside any torch op)"
    return {
        "aten_ops": [k["launcher"]],
        "source_lines": frames,
        "origin_lines": origin(frames),
    }, via


PROFILER_BYTES_FROM = "the tensors its launching op recorded in the profile"
NO_SITE = "no call of it found, by its provenance handle, in the output code the capture kept"


def _costs(k: dict, site: dict, kind: str) -> dict:
    """A kernel's bytes and FLOPs: the profiler's, from its launching op's tensors (profiling.py),
    else its call site's in the output code (a CUDA-graph replay's kernels and Inductor's C++
    kernels record no tensors), or for a template the matmuls the post-grad graph fused into
    it; less the part of its inputs it does not touch (partial.untouched_bytes); a figure from
    any of those says so. Where the call's bytes and the profiler's differ, the call's win: it
    counts each tensor once, at its own dtype, where a launch's record counts a tensor passed
    twice twice (triton-flash's decode passes k for the lengths it lacks) and, without dtypes
    (torch 2.11), a bool mask at the cell's itemsize."""
    out = {"bytes": k.get("bytes"), "flops": k.get("flops")}
    if site.get("code_bytes") not in (None, out["bytes"]):
        out["bytes"], out["bytes_from"] = site["code_bytes"], codecost.CODE_BYTES_FROM
    if out["flops"] is None and site.get("code_flops") is not None:
        out["flops"], out["flops_from"] = site["code_flops"], codecost.CODE_FLOPS_FROM
    elif out["flops"] is None and kind == "template" and site.get("graph_flops"):
        out["flops"], out["flops_from"] = site["graph_flops"], codecost.GRAPH_FLOPS_FROM
    untouched = site.get("untouched_bytes")
    if untouched and out["bytes"] and out["bytes"] > untouched:  # a gather's table, a slice
        first = out.get("bytes_from") or PROFILER_BYTES_FROM
        out["bytes"] -= untouched
        out["bytes_from"] = f"{first}, {partial.UNTOUCHED_FROM}"
    if kind == "library" and site.get("sdpa_flops"):  # a replayed SDPA call's kernel
        if out["bytes"] is None:
            out["bytes"], out["bytes_from"] = site["sdpa_bytes"], codecost.GRAPH_SDPA_FROM
        if out["flops"] is None:
            out["flops"], out["flops_from"] = site["sdpa_flops"], codecost.GRAPH_SDPA_FROM
    if out["bytes"] is None:  # a kernel off the roofline says why
        why = site.get("code_unknown") or (NO_SITE if kind == "generated" else None)
        if why:
            out["bytes_unknown"] = why
        if site.get("code_unknown_at"):
            out["bytes_unknown_at"] = site["code_unknown_at"]
    return out


# what makes two launches one kernel of the map: everything but their times
_SAME_KERNEL = (
    "name", "kind", "launcher", "aten_ops", "source_lines", "origin_lines", "source_via",
    "source_file", "bytes", "flops",
)  # fmt: skip


def merge_repeats(records: list[dict]) -> list[dict]:
    """One record per kernel and site, in first-launch order: a model's layers launch the same
    kernels from the same source lines (Llama-2-7B's eager step: 1,728 launches, 95 kernels),
    and one row each, its calls per forward summed and its time the mean per call, says what
    the per-launch rows said at a twentieth of the size. A merged row's roofline is dropped
    (it follows the time): roofline.annotate places it again."""
    merged: dict[str, dict] = {}
    for rec in records:
        key = json.dumps([rec.get(field) for field in _SAME_KERNEL], sort_keys=True, default=str)
        row = merged.get(key)
        if row is None:
            merged[key] = dict(rec)
            continue
        calls = row["calls_per_forward"] + rec["calls_per_forward"]
        if calls:
            per_forward = row["device_ms"] * row["calls_per_forward"]
            row["device_ms"] = (per_forward + rec["device_ms"] * rec["calls_per_forward"]) / calls
        row["calls_per_forward"] = calls
        row["share"] = (row.get("share") or 0.0) + (rec.get("share") or 0.0)
        row.pop("roofline", None)
    return list(merged.values())


def by_source_line(records: list[dict]) -> list[dict]:
    """The inverse view: per source line, the kernels it landed in and the time attributed to it.

    Each kernel is charged to its origin lines (the innermost user line of each op fused into
    it, or of a model, its modeling file's line: origin), split evenly between them: there is
    no finer truth inside a fused kernel. Callers further out (a model's forward calling the
    attention) are in `source_lines`, not charged.
    """
    lines: dict[tuple, dict] = {}
    for rec in records:
        per_forward_ms = rec["device_ms"] * rec["calls_per_forward"]
        origins = rec.get("origin_lines") or rec["source_lines"][:1]
        for ln in origins:
            row = lines.setdefault(
                (ln["file"], ln["line"]), {**ln, "kernels": [], "attributed_ms": 0.0}
            )
            row["kernels"].append(rec["name"])
            row["attributed_ms"] += per_forward_ms / len(origins)
    return sorted(lines.values(), key=lambda r: (r["file"], r["line"]))
