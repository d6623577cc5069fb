"""The web console: `/ui` pages served by `goalfleet api` (see `pages`), signed in with a named
token (`session`), rendered from the fleet's records (`views`, `templates/`)."""
