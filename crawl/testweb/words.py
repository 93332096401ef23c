"""The text of the test web's pages: a pseudo-vocabulary, a fixed pool of it to
cut runs from, and the furniture every ordinary page carries (revision note,
ad block, footer) in both profiles."""

from __future__ import annotations

import functools
import hashlib
import random
from array import array
from typing import TYPE_CHECKING

from .shapes import PageSpec, _rng

if TYPE_CHECKING:
    from .generator import Web

_SYL = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "zu", "fi", "ho", "ge",
        "ba", "ly", "qu", "wen", "tor", "mar", "sel", "vin", "dor", "kel")
VOCAB: tuple[str, ...] = tuple(
    a + b + c for a in _SYL for b in _SYL for c in ("", "n", "s", "ra", "th", "m", "x", "l")
)[:4096]
_BOILER = (
    "Subscribe to our newsletter for weekly updates. All rights reserved. "
    "Terms of use, privacy policy and cookie settings apply to this site."
)


_RUN = 40  # words per slice of the pool


@functools.cache
def _pool() -> tuple[str, list[int]]:
    """A fixed 2 MB text of pseudo-words and the offsets where words start.

    Page text is a sequence of short runs cut from random places of this
    pool: as cheap as slicing, yet two pages share no more than chance
    runs, so distinct pages are far apart for a simhash.
    """
    words = random.Random("testweb-pool").choices(VOCAB, k=300_000)
    text = " ".join(words) + " "
    starts = [0]
    for w in words:
        starts.append(starts[-1] + len(w) + 1)
    return text, starts


def _text(r: random.Random, n: int) -> str:
    """About ``n`` words drawn with ``r``."""
    text, starts = _pool()
    top = len(starts) - _RUN - 1
    run = min(n, _RUN)
    count = max(1, n // run)
    picks = array("I", r.randbytes(4 * count))  # one call instead of a randrange per run
    return " ".join([text[starts[j]: starts[j + run] - 1] for j in (p % top for p in picks)])


def _words(seed: object, n: int) -> str:
    """About ``n`` words keyed by ``seed`` (no Random object: seeding one costs more)."""
    text, starts = _pool()
    run = min(n, _RUN)
    count = max(1, n // run)
    if count > 16:
        return _text(_rng("words", seed), n)
    key = hashlib.blake2b(repr(seed).encode(), digest_size=4 * count).digest()
    top = len(starts) - run - 1
    picks = [p % top for p in array("I", key)]
    return " ".join([text[starts[j]: starts[j + run] - 1] for j in picks])


def chrome(web: Web, spec: PageSpec, src: int, version: int, variant: str) -> tuple[str, str, str]:
    """(revision note, ad block, footer) of an ordinary page, the same in both profiles:
    the note changes with the page's version, the ad with the ``ref`` variant."""
    changing = ""
    if spec.change_period is not None:
        changing = (f'<p class="updated">Revision {version}: '
                    f"{_words(('rev', src, spec.k, version), 40)}</p>")
    ad_key = (src, spec.path, variant if variant == "ref" else "")
    ad = "" if variant == "print" else f'<aside class="ad">{_words(("ad",) + ad_key, 25)}</aside>'
    footer = "" if variant == "print" else (
        f"<footer><p>{_BOILER}</p><p>&copy; 2026 {web.host_name(src)}</p></footer>")
    return changing, ad, footer
