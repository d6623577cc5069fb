"""The words goalfleet reads on screens, by what they mean, and the one way it reads them.

Every reader of a screen takes its words from here: the done-check (`workers.core.evidence`),
the rules decider (`workers.decide.rules`), the loop's `done_when` check (`Snapshot.shows`)
and the guards (`DEFAULT_DANGEROUS`). A word added here is added for all of them, so the
done-check and a decider cannot disagree about one screen because their lists drifted.

What counts as a screen's text is the app's content: static texts and controls' names. The
application's (process) name, window titles and the toolkit's frames are chrome
(`workers.core.projection.screen_texts`) and never match here.

English and German sign-in labels; a screen in any other language matches nothing, so the
rules decider answers `blocked` there (never `done`). Matching is on whole words after `norm`
(`has`): "Pay now" holds "pay", "Display" does not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# -- how a text is read -------------------------------------------------------------------------


def norm(text: str) -> str:
    """Casefolded, punctuation to spaces (apostrophes kept, typographic ones made straight),
    whitespace collapsed."""
    folded = text.casefold().replace("\u2019", "'")
    return " ".join(re.sub(r"[^\w'@ -]", " ", folded).split())


def has(text: str, phrase: str) -> bool:
    """`phrase` in `text` as whole words, an underscore a word break as a space is (both
    normalised by the caller: `norm`)."""
    return _whole_words(phrase).search(text) is not None


def has_any(text: str, phrases: Iterable[str]) -> bool:
    """Whether `text` (normalised) holds one of `phrases` as whole words."""
    return any(has(text, p) for p in phrases)


@functools.lru_cache(maxsize=4096)
def _whole_words(phrase: str) -> re.Pattern[str]:
    """The pattern of `has`, compiled once per phrase: the vocabularies below hold more
    phrases than `re`'s own cache (512 patterns), which then compiled ~3 of them every run."""
    return re.compile(rf"(?<![^\W_]){re.escape(phrase)}(?![^\W_])")


def shown(marker: str, texts: Iterable[str]) -> bool:
    """Whether `marker` is visible among a screen's content `texts`: a case-insensitive
    substring of one of them. The one "is this on the screen" predicate: the loop's
    `done_when` check (`Snapshot.shows`) and the deciders' use it."""
    needle = marker.strip().casefold()
    return bool(needle) and any(needle in t.casefold() for t in texts)


# -- the goal and its controls ------------------------------------------------------------------

SIGN_IN_GOALS = ("sign in", "log in", "login", "signin", "sign on", "log on", "continue as")
"""The goals the rules decider understands: the sign-in family."""
GOAL_PHRASES: tuple[tuple[str, ...], ...] = (
    ("sign in", "log in", "login", "signin", "sign on", "log on", "anmelden", "einloggen"),
    ("sign up", "register", "create account", "create an account", "join"),
    ("verify", "confirm", "submit code"),
    ("continue", "next", "proceed"),
    ("submit", "send"),
    ("allow", "accept", "agree", "ok", "okay"),
)
"""Phrases that mean the same goal: a goal holding one is named by every one of its group."""
FORWARD = (
    "continue",
    "next",
    "submit",
    "verify",
    "confirm",
    "sign in",
    "log in",
    "login",
    "sign on",
    "go",
    "start",
    "get started",
    "send code",
    "get code",
    "send me a code",
    "text me a code",
    "weiter",
    "fortfahren",
    "bestätigen",
    "code senden",
)
"""Names of controls that move a flow on."""
ACCEPTING = ("allow", "accept", "agree", "ok", "okay", "got it", "i agree", "yes")
"""Names of controls that say yes to a dialog (a flow goes on through them too)."""
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
"""Controls beside a sign-in that lead elsewhere: never pressed unless the goal names them."""
ALTERNATE = re.compile(r"\b(with|using|via)\s+(?!app\b|the app\b)\w+")
""""Sign in with Apple" / "Continue with Google": an alternate route, not the goal's own."""


def onward(name: str, goal: str) -> bool:
    """Whether a control named `name` moves a flow on: it names the goal, a forward verb or an
    accepting one (both normalised: `norm`). A screen offering one is not where a flow ends."""
    return bool(name) and (has(name, goal) or has_any(name, FORWARD) or has_any(name, ACCEPTING))


# -- fields -------------------------------------------------------------------------------------

FIELD_SYNONYMS: dict[str, tuple[str, ...]] = {
    "email": (
        "email",
        "e-mail",
        "mail",
        "username",
        "user name",
        "login",
        "apple id",
        "e-mail-adresse",
    ),
    "username": ("username", "user name", "user id", "login", "email", "account"),
    "user": ("username", "user name", "user", "login", "email"),
    "login": ("login", "username", "email"),
    "phone": ("phone", "mobile", "telephone", "cell"),
    "code": (
        "code",
        "otp",
        "one-time",
        "verification",
        "passcode",
        "digit",
        "pin",
        "bestätigungscode",
    ),
    "otp": ("code", "otp", "one-time", "verification", "passcode", "digit"),
    "password": ("password", "passphrase", "pass word", "pwd", "passwort", "kennwort"),
    "pin": ("pin", "passcode"),
    "name": ("full name", "name"),
}
"""Field names that take an input, by the input's name."""
PASSWORD_LIKE = ("password", "passphrase", "passwd", "pwd", "pass", "pin", "passcode", "secret")
"""Input names a secure field takes."""
CONSENT_TOGGLE = ("agree", "accept", "terms", "consent")
"""Switches and checkboxes a flow needs on ("I agree to the terms")."""

