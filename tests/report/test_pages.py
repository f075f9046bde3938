"""HTML pages from real CPU runs: parsed for their structure, and loaded in headless Chromium."""

import html.parser
import json
import os
import re

from compilekit.model import result as results
from compilekit.report import pages
from tests.conftest import ROOT, png_colors

NAIVE = os.path.join(ROOT, "variants", "naive.py")


class Tags(html.parser.HTMLParser):
    """Start tags with their attributes, and the text, of one page."""

    def __init__(self, text: str):
        super().__init__()
        self.tags, self.text = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag, **attrs):
        return [
            a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())
        ]


def _lines(path):
    with open(path) as f:
        return len(f.read().splitlines())


def _kmap(run_dir):
    with open(os.path.join(run_dir, "kernels.json")) as f:
        return json.load(f)


def test_run_page_is_written_with_the_run_and_holds_source_kernels_and_numbers(run_cell):
    result = run_cell("naive", "default")
    page = os.path.join(result.run_dir, "index.html")
    with open(page) as f:
        text = f.read()
    doc = Tags(text)
    sources = doc.find("table", **{"class": "source hl"})
    assert [s["data-file"] for s in sources][0].endswith("naive.py")
    # one row per line of the variant's file, in the first source table
    first = text.split('<table class="source hl"', 2)[1].split("</table>")[0]
    assert first.count("<tr ") == _lines(NAIVE)
    kmap = _kmap(result.run_dir)
    assert len(doc.find("tr", **{"class": "kernel"})) == len(kmap["kernels"])
    fused = [k for k in kmap["kernels"] if k["kind"] == "generated"]
    assert fused and all(k["name"] in text for k in fused)
    # the C++ kernel's bytes came from the output code: its bound cell is starred, and says so
    # on hover
    hovers = [a["title"] for a in doc.find("td") if "title" in a]
    assert hovers == [f"bytes from {fused[0]['bytes_from']}"], hovers
    assert re.search(r'<td class="small" title="bytes from [^"]+">memory, [^<]+ \*</td>', text)
    assert f"{result.compiled_ms:.6g}" in text  # result.json's figure, on the page
    assert "<script src" not in text and "<link" not in text and "http://" not in text
    links = [a["href"] for a in doc.find("a") if not a["href"].startswith("#")]
    for href in links:
        if not href.startswith("https://"):
            assert os.path.exists(os.path.join(result.run_dir, href)), href


def test_run_page_in_chromium_click_reveals_the_fused_kernel(run_cell, open_page):
    result = run_cell("naive", "default")
    kmap = _kmap(result.run_dir)
    page, errors = open_page(os.path.join(result.run_dir, "index.html"))
    rows = page.locator("table.source").first.locator("tr")
    assert rows.count() == _lines(NAIVE)
    index = next(i for i, k in enumerate(kmap["kernels"]) if k["kind"] == "generated")
    panel = page.locator(f'div.kernel-code[data-kid="k{index}"]')
    assert not panel.is_visible()
    page.locator(f'tr.kernel[data-kid="k{index}"]').click()
    assert panel.is_visible()
    assert "kernel" in panel.locator("pre").inner_text()  # the C++ kernel's code, shown
    hit = page.locator("table.source").first.locator("tr.hit td.n").all_inner_texts()
    expected = {ln["line"] for ln in kmap["kernels"][index]["source_lines"]}
    assert {int(n) for n in hit} == expected
    assert png_colors(page.screenshot()) > 50
    assert errors == []


def test_diff_page_lists_appeared_and_vanished_kernels(run_cell, cli, tmp_path, open_page):
    eager, compiled = run_cell("naive", "eager"), run_cell("naive", "default")
    out = tmp_path / "diff.html"
    proc = cli("html", "--diff", eager.run_dir, compiled.run_dir, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    page, errors = open_page(str(out))
    changes = dict(
        zip(
            page.locator("#diff td.mono").all_inner_texts(),
            page.locator("#diff td.change").all_inner_texts(),
        )
    )
    assert changes["aten::softmax"] == "vanished"
    assert any(k.startswith("cpp_fused") and v == "appeared" for k, v in changes.items())
    assert png_colors(page.screenshot()) > 50
    assert errors == []


def test_page_of_a_failed_cell_shows_its_log(tmp_path):
    run_dir = tmp_path / "broken"
    run_dir.mkdir()
    results.CellResult(
        "naive", "default", "1x2x64x16", "float32", "cpu", reason="IndexError: boom"
    ).save(str(run_dir))
    (run_dir / "log.txt").write_text("Traceback (most recent call last):\nIndexError: boom\n")
    doc = Tags(open(pages.run_page(str(run_dir))).read())
    text = "".join(doc.text)
    assert "No kernel map" in text and "IndexError: boom" in text
    assert not doc.find("tr", **{"class": "kernel"})


def test_html_of_a_missing_directory_is_one_line(cli, tmp_path):
    proc = cli("html", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "not a directory" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_page_of_a_measured_cell_without_its_kernel_map_keeps_the_numbers(tmp_path):
    run_dir = tmp_path / "nomap"
    run_dir.mkdir()
    results.CellResult(
        "naive",
        "default",
        "1x2x64x16",
        "float32",
        "cpu",
        status="ok",
        compiled_ms=1.25,
        eager_ms=2.5,
        speedup=2.0,
    ).save(str(run_dir))
    text = "".join(Tags(open(pages.run_page(str(run_dir))).read()).text)
    assert "No kernel map" in text and "kernels.json" in text and "1.25" in text


def test_sources_and_kernels_are_highlighted_without_loading_lexer_plugins(monkeypatch):
    """A page highlights Python and C++ by the lexer's name: looking a lexer up by file name
    makes pygments import every package that registers one (IPython, for one), which can cost
    more than the page; a file of another kind is still highlighted, an unknown one stays plain."""
    from pygments import plugin

    def scanned(group):
        raise AssertionError(f"pygments scanned the installed packages for {group}")

    monkeypatch.setattr(plugin, "iter_entry_points", scanned)
    from compilekit.report.highlight import highlight_lines

    python = highlight_lines("def f(x):\n    return x  # why\n", "variants/naive.py")
    assert len(python) == 2 and 'class="k"' in python[0] and 'class="c1"' in python[1]
    cpp = highlight_lines("for(int i=0; i<8; i++) {}\n", "/tmp/cache/cpp/k.cpp")
    assert 'class="k"' in cpp[0]
    monkeypatch.undo()
    toml = highlight_lines('name = "cpu_small"\n', "experiments/cpu_small.toml")
    assert "<span" in toml[0]
    plain = highlight_lines("just text\n", "notes.unknownsuffix")
    assert plain == ["just text"]
