"""Control characters in what people and apps write: refused where text must be plain, shown as
escapes everywhere else.

`CONTROL` is C0 and C1 controls, DEL, and the bidi marks, embeddings, overrides and isolates:
what can move a terminal's cursor, restyle it, or make a line read otherwise than it is stored
(a right-to-left override turning `txt.exe` around). Goals, selector labels and schedule names
must be plain (`plain`: a one-line refusal naming the character, never echoing the text); values
that must keep such characters (an input to type, a screen's text) are stored as given and shown
through `visible`, by the CLI and by anything else that displays them.
"""

from __future__ import annotations

import re

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 control characters, DEL, and the bidi marks, embeddings, overrides and isolates."""


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
        f"holds a control or bidi character (U+{ord(char):04X} at position {found.start()}); "
        "remove it (this text must be plain)"
    )