# -- what a screen says -------------------------------------------------------------------------

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
"""Texts of a screen a sign-in ends on (evidence only where nothing is left to do)."""
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
"""Texts of an app refusing what was submitted."""
DEFAULT_DANGEROUS = ("delete", "purchase", "buy", "pay", "erase", "transfer", "unsubscribe")
"""Words that make a control dangerous: choosing it escalates instead of pressing
(`workers.core.guards`; `Settings.dangerous_controls` defaults to them)."""


def word_pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    """One case-insensitive whole-word pattern for `words` (the guards' dangerous words)."""
    alternatives = "|".join(re.escape(w.strip()) for w in words if w.strip())
    return re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE) if alternatives else None


# -- dialogs in the way -------------------------------------------------------------------------

INTERSTITIALS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "consent",
        (
            "cookie",
            "cookies",
            "we use cookies",
            "your privacy",
            "privacy choices",
            "privacy settings",
            "consent",
            "tracking",
            "personalised ads",
            "personalized ads",
            "data protection",
        ),
    ),
    (
        "rating",
        ("rate this app", "rate us", "enjoying", "leave a review", "how would you rate"),
    ),
    (
        "update",
        (
            "what's new",
            "whats new",
            "update available",
            "new version",
            "update required",
            "update now",
        ),
    ),
)
"""Screens apps put in the way of a flow, by kind, and the phrases that tell them. A
permission prompt is told by meaning instead (`permission_subject`)."""

PERMISSION_ASKS = (
    "allow",
    "would like to",
    "we'd like to",
    "wants to",
    "want to",
    "permission",
    "turn on",
    "enable",
    "grant",
    "needs access",
    "need access",
)
"""How a prompt asks for something."""
UNNEEDED_SUBJECTS: dict[str, tuple[str, ...]] = {
    "notifications": ("notification", "notifications", "alerts"),
    "tracking": ("track", "tracking", "personalised ads", "personalized ads"),
}
"""What a prompt may ask for that no sign-in needs: declined (a goal that names it aside)."""
ACCESS_SUBJECTS: dict[str, tuple[str, ...]] = {
    "location": ("location", "locations", "where you are"),
    "camera": ("camera",),
    "microphone": ("microphone", "mic"),
    "photos": ("photo", "photos", "photo library", "pictures", "media", "videos"),
    "contacts": ("contacts", "address book"),
    "calendar": ("calendar", "calendars", "reminders"),
    "bluetooth": ("bluetooth", "nearby devices", "local network"),
    "files": ("files", "storage", "documents"),
    "biometrics": ("face id", "touch id", "fingerprint", "biometrics", "biometric"),
    "motion": ("motion", "fitness", "health"),
    "access": ("access",),
}
"""What a prompt may ask access to: the narrowest time-bound grant, else declined."""
LIMITED_GRANTS = (
    "allow once",
    "only this time",
    "just once",
    "this time only",
    "while using the app",
    "while using app",
    "while using",
    "only while using",
)
"""A permission's grants that end by themselves, narrowest first."""
DECLINES = (
    "ask app not to track",
    "don't allow",
    "do not allow",
    "deny",
    "decline",
    "no thanks",
    "not now",
    "don't",
    "no",
    "never",
    "reject",
    "block",
    "later",
    "skip",
)
"""Names of controls that refuse, plainest first: a permission prompt's answer
(`workers.decide.rules`), and never pressed off a dialog unless the goal names them."""
GRANTS = ("allow", "ok", "okay", "yes", "accept", "continue", "turn on", "enable", "grant")
"""A permission prompt's full grants: pressed only when nothing narrower is offered, and then
at a confidence that escalates (a person decides)."""


def permission_subject(texts: Iterable[str]) -> str | None:
    """What a permission prompt among these screen texts asks for ('notifications',
    'tracking', 'location', 'camera', …, 'access' when it names nothing more), or None when
    no text asks to allow anything. By meaning: a text that asks (allow, would like to, wants
    to, turn on, permission, …) about a subject, whatever the prompt's buttons say."""
    for text in texts:
        t = norm(text)
        if not has_any(t, PERMISSION_ASKS):
            continue
        for subjects in (UNNEEDED_SUBJECTS, ACCESS_SUBJECTS):
            for subject, words in subjects.items():
                if has_any(t, words):
                    return subject
    return None


def interstitial(texts: Iterable[str]) -> str | None:
    """The kind of dialog these screen texts show ('consent', 'permission', 'rating',
    'update'), or None. A consent notice is told first (a cookie banner mentions tracking)."""
    normed = [norm(t) for t in texts]
    kind, phrases = INTERSTITIALS[0]
    if any(has_any(t, phrases) for t in normed):
        return kind
    if permission_subject(normed) is not None:
        return "permission"
    for kind, phrases in INTERSTITIALS[1:]:
        if any(has_any(t, phrases) for t in normed):
            return kind
    return None


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
NEVER_ON_DIALOGS = ("manage", "settings", "customise", "customize", "options", "preferences")
"""A dialog's controls that open more choices instead of closing it: never pressed."""
