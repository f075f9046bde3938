"""docs/variants.md has a row for every registered attention variant: a variant added to the
registry without a line saying what it is fails here."""

import os
import re

from compilekit.variants import VARIANTS
from tests.conftest import ROOT


def test_every_variant_has_a_row_in_the_variants_page():
    with open(os.path.join(ROOT, "docs", "variants.md")) as f:
        page = f.read()
    # the first cell of each table row: one or more `names`, comma-separated
    named = set()
    for first_cell in re.findall(r"^\| ([^|]+) \|", page, flags=re.MULTILINE):
        named.update(re.findall(r"`([^`]+)`", first_cell))
    missing = sorted(set(VARIANTS) - named)
    assert not missing, f"docs/variants.md has no row for {missing}"
