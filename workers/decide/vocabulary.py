"""The rules decider's vocabulary: the words it reads on screens, by what they mean. English
and German sign-in labels; a screen in any other language matches nothing here, so the rules
decider answers `blocked` there (never `done`)."""

from __future__ import annotations

import re

from workers.core.model import Kind

SUCCESS_WORDS = (
    "welcome",
    "signed in",
    "logged in",
    "you're in",
    "you are in",
    "success",
    "willkommen",
    "angemeldet",
)
AMBIGUOUS = 0.4
"""The confidence of a press between equally matching controls: below the default
`min_confidence`, so the step escalates (to the next decider, then a person)."""
SIGN_IN_GOALS = ("sign in", "log in", "login", "signin", "sign on", "log on", "continue as")
"""The goals this decider understands: the sign-in family."""
UNDERSTOOD = '"Sign in", "Log in", "Continue as <name>", "Sign in with <method>"'
ERROR_WORDS = (
    "wrong",
    "incorrect",
    "invalid",
    "try again",
    "too many attempts",
    "locked",
    "failed",
    "not recognised",
    "not recognized",
    "doesn't match",
    "does not match",
)

GOAL_PHRASES: tuple[tuple[str, ...], ...] = (
    ("sign in", "log in", "login", "signin", "sign on", "log on", "anmelden", "einloggen"),
    ("sign up", "register", "create account", "create an account", "join"),
    ("verify", "confirm", "submit code"),
    ("continue", "next", "proceed"),
    ("submit", "send"),
    ("allow", "accept", "agree", "ok", "okay"),
)
FORWARD = (
    "continue",
    "next",
    "submit",
    "verify",
    "confirm",
    "sign in",
    "log in",
    "go",
    "send code",
    "get code",
    "send me a code",
    "text me a code",
    "weiter",
    "fortfahren",
    "bestätigen",
    "code senden",
)
ACCEPTING = ("allow", "accept", "agree", "ok", "okay", "got it", "i agree", "yes")
REJECTING = ("don't allow", "do not allow", "deny", "decline", "not now", "no thanks", "never")
DISTRACTORS = (
    "forgot",
    "reset",
    "create account",
    "create an account",
    "sign up",
    "register",
    "resend",
    "cancel",
    "back",
    "help",
    "privacy",
    "terms",
    "sign out",
    "log out",
    "delete",
    "skip",
    "vergessen",
    "konto erstellen",
    "registrieren",
    "abbrechen",
    "zurück",
    "abmelden",
)
ALTERNATE = re.compile(r"\b(with|using|via)\s+(?!app\b|the app\b)\w+")
""""Sign in with Apple" / "Continue with Google": an alternate route, not the goal's own."""
CONSENT_TOGGLE = ("agree", "accept", "terms", "consent")
MINIMAL_CONSENT = (
    "reject all",
    "necessary only",
    "only necessary",
    "essential only",
    "only essential",
    "accept necessary",
    "use necessary cookies only",
    "reject",
    "decline",
)
"""On a consent / cookie / privacy dialog, the least the flow needs: pressed first."""
FULL_CONSENT = ("accept all", "allow all", "accept", "agree", "i agree", "ok", "got it")
DISMISS = (
    "not now",
    "maybe later",
    "later",
    "remind me later",
    "no thanks",
    "skip",
    "close",
    "continue",
    "dismiss",
)
"""On a "rate this app" / "what's new" / update interstitial: what gets it out of the way."""
MINIMAL_PERMISSION = (
    "allow once",
    "only this time",
    "while using the app",
    "allow while using app",
    "allow",
    "ok",
)
"""On a permission prompt, the narrowest grant that lets the flow on."""
NEVER_ON_DIALOGS = ("manage", "settings", "customise", "customize", "options", "preferences")
"""A dialog's controls that open more choices instead of closing it: never pressed."""
PRESSABLE = {Kind.BUTTON, Kind.LINK, Kind.MENU_ITEM, Kind.CELL, Kind.TAB}
