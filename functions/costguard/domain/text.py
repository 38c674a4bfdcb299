"""Words for people: counts with their plural, durations, and lines cut to a width.

Pure and shared: the Lambdas' alert texts, the ``costguard`` command and the demo all say
"1 object", "1 day later" and "... over its …" the same way. (Colour and the terminal
belong to the command, in :mod:`costguard.cli.terminal`: the Lambdas print to no terminal.)
"""

from __future__ import annotations

import re
from datetime import timedelta

ELLIPSIS = "…"

#: Nouns whose plural is not the rule's.
_IRREGULAR = {"GiB": "GiB", "bytes": "bytes", "person": "people", "status": "statuses"}
#: Sentence punctuation a cut line does not end on before its ellipsis ("its …", not "its, …").
_DANGLING = ",;:"
#: A last token that is only punctuation ("-", "(", "=") is dropped with the cut.
_PUNCTUATION = re.compile(r"[^\w$€£%]+")
_TOKEN = re.compile(r"\S+")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 object``, ``2 objects``, ``1,024 objects``, ``0 accounts``; ``many`` when the
    plural is not ``word`` + s (``plural(n, "child", "children")``)."""
    return f"{n:,} {word if n == 1 else (many or plural_of(word))}"


def plural_of(word: str) -> str:
    """The English plural of a noun CostGuard counts: ``batch``→``batches``,
    ``policy``→``policies``, ``region``→``regions``."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def duration(span: timedelta) -> str:
    """A span as a person says it, to its two largest units, rounded to the second:
    ``1 day``, ``2 days 4 h``, ``3 h 20 min``, ``1 h``, ``45 min``, ``30 s``, ``0 s``.

    Never ``1 day, 0:00:00`` (Python's ``str(timedelta)``); a negative span is
    ``-3 h``.
    """
    seconds = round(span.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    units = [
        plural(days, "day") if days else "",
        f"{hours} h" if hours else "",
        f"{minutes} min" if minutes else "",
        f"{secs} s" if secs else "",
    ]
    first = next((i for i, u in enumerate(units) if u), None)
    if first is None:
        return "0 s"
    shown = [units[first]]
    if first + 1 < len(units) and units[first + 1]:
        shown.append(units[first + 1])
    return sign + " ".join(shown)


def truncate(text: str, width: int, ellipsis: str = ELLIPSIS) -> str:
    """``text`` in at most ``width`` characters, cut between whole words.

    A cut drops whole whitespace-separated tokens and ends with ``ellipsis``, so no number
    (``$12,000.00``), ARN (``arn:aws:iam::1:role/x``) or resource id is ever shown in
    part: a reader would take ``over its $12,`` for twelve dollars. When not even the first
    token fits, only the ellipsis is left. Characters are counted as code points.
    """
    if len(text) <= width:
        return text
    if width <= len(ellipsis):
        return ellipsis[: max(width, 0)]
    kept = 0  # where the shown text ends: after a whole token
    room = width - 1 - len(ellipsis)  # the text, a space and the ellipsis
    for token in _TOKEN.finditer(text):
        if token.start() > room:
            break  # linear: a long text is never walked past its width
        word = token.group()
        end = token.start() + len(word.rstrip(_DANGLING))
        if end > room:
            break
        if not _PUNCTUATION.fullmatch(word):
            kept = end
    if not kept:
        return ellipsis
    return f"{text[:kept]} {ellipsis}"


def labelled(label: str, text: str) -> str:
    """``label: text``, unless ``text`` already starts with the label's word: a verdict
    ``busy`` and its reason ``busy: gpu0 reached 92%`` read once, not ``busy: busy: ...``."""
    first = text.split(maxsplit=1)[0].rstrip(_DANGLING + ".") if text.strip() else ""
    if label and first.lower() == label.lower():
        return text
    return f"{label}: {text}" if text else label
