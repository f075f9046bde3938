"""Variable-length batches: documents of different lengths, causal within each, packed or
padded by the variant that takes them.

A varlen shape is `LENGTHSxHxD`, `LENGTHSxHgKVxD` with GQA (H query heads sharing KV K/V
heads): LENGTHS is a list of two or more document lengths (`100,37,512`), or a seeded
distribution with a total of T tokens: `fixed512@16384` (all 512, the last one cut to fit),
`uniform512@16384` (uniform on 1..1023, mean 512), `lognormal512@16384` (lognormal with mean
512 and sigma 1: a long tail, as real document lengths have). A distribution is drawn from the
cell's seed, the same in every process of the cell and on every machine (Python's own
generator, no torch).
"""

from __future__ import annotations

import dataclasses
import math
import random
import re

from compilekit.model.errors import UserError

DISTRIBUTIONS = ("fixed", "uniform", "lognormal")
LOGNORMAL_SIGMA = 1.0
MAX_TOKENS = 1 << 20  # packed q alone holds T x H x D elements
VARLEN_RE = re.compile(
    r"^(?P<lengths>\d+(?:,\d+)+|(?P<dist>[a-z]+)(?P<mean>\d+)@(?P<total>\d+))"
    r"x(?P<heads>\d+)(?:g(?P<kv>\d+))?x(?P<dim>\d+)$"
)


@dataclasses.dataclass(frozen=True)
class Varlen:
    """A ragged batch of documents: explicit `lengths`, or a distribution (`dist`, `mean`,
    `total`) drawn per seed. heads, kv_heads (GQA: they divide heads), head_dim. `batch` is
    the number of documents where they are listed (0 for a distribution: the draw decides),
    `seq` the total tokens, so reports sort and group it as they do other shapes."""

    heads: int
    head_dim: int
    kv_heads: int
    lengths: tuple = ()
    dist: str = ""
    mean: int = 0
    total: int = 0

    @property
    def batch(self) -> int:
        return len(self.lengths)

    @property
    def seq(self) -> int:
        return sum(self.lengths) if self.lengths else self.total

    def __str__(self) -> str:
        docs = ",".join(map(str, self.lengths)) or f"{self.dist}{self.mean}@{self.total}"
        gqa = f"g{self.kv_heads}" if self.kv_heads != self.heads else ""
        return f"{docs}x{self.heads}{gqa}x{self.head_dim}"

    def draw(self, seed: int) -> list[int]:
        """The documents' lengths for this seed (the listed ones, whatever the seed)."""
        if self.lengths:
            return list(self.lengths)
        rng = random.Random(seed)
        mu = math.log(self.mean) - LOGNORMAL_SIGMA**2 / 2  # so that the mean is `mean`
        lengths, left = [], self.total
        while left > 0:
            if self.dist == "fixed":
                length = self.mean
            elif self.dist == "uniform":
                length = rng.randint(1, 2 * self.mean - 1)
            else:
                length = max(1, round(rng.lognormvariate(mu, LOGNORMAL_SIGMA)))
            lengths.append(min(length, left))
            left -= lengths[-1]
        return lengths

    def describe(self, seed: int) -> dict:
        """What result.json and the report say of the batch: how it was made and what came out."""
        lengths = self.draw(seed)
        return {
            "spec": str(self),
            "distribution": self.dist or "listed",
            "seed": seed if self.dist else None,
            "documents": len(lengths),
            "tokens": sum(lengths),
            "shortest": min(lengths),
            "longest": max(lengths),
            "lengths": lengths,
        }


def causal_pairs(lengths) -> int:
    """Query-key pairs causal attention computes within each document: sum L(L+1)/2."""
    return sum(n * (n + 1) // 2 for n in lengths)


def parse_varlen(text: str) -> Varlen:
    """A varlen shape, or UserError naming the fix (a zero length, an unknown distribution, a
    total over the limit, K/V heads that do not divide the heads)."""
    match = VARLEN_RE.match(text.strip().lower())
    if not match:
        raise UserError(
            f"malformed varlen shape {text!r}: write LENGTHSxHxD, with LENGTHS two or more "
            "lengths (100,37,512x32x128) or a distribution and a total (lognormal512@16384x32x128;"
            f" {', '.join(DISTRIBUTIONS)}), and HgKV for GQA (x32g8x)"
        )
    heads, dim = int(match["heads"]), int(match["dim"])
    kv = int(match["kv"]) if match["kv"] else heads
    if 0 in (heads, dim, kv):
        raise UserError(f"varlen shape {text!r}: heads, K/V heads and head dim must be positive")
    if heads % kv:
        raise UserError(f"varlen shape {text!r}: K/V heads ({kv}) must divide heads ({heads})")
    if match["dist"]:
        if match["dist"] not in DISTRIBUTIONS:
            raise UserError(
                f"unknown length distribution {match['dist']!r} in {text!r}: choose one of "
                f"{', '.join(DISTRIBUTIONS)}"
            )
        shape = Varlen(heads, dim, kv, (), match["dist"], int(match["mean"]), int(match["total"]))
        if not shape.mean or not shape.total:
            raise UserError(f"varlen shape {text!r}: the mean and the total must be positive")
    else:
        lengths = tuple(int(n) for n in match["lengths"].split(","))
        if 0 in lengths:
            raise UserError(f"varlen shape {text!r}: a document of 0 tokens; lengths are >= 1")
        shape = Varlen(heads, dim, kv, lengths)
    if shape.seq > MAX_TOKENS:
        raise UserError(
            f"varlen shape {text!r} holds {shape.seq:,} tokens; at most {MAX_TOKENS:,}"
        )
    return shape
