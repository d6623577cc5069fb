"""The hard ceilings of what one request may carry, where the request models
(`workers.core.request`, `workers.core.records`) and `Settings` (whose API limits may only be
lower) both read them, without the models."""

from __future__ import annotations

MAX_INPUTS = 1000
"""The hard ceiling on a request's inputs, and on its secrets (the API's own limit,
`Settings.api_max_inputs`, is lower by default)."""
MAX_INPUT_CHARS = 1000
MAX_LABELS = 64
"""The hard ceiling on a selector's labels (the API's own limit, `Settings.api_max_labels`,
is lower by default)."""
MAX_LABEL_CHARS = 200
