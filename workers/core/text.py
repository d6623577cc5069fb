"""Control characters in what people and apps write: refused where text must be plain, shown as
escapes everywhere else.

`CONTROL` is C0 and C1 controls, DEL, the bidi marks, embeddings, overrides and isolates, the
zero-width characters and the line and paragraph separators: what can move a terminal's
cursor, restyle it, make a line read otherwise than it is stored (a right-to-left override
turning `txt.exe` around), hide inside a word (`Sign\u200b in` is not `Sign in`, though it
reads so), or break a line where none shows (U+2028 ends a line in JavaScript and some logs).
Goals, selector labels and schedule names must be plain (`plain`: a one-line refusal naming the
character, never echoing the text); values that must keep such characters (an input to type, a
screen's text) are stored as given and shown through `visible`, by the CLI and by anything else
that displays them.
"""

from __future__ import annotations

import re

CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
"""C0 and C1 control characters, DEL, the bidi marks, embeddings, overrides and isolates, the
zero-width characters (space, joiners, word joiner, invisible operators, BOM, the Mongolian
vowel separator) and the line and paragraph separators U+2028 and U+2029."""


def visible(text: str) -> str:
    """`text` with each control character shown as its escape (ESC as `\\x1b`, a newline as
    `\\n`, a right-to-left override as `\\u202e`): printable, one line, inert in a terminal."""
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def plain(text: str) -> str:
    """`text` when it holds no control character; else ValueError naming the first one and
    where it is (one line; the text itself is not repeated)."""
    found = CONTROL.search(text)
    if found is None:
        return text
    char = found.group()
    raise ValueError(
        f"holds a control, bidi or invisible character (U+{ord(char):04X} at position "
        f"{found.start()}); remove it (this text must be plain)"
    )
