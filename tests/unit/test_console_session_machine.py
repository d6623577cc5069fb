"""Console sessions as a machine (`scheduler.console.session`, `lua/console_tokens.lua`,
`lua/console_open.lua`) under random sequences of sign-ins, sign-outs and API restarts with
tokens added, removed, rotated and put back, against a real redis-server. After every step,
every cookie ever issued is read by the API of the moment and must open exactly when the model
says:

- a session opens until it is signed out or expires (never, here);
- and only while its name's token is the one it signed in with, with no API start in between
  at which the name had another token or none (putting a token back revives nothing);
- a cookie whose signature or id was tampered with opens nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import hypothesis.strategies as st
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis.stateful import run_state_machine_as_test as run_machine

from scheduler.console.session import Sessions
from workers.fleet.keys import Keys

NAMES = ("alice", "bob")
TOKENS = ("token-one-0000", "token-two-1111")
"""Each name's token is one of these (or none): rotating is switching, putting back is
switching again."""


@dataclass
class Issued:
    cookie: str
    name: str
    token: str
    ended: bool = False
    tainted: bool = False
    """An API started while the name had another token or none."""


class SessionMachine(RuleBasedStateMachine):
    def __init__(self, r: redis.Redis) -> None:
        super().__init__()
        r.flushdb()
        self.r = r
        self.k = Keys("sm")
        self.tokens = dict(zip(NAMES, TOKENS, strict=True))
        """The API's tokens now: name -> token (a removed name is absent)."""
        self.issued: list[Issued] = []
        self.api = self._start()

    def _start(self) -> Sessions:
        api = Sessions(self.r, self.k, self.tokens.items())
        api.bind()
        for s in self.issued:
            if self.tokens.get(s.name) != s.token:
                s.tainted = True
        return api

    @rule(name=st.sampled_from(NAMES))
    def sign_in(self, name: str) -> None:
        if name not in self.tokens:
            return
        cookie, _ = self.api.open(name)
        self.issued.append(Issued(cookie, name, self.tokens[name]))

    @precondition(lambda self: self.issued)
    @rule(data=st.data())
    def sign_out(self, data: st.DataObject) -> None:
        s = data.draw(st.sampled_from(self.issued))
        session = self.api.read(s.cookie)
        if session is not None:
            self.api.end(session)
            s.ended = True

    @rule(name=st.sampled_from(NAMES), token=st.sampled_from((*TOKENS, None)))
    def restart(self, name: str, token: str | None) -> None:
        """The API restarts with `name`'s token set to `token` (None: removed)."""
        if token is None:
            self.tokens.pop(name, None)
        else:
            self.tokens[name] = token
        self.api = self._start()

    @invariant()
    def every_cookie_opens_exactly_when_it_should(self) -> None:
        for s in self.issued:
            valid = not s.ended and not s.tainted and self.tokens.get(s.name) == s.token
            session = self.api.read(s.cookie)
            assert (session is not None) == valid, (s, self.tokens)
            if session is not None:
                assert session.name == s.name

    @invariant()
    def a_tampered_cookie_opens_nothing(self) -> None:
        for s in self.issued[-2:]:
            name, sid, signature = s.cookie.split(".")
            other = "0" if signature[0] != "0" else "1"
            assert self.api.read(f"{name}.{sid}.{other}{signature[1:]}") is None
            flipped = ("A" if sid[0] != "A" else "B") + sid[1:]
            assert self.api.read(f"{name}.{flipped}.{signature}") is None


def test_console_sessions_as_a_machine(client: redis.Redis) -> None:
    run_machine(
        lambda: SessionMachine(client),
        settings=settings(
            max_examples=60,
            stateful_step_count=30,
            deadline=None,
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
