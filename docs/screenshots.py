"""The README's pictures: compilekit's pages rendered from real runs, shot in headless Chromium.

    python docs/screenshots.py                 # runs naive/default on the CPU first
    python docs/screenshots.py --cpu-run DIR   # or uses a CPU run directory you have

Writes docs/run_page_cpu.png (a CPU run, its fused C++ kernel clicked), and from the H200 blog
matrix committed under experiments/results/h200/blog_part3/ (re-rendered from its results):
docs/run_page_h200.png (naive default, its fused Triton kernel clicked) and
docs/sweep_page_h200.png. Needs the dev extra (playwright)
and Chromium at /usr/bin/chromium (or $CHROMIUM).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
H200_BLOG = os.path.join(ROOT, "experiments", "results", "h200", "blog_part3")


def cpu_run(out: str) -> str:
    """Run naive/default on the CPU into `out`; its run directory."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compilekit",
            "run",
            "--variant",
            "naive",
            "--mode",
            "default",
            "--device",
            "cpu",
            "--out",
            out,
        ],
        cwd=ROOT,
        check=True,
    )
    return os.path.join(out, "naive__default__1x8x512x64__float32__cpu")


def fused_kid(run_dir: str) -> str:
    """The page's id of the costliest generated kernel."""
    with open(os.path.join(run_dir, "kernels.json")) as f:
        kernels = json.load(f)["kernels"]
    generated = [i for i, k in enumerate(kernels) if k["kind"] == "generated"]
    index = max(generated, key=lambda i: kernels[i]["device_ms"] * kernels[i]["calls_per_forward"])
    return f"k{index}"


def shoot(browser, page_path: str, png: str, click: str | None = None) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto("file://" + page_path)
    if click:
        page.locator(f'tr.kernel[data-kid="{click}"]').click()
        page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=png)
    page.close()
    print(f"wrote {png}")


def main() -> int:
    from playwright.sync_api import sync_playwright

    from compilekit.report import pages, sweeppage

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-run", default=None, help="a CPU run directory to show")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="compilekit-shots-")
    cpu = args.cpu_run or cpu_run(os.path.join(work, "cpu"))
    h200 = os.path.join(work, "blog_part3")  # the page is titled by its directory
    shutil.copytree(H200_BLOG, h200)  # re-rendered in a copy: the committed pages stay as they are
    pages.run_page(cpu)
    sweeppage.sweep_page(h200, refresh_runs=True)
    naive = os.path.join(h200, "naive__default__8x16x1024x64__bfloat16__cuda")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
            args=pages.CHROMIUM_ARGS,
        )
        shoot(
            browser,
            os.path.join(cpu, "index.html"),
            os.path.join(HERE, "run_page_cpu.png"),
            fused_kid(cpu),
        )
        shoot(
            browser,
            os.path.join(naive, "index.html"),
            os.path.join(HERE, "run_page_h200.png"),
            fused_kid(naive),
        )
        shoot(browser, os.path.join(h200, "index.html"), os.path.join(HERE, "sweep_page_h200.png"))
        browser.close()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main())
