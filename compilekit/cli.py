"""compilekit's command line: argparse subcommands over plain functions.

Every user error ends here as one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from compilekit.model.errors import UserError
from compilekit.model.store import CorruptFile
from compilekit.usercell import make_cell, resolve_device, run_cell
from compilekit.usercheck import add_gate_commands


def cmd_run(args) -> int:
    from compilekit.report import cellview

    cell = make_cell(
        args.variant,
        args.mode,
        args.shape,
        args.dtype,
        args.device,
        args.seed,
        args.set,
        args.graph_pass,
        args.timeout,
        args.grad,
        args.weights,
        args.alloc,
    )
    result = run_cell(cell, args.out, fresh=args.fresh, timeout_s=args.timeout)
    if result.failure == "bad_input":
        raise UserError(result.reason)
    if result.status == "unsupported":
        raise UserError(
            f"{result.reason} (choose another variant, mode, dtype or device; "
            "`compilekit list` shows them)"
        )
    print(cellview.cell_table([result]) if args.wide else cellview.cell_summary(result))
    for line in cellview.cell_notes(result):
        print(line)
    print(f"run directory: {result.run_dir} (make kernels RUN=... for its kernel map)")
    page = os.path.join(result.run_dir, "index.html")
    if os.path.isfile(page):
        print(f"page: {page} (open it in a browser: source heat map, kernels, their code)")
    return 0 if result.ok else 1


def cmd_list(args) -> int:
    from tabulate import tabulate

    from compilekit.compile.modes import MODES
    from compilekit.compile.variant import describe_all

    print(tabulate(describe_all(), headers=["variant", "what it is"]))
    print()
    print(tabulate([(m, d) for m, (_, d) in MODES.items()], headers=["mode", "what it does"]))
    print(
        "\nA variant of your own: VARIANT=path/to/file.py:callable (signature (q, k, v) -> out, "
        "[B, H, S, D]); a model of your own: VARIANT=path/to/file.py:factory (signature "
        "(shape, dtype, device) -> Workload, SHAPE=BxS: docs/models.md)."
    )
    return 0


def cmd_view(args) -> int:
    """kernels, ops, memory, diff: a view of run directories, printed."""
    from compilekit.report import memoryview, opsview, runview

    if args.view == "memory":
        print(memoryview.memory_view(args.run_dir))
    elif args.view == "ops":
        print(opsview.ops_view(args.run_dir, args.by, args.top, args.kind))
    elif args.view == "diff":
        print(runview.diff_view(args.run_a, args.run_b))
    else:
        print(runview.kernels_view(args.run_dir, args.kernel))
    return 0


def cmd_sweep(args) -> int:
    from compilekit.launch.sweep import RETRY
    from compilekit.usersweep import sweep

    retry = [kind for kind in RETRY if getattr(args, f"retry_{kind}")]
    results = sweep(
        args.experiment, args.out, args.gpus, args.per_gpu, args.force, retry, args.fresh,
        args.ray, args.shared_dir, args.ray_resources,
    )  # fmt: skip
    bad = [r for r in results if r.status in ("failed", "wrong")]
    for r in bad:
        print(f"compilekit: {r.status} {r.label}: {(r.reason or '')[:300]}", file=sys.stderr)
    return 1 if bad else 0


def cmd_verify(args) -> int:
    from compilekit.verify import check as verify

    unverified = 0  # outside, or inconclusive on a noisy machine: neither is a pass
    for run_dir in args.run_dirs:
        report, verdict = verify.verify(run_dir, args.tolerance, repeat=args.repeat)
        print(report, flush=True)
        unverified += verdict != "within"
    return 1 if unverified else 0


def cmd_report(args) -> int:
    from compilekit.usersweep import report_and_page

    report_and_page(args.dir)
    return 0


def cmd_publish(args) -> int:
    from compilekit.report import publish

    publish.publish(args.sweep_dir, args.dest, args.page, args.code, args.extra)
    return 0


def cmd_html(args) -> int:
    from compilekit.report import pages, sweeppage

    if args.diff:
        run_a, run_b = args.diff
        out = args.out or "compilekit-diff.html"
        folder = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(folder):
            raise UserError(f"--out {out!r}: no folder {folder!r}: create it, or choose another")
        print(pages.diff_page(run_a, run_b, out))
        return 0
    if not args.dir:
        raise UserError("give a run or sweep directory, or --diff RUN_A RUN_B")
    print(sweeppage.page_for(args.dir))
    return 0


def cmd_env(args) -> int:
    import json

    from compilekit.evidence import envinfo
    from compilekit.launch import cache

    device = resolve_device(args.device)
    print(json.dumps(envinfo.environment(device, cache.default_root(), args.remeasure), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compilekit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_sweep(sub)
    _add_views(sub)
    add_gate_commands(sub)
    _add_share(sub)
    return parser


def _add_run(sub) -> None:
    """`compilekit run`: one cell."""
    run = sub.add_parser("run", help="measure one cell: variant x mode x shape x dtype x device")
    run.add_argument(
        "--variant",
        default="naive",
        help="registry name, path/to/file.py:callable or hf:<hub id or checkpoint folder>",
    )
    run.add_argument("--mode", default="default")
    run.add_argument(
        "--shape", default=None, help="BxHxSxD (default: 8x16x1024x64 on cuda, 1x8x512x64 on cpu)"
    )
    run.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    run.add_argument("--device", default="auto", help="auto, cpu or cuda")
    run.add_argument("--out", default="runs", help="the run directory goes under this one")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument(
        "--grad",
        default="off",
        help="what the calls run inside: off (the model frozen), no-grad (torch.no_grad()) or "
        "inference (torch.inference_mode())",
    )
    run.add_argument(
        "--weights",
        default="auto",
        help="an hf: checkpoint's: auto (its own where it has them) or random (from its config)",
    )
    run.add_argument(
        "--alloc",
        default="",
        metavar="KEY:VALUE",
        help="the CUDA caching allocator's settings for the cell's processes "
        "(PYTORCH_CUDA_ALLOC_CONF), e.g. expandable_segments:True",
    )
    run.add_argument(
        "--wide", action="store_true", help="print the sweep report's wide table for this cell"
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an Inductor option for this cell (repeatable), e.g. coordinate_descent_tuning=true; "
        "or static_inputs=true (CUDA graph modes: the graph reads the inputs in place, no copies)",
    )
    run.add_argument(
        "--pass",
        dest="graph_pass",
        action="append",
        default=[],
        metavar="NAME|FILE.py:FACTORY",
        help="a graph pass: one that ships (naive-to-sdpa) or a function returning a "
        "CustomGraphPass; repeatable",
    )
    run.add_argument(
        "--fresh",
        action="store_true",
        help="empty this cell's compile cache first (re-measures the cold compile)",
    )
    run.add_argument(
        "--timeout", type=float, default=1800, help="seconds before the cell is killed"
    )
    run.set_defaults(func=cmd_run)


def _add_sweep(sub) -> None:
    """`compilekit sweep`: an experiment, locally or on Ray."""
    from compilekit.launch.sweep import RETRY

    sw = sub.add_parser("sweep", help="every cell of an experiment TOML, resumable")
    sw.add_argument("experiment", help="e.g. experiments/blog_part3.toml")
    sw.add_argument("--out", default=None, help="default: runs/<experiment name>")
    sw.add_argument("--gpus", default=None, help="CUDA device indices, e.g. 0,1 (default: all)")
    sw.add_argument("--force", action="store_true", help="re-run cells already done")
    for kind, what in RETRY.items():
        sw.add_argument(f"--retry-{kind}", action="store_true", help=what)
    sw.add_argument("--fresh", action="store_true", help="empty each cell's compile cache first")
    sw.add_argument(
        "--per-gpu",
        type=int,
        default=4,
        help="cell processes per GPU; they start "
        "up side by side but take turns on the GPU (default 4)",
    )
    sw.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="ADDRESS",
        help="run the cells as Ray tasks on the cluster at ADDRESS (default: auto, the one "
        "this machine belongs to); needs pip install 'compilekit[ray]'",
    )
    sw.add_argument(
        "--shared-dir",
        action="store_true",
        help="with --ray: every node mounts --out at the same path, so tasks write their run "
        "directories there (else they come back through Ray's object store)",
    )
    sw.add_argument(
        "--ray-resources",
        default=None,
        metavar="JSON",
        help='with --ray: what each cell asks of Ray, e.g. \'{"GPU": 1, "H200": 1}\' '
        "(default: one GPU for CUDA cells, one CPU for CPU cells)",
    )
    sw.set_defaults(func=cmd_sweep)


def _add_views(sub) -> None:
    """The commands that read runs: list, kernels, diff, verify, report, env."""
    lst = sub.add_parser("list", help="variants and modes, one line each")
    lst.set_defaults(func=cmd_list)
    kernels = sub.add_parser("kernels", help="the kernel map of a run directory")
    kernels.add_argument("run_dir")
    kernels.add_argument("--kernel", default=None, help="print this kernel's source and origin")
    kernels.set_defaults(func=cmd_view, view="kernels")
    ops = sub.add_parser("ops", help="the op cost matrix of a run, by time or by memory")
    ops.add_argument("run_dir")
    ops.add_argument("--by", default="time", help="rank by time (default) or memory")
    ops.add_argument("--top", type=int, default=20, help="how many ops (default 20)")
    ops.add_argument("--kind", help="op or kernel: only those rows (default: both)")
    ops.set_defaults(func=cmd_view, view="ops")
    mem = sub.add_parser("memory", help="a CUDA run's allocator figures and memory timeline")
    mem.add_argument("run_dir")
    mem.set_defaults(func=cmd_view, view="memory")
    diff = sub.add_parser("diff", help="kernels that appear, vanish or change time between runs")
    diff.add_argument("run_a")
    diff.add_argument("run_b")
    diff.set_defaults(func=cmd_view, view="diff")
    ver = sub.add_parser(
        "verify", help="re-time runs with a bare do_bench / perf_counter in a fresh process"
    )
    ver.add_argument("run_dirs", nargs="+", metavar="RUN")
    ver.add_argument(
        "--tolerance", type=float, default=0.05, help="allowed |ratio - 1| (default 0.05)"
    )
    ver.add_argument(
        "--repeat", type=int, default=3, help="fresh bare processes, their median is used (3)"
    )
    ver.set_defaults(func=cmd_verify)
    rep = sub.add_parser("report", help="tables, REPORT.md and plots for a sweep directory")
    rep.add_argument("dir")
    rep.set_defaults(func=cmd_report)
    env = sub.add_parser("env", help="versions and the device's measured ceilings (cached)")
    env.add_argument("--device", default="auto")
    env.add_argument("--remeasure", action="store_true")
    env.set_defaults(func=cmd_env)


def _add_share(sub) -> None:
    """The commands that make pages and publish: publish, html."""
    pub = sub.add_parser(
        "publish", help="a sweep without its bulk, to commit or share (result and kernel maps)"
    )
    pub.add_argument("sweep_dir")
    pub.add_argument("dest", help="a new or empty folder, or an earlier publication")
    pub.add_argument(
        "--page", action="append", default=[], metavar="CELL", help="keep this cell's run page"
    )
    pub.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="CELL",
        help="keep this cell's run page and its generated code",
    )
    pub.add_argument("--extra", action="append", default=[], help="a file to copy beside")
    pub.set_defaults(func=cmd_publish)

    page = sub.add_parser(
        "html", help="a self-contained HTML page for a run, a sweep, or a diff of two runs"
    )
    page.add_argument("dir", nargs="?", help="a run or sweep directory (writes its index.html)")
    page.add_argument("--diff", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two runs")
    page.add_argument(
        "--out", default=None, help="where --diff writes (default ./compilekit-diff.html)"
    )
    page.set_defaults(func=cmd_html)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        print(f"compilekit: error: {exc}", file=sys.stderr)
        return 2
    except CorruptFile as exc:
        print(f"compilekit: error: {exc}: run the cell again", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        from compilekit.launch import runner

        runner.stop_running()  # cell processes run in their own sessions: Ctrl-C misses them
        print(
            "compilekit: interrupted; finished cells are kept, run again to resume",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:  # `compilekit kernels RUN | head`: the reader left, not an error
        sys.stderr.close()
        return 0
    except OSError as exc:  # a full disk, a directory made read-only meanwhile
        where = f" ({exc.filename})" if exc.filename else ""
        fix = (
            "check the path (a file a run names may have moved)"
            if isinstance(exc, FileNotFoundError)
            else "free space or fix the permissions"
        )
        print(
            f"compilekit: error: {exc.strerror or exc}{where}: {fix}, then run again "
            "(finished cells are kept)",
            file=sys.stderr,
        )
        return 2
