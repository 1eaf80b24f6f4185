"""/ui sessions: expiring, revocable cookie tokens and a per-peer back-off on failed logins.

A token is `<issued_at>.<HMAC-SHA256(admin_key, label + issued_at)>`: it proves the admin key was
shown at `issued_at` without holding it, expires after SESSION_MAX_AGE_S, stops working when the
admin key changes, and logout revokes it (kept in memory until it would have expired anyway).
State is per application and in memory: a restart logs nobody out, only revocations are forgotten.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

SESSION_MAX_AGE_S = 12 * 3600
FAILURE_LIMIT = 5  # failed logins from one peer within FAILURE_WINDOW_S...
FAILURE_WINDOW_S = 60.0
LOCKOUT_S = 60.0  # ...lock that peer out of /ui/login for this long
MAX_TRACKED_PEERS = 4096  # beyond this, peers with nothing recent are forgotten
_LABEL = b"ctxproxy-ui-session-v2:"


def _mac(key: str, issued: str) -> str:
    return hmac.new(key.encode(), _LABEL + issued.encode(), hashlib.sha256).hexdigest()


@dataclass
class UiSessions:
    """Issues and checks session tokens, remembers logouts, counts failed logins per peer."""

    clock: Callable[[], float] = time.time
    max_age_s: int = SESSION_MAX_AGE_S
    revoked: dict[str, float] = field(default_factory=dict)  # token -> when it expires anyway
    failures: dict[str, deque[float]] = field(default_factory=dict)
    locked_until: dict[str, float] = field(default_factory=dict)

    def issue(self, key: str) -> str:
        issued = str(int(self.clock()))
        return f"{issued}.{_mac(key, issued)}"

    def valid(self, token: str, key: str) -> bool:
        """Right MAC for this key (constant-time), not expired, not from the future, not revoked."""
        issued, _, mac = token.partition(".")
        if not issued.isdigit() or not hmac.compare_digest(mac.encode(), _mac(key, issued).encode()):
            return False
        age = self.clock() - int(issued)
        return -60 <= age < self.max_age_s and token not in self.revoked

    def revoke(self, token: str) -> None:
        now = self.clock()
        self.revoked = {t: exp for t, exp in self.revoked.items() if exp > now}
        issued = token.partition(".")[0]
        if issued.isdigit():
            self.revoked[token] = int(issued) + self.max_age_s

    def retry_after(self, peer: str) -> int:
        """Seconds this peer must still wait before trying to log in again (0: it may try now)."""
        remaining = self.locked_until.get(peer, 0.0) - self.clock()
        return max(0, int(remaining + 0.999))

    def failed(self, peer: str) -> None:
        """Count a failed login; the FAILURE_LIMIT-th within the window locks the peer out."""
        now = self.clock()
        recent = self.failures.setdefault(peer, deque())
        recent.append(now)
        while recent and recent[0] <= now - FAILURE_WINDOW_S:
            recent.popleft()
        if len(recent) >= FAILURE_LIMIT:
            self.locked_until[peer] = now + LOCKOUT_S
            recent.clear()
        if len(self.failures) > MAX_TRACKED_PEERS:
            self._forget_idle(now)

    def succeeded(self, peer: str) -> None:
        self.failures.pop(peer, None)

    def _forget_idle(self, now: float) -> None:
        self.failures = {p: d for p, d in self.failures.items() if d and d[-1] > now - FAILURE_WINDOW_S}
        self.locked_until = {p: t for p, t in self.locked_until.items() if t > now}


SESSIONS = web.AppKey("ui_sessions", UiSessions)


def sent_over_https(request: web.Request) -> bool:
    """TLS here, or at a reverse proxy that says so (`X-Forwarded-Proto: https`)."""
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    return request.secure or forwarded == "https"


def peer_of(request: web.Request) -> str:
    """Who the back-off counts against: the connection's address (the reverse proxy's, behind one)."""
    return request.remote or "unknown"
