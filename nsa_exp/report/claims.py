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

Numbers that make a claim are computed by the guard from the data they state, never typed: a bound
(:meth:`Claims.within`: "within X%", X rounded *up*, so every value is inside the printed bound), an extreme
(:meth:`Claims.up_to`: "up to X", X the largest value, rounded up; :meth:`Claims.most`: the item a superlative
names is the extreme of the values), and a count (:meth:`Claims.count`: "N things", N = len(the things)).
:meth:`Claims.audit` also refuses a "within X%" or "up to X" the guard did not write.

>>> c.within([1.0104, 1.0071, 1.0110], "%", 1)  # 1.10% of 1, rounded up to one decimal
'within 1.1%'
>>> c.up_to([9.7, 16.4], "%", 0, sign=True), c.up_to([31783, 32768], " queries")
('up to +17%', 'up to 32,768 queries')
>>> c.count(["a", "b", "c"], "committed bench results")
'3 committed bench results'
>>> c.audit("dQ stays within 1.0% of local", "R.md")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
nsa_exp.errors.UserError: report: R.md says 'within 1.0%' 1 time(s), but only 0 are computed by the claims guard ...
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence

from ..analysis.noise import judge
from ..errors import UserError

#: The guarded verdict words (case-insensitive, whole words).
GUARDED = re.compile(r"\b(worst|best routing|no routing differs|no pattern differs|differs measurably|"
                     r"differ measurably|does not differ|do not differ|same within noise|unresolved)\b", re.I)

#: What :meth:`Claims.judged` writes for each judgement of the rule.
WORDS = {"differs": "differs measurably", "same": "same within noise", "unresolved": "unresolved"}


#: The numeric claims only the guard may write: a bound and an extreme with their number.
NUMERIC = re.compile(r"\b(within [+\-−]?[0-9][0-9.,]*\s?%?|up to [+\-−]?[0-9][0-9.,]*\s?(?:%|×|ms)?)", re.I)


#: The nouns a count is only written of through :meth:`Claims.count` ("68 committed bench results").
COUNTED = ("committed bench results", "sweep points")
COUNTS = re.compile(r"\b(\d[\d,]* (?:" + "|".join(COUNTED) + r"))\b")


def guarded_words(text: str) -> Counter:
    """How often each guarded verdict word (:data:`GUARDED`) occurs in ``text``, lower-cased."""
    return Counter(m.group(1).lower() for m in GUARDED.finditer(text))


def numeric(text: str) -> Counter:
    return Counter([m.group(1).strip() for m in NUMERIC.finditer(text)] + COUNTS.findall(text))


def round_up(value: float, digits: int) -> float:
    """``value`` rounded up at ``digits`` decimals (a printed bound never below the value it bounds).

    >>> round_up(1.0104, 2), round_up(16.4, 0), round_up(2.0, 1)
    (1.02, 17.0, 2.0)
    """
    scale = 10 ** digits
    return math.ceil(round(value * scale, 9)) / scale


class Claims:
    """The verdict words one report wrote, each backed by a check (module doc)."""

    def __init__(self) -> None:
        self.backed: Counter = Counter()
        self.numbers: Counter = Counter()

    def _back(self, text: str) -> str:
        self.backed.update(guarded_words(text))
        return text

    def holds(self, words: str, supported: bool, why: str) -> str:
        """``words`` when the data support them (``supported``); else the report stops, naming ``why``."""
        if not supported:
            raise UserError(f"report: the data do not support {words!r}: {why}")
        return self._back(words)

    def judged(self, ci: Sequence[float], floor: float) -> str:
        """The rule's words for a ratio's CI and floor: differs measurably / same within noise / unresolved."""
        return self._back(WORDS[judge(ci, floor)])

    def _number(self, phrase: str) -> str:
        self.numbers.update(numeric(phrase))  # as the audit reads it back
        return phrase

    def within(self, ratios: Sequence[float], unit: str = "%", digits: int = 1) -> str:
        """``within X%``: X = the largest ``|ratio - 1|`` in percent, rounded *up* at ``digits`` (every ratio lies
        inside the printed bound); ``ratios`` are the values the sentence is about (CI ends included)."""
        if not ratios:
            raise UserError("report: a 'within' bound of no values")
        far = max(abs(r - 1) for r in ratios) * 100
        return self._number(f"within {round_up(far, digits):.{digits}f}{unit}")

    def up_to(self, values: Sequence[float], unit: str = "", digits: int = 0, sign: bool = False) -> str:
        """``up to X``: X = the largest of ``values`` (in the unit written after it), rounded up at ``digits``
        (thousands grouped); ``sign`` writes a '+'."""
        if not values:
            raise UserError("report: an 'up to' of no values")
        return self._number(f"up to {'+' if sign else ''}{round_up(max(values), digits):,.{digits}f}{unit}")

    def count(self, items: Sequence[object], noun: str) -> str:
        """``N noun``: N counted from ``items``, the things the sentence counts (the audit refuses a count of a
        :data:`COUNTED` noun that this did not write)."""
        return self._number(f"{len(items)} {noun}")

    def most(self, values: dict[str, float], claimed: str, word: str, key: Callable[[float], float] = abs) -> str:
        """``word`` (a superlative: largest, longest, ...) for ``claimed`` when it holds the extreme of ``values``
        by ``key``; else the report stops naming the one that does."""
        top = max(values, key=lambda k: key(values[k]))
        if key(values[claimed]) < key(values[top]):
            raise UserError(f"report: the data do not support {claimed!r} as the {word}: {top!r} is "
                            f"({values[top]} vs {values[claimed]})")
        return word

    def define(self, text: str) -> str:
        """A definition's text (the rule itself, a target): its words and bounds are not a claim about data."""
        self.numbers.update(numeric(text))
        return self._back(text)

    def audit(self, text: str, name: str) -> None:
        """Stop (one line) when ``text`` holds a guarded word more often than the checks backed it, or a bound
        or extreme ("within X%", "up to X") that the guard did not compute."""
        for phrase, n in sorted(numeric(text).items()):
            if n > self.numbers[phrase]:
                raise UserError(f"report: {name} says {phrase!r} {n} time(s), but only {self.numbers[phrase]} are "
                                "computed by the claims guard (Claims.within / up_to / count): typed")
        for word, n in sorted(guarded_words(text).items()):
            if n > self.backed[word]:
                lines = text.splitlines()
                at = next(i for i, ln in enumerate(lines) if word in ln.lower())
                raise UserError(f"report: {name} says {word!r} {n} time(s), but only {self.backed[word]} are backed by "
                                f"a check of the data (first at line {at + 1}: {lines[at][:80]})")
