"""/ui sessions: expiring, revocable cookie tokens and the back-off on failed admin-key attempts.

A token is `<issued_at>.<HMAC-SHA256(admin_key, label + issued_at)>`: it proves the admin key was
shown at `issued_at` without holding it, expires after SESSION_MAX_AGE_S, stops working when the
admin key changes, and logout revokes it (kept in memory until it would have expired anyway).
State is per application and in memory: a restart logs nobody out, only revocations are forgotten.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from proxy.inspector.source import IPNetwork, request_source, sent_over_https
from proxy.inspector.throttle import FAILURE_LIMIT, FAILURE_WINDOW_S, LOCKOUT_S, FailureThrottle

__all__ = ["FAILURE_LIMIT", "FAILURE_WINDOW_S", "LOCKOUT_S", "SESSIONS", "UiSessions"]

SESSION_MAX_AGE_S = 12 * 3600
_LABEL = b"ctxproxy-ui-session-v2:"


def _mac(key: str, issued: str) -> str:
    return hmac.new(key.encode(), _LABEL + issued.encode(), hashlib.sha256).hexdigest()


@dataclass
class UiSessions:
    """Issues and checks session tokens, remembers logouts, throttles failed admin-key attempts."""

    clock: Callable[[], float] = time.time
    max_age_s: int = SESSION_MAX_AGE_S
    trusted_proxies: tuple[IPNetwork, ...] = ()
    revoked: dict[str, float] = field(default_factory=dict)  # token -> when it expires anyway
    throttle: FailureThrottle = field(init=False)

    def __post_init__(self) -> None:
        self.throttle = FailureThrottle(clock=lambda: self.clock())  # follows a replaced clock

    def source(self, request: web.Request) -> str:
        """The client a failed attempt counts against (X-Forwarded-For only from trusted proxies)."""
        return request_source(request, self.trusted_proxies)

    def over_https(self, request: web.Request) -> bool:
        """TLS here, or at a trusted proxy that says so (X-Forwarded-Proto only from trusted proxies)."""
        return sent_over_https(request, self.trusted_proxies)

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

    def retry_after(self, source: str) -> int:
        return self.throttle.retry_after(source)

    def failed(self, source: str) -> None:
        self.throttle.failed(source)

    def succeeded(self, source: str) -> None:
        self.throttle.succeeded(source)


SESSIONS = web.AppKey("ui_sessions", UiSessions)
