"""The claims guard: words that state a verdict reach RESULTS.md and README only through a check of the data.

A section that writes a verdict word calls :meth:`Claims.holds` with the words and whether the data
support them (computed there, from the numbers it prints), or :meth:`Claims.judged` with a ratio's CI and
noise floor (the one rule, :func:`nsa_exp.analysis.noise.judge`). A claim the data do not support stops
the report with one line naming it (``UserError``, exit 2): nothing is written. :meth:`Claims.define`
backs the words of a definition (the rule's own text). At the end :meth:`Claims.audit` counts every
guarded word in the whole text: one that no check backed (typed into a template) also stops the report.

>>> c = Claims()
>>> c.holds("the worst routing measured", True, "resolved against every other")
'the worst routing measured'
>>> c.audit("x is the worst routing measured.", "R.md")
>>> c.audit("x is the worst routing measured. So y is the worst too.", "R.md")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
nsa_exp.errors.UserError: report: R.md says 'worst' 2 time(s), but only 1 are backed by a check of the data ...
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from ..analysis.noise import judge
from ..errors import UserError

#: The guarded verdict words (case-insensitive, whole words).
GUARDED = re.compile(r"\b(worst|best routing|no routing differs|no pattern differs|differs measurably|"
                     r"differ measurably|does not differ|do not differ|same within noise|unresolved)\b", re.I)

#: What :meth:`Claims.judged` writes for each judgement of the rule.
WORDS = {"differs": "differs measurably", "same": "same within noise", "unresolved": "unresolved"}


def guarded(text: str) -> Counter:
    return Counter(m.group(1).lower() for m in GUARDED.finditer(text))


class Claims:
    """The verdict words one report wrote, each backed by a check (module doc)."""

    def __init__(self) -> None:
        self.backed: Counter = Counter()

    def _back(self, text: str) -> str:
        self.backed.update(guarded(text))
        return text

    def holds(self, words: str, supported: bool, why: str) -> str:
        """``words`` when the data support them (``supported``); else the report stops, naming ``why``."""
        if not supported:
            raise UserError(f"report: the data do not support {words!r}: {why}")
        return self._back(words)

    def judged(self, ci: Sequence[float], floor: float) -> str:
        """The rule's words for a ratio's CI and floor: differs measurably / same within noise / unresolved."""
        return self._back(WORDS[judge(ci, floor)])

    def define(self, text: str) -> str:
        """A definition's text (the rule itself): its words are not a claim about data."""
        return self._back(text)

    def audit(self, text: str, name: str) -> None:
        """Stop (one line) when ``text`` holds a guarded word more often than the checks backed it."""
        for word, n in sorted(guarded(text).items()):
            if n > self.backed[word]:
                lines = text.splitlines()
                at = next(i for i, ln in enumerate(lines) if word in ln.lower())
                raise UserError(f"report: {name} says {word!r} {n} time(s), but only {self.backed[word]} are backed by "
                                f"a check of the data (first at line {at + 1}: {lines[at][:80]})")
