"""The words that make a control dangerous, and their pattern: what the guards
(`workers.core.guards`) match and `Settings.dangerous_controls` defaults to, without the
models."""

from __future__ import annotations

import re

DEFAULT_DANGEROUS = ("delete", "purchase", "buy", "pay", "erase", "transfer", "unsubscribe")
"""Words that make a control dangerous: choosing it escalates instead of pressing. Matched as
whole words, case-insensitively ("Pay now" is dangerous, "Display" is not)."""


def word_pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    alternatives = "|".join(re.escape(w.strip()) for w in words if w.strip())
    return re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE) if alternatives else None
