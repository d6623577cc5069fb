"""The journey the tests share (issue 43's done-when): sign in → open Settings → scroll until
Appearance is visible → press it → turn Dark mode on → back → back → check the home screen's
changed text, on the sim `settings` app (`workers.devices.sim.apps`)."""

from __future__ import annotations

from typing import Any

EMAIL = "ada@example.com"
PASSWORD = "Journey-s3cret-42"
JOURNEY: list[Any] = [
    {
        "goal": "Sign in",
        "inputs": {"email": EMAIL},
        "secrets": {"password": {"ref": "env:SUITE_PW"}},
        "done_when": "Welcome",
    },
    {"press": "Settings"},
    {"scroll": {"direction": "down", "until": "Appearance", "max": 5}},
    {"press": "Appearance"},
    {"name": "dark mode on", "press": "Dark mode"},
    "back",
    "back",
    {"check": '"Theme: Dark" is visible'},
]
JOURNEY_YAML = """\
  - name: dark-mode
    matrix: {platform: [ios, android], labels: {app: settings}}
    steps:
      - goal: Sign in
        inputs: {email: ada@example.com}
        secrets: {password: env:SUITE_PW}
        done_when: Welcome
      - press: Settings
      - scroll: {direction: down, until: Appearance, max: 5}
      - press: Appearance
      - name: dark mode on
        press: Dark mode
      - back
      - back
      - check: '"Theme: Dark" is visible'
  - name: dark-mode-unchecked
    matrix: {platform: ios, labels: {app: settings}}
    steps:
      - goal: Sign in
        inputs: {email: ada@example.com}
        secrets: {password: env:SUITE_PW}
        done_when: Welcome
      - press: Settings
      - back
      - name: theme is dark
        check: '"Theme: Dark" is visible'
"""
"""Two flows: the journey on iOS and Android, and one whose last check is false (Dark mode
was never turned on)."""
