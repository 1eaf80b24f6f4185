"""The web inspector at /ui: static page, login, and a read-only JSON API over every tenant's data.

Protected by `server.admin_key`: a request needs `Authorization: Bearer <admin_key>` or the
`ctxproxy_admin` cookie that /ui/login sets (an expiring HMAC token, never the key; see
proxy/inspector/session.py, which also backs off repeated failed logins). Without an admin key configured
every /ui path answers 404. Operators see all tenants; each read still goes through that
tenant's `TenantStore`. All data reaches the page as JSON; the page renders it with textContent.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from config.errors import (
    AuthenticationError,
    CtxProxyError,
    NotFoundError,
    TooManyAttemptsError,
    http_status,
)
from proxy import appkeys
from proxy.inspector import view
from proxy.inspector.session import SESSIONS, UiSessions
from proxy.inspector.source import parse_networks
from proxy.server.auth import bearer_key

COOKIE = "ctxproxy_admin"
STATIC_DIR = Path(__file__).with_name("static")
STATIC_FILES = {"app.js": "text/javascript", "style.css": "text/css"}
DISABLED_MESSAGE = ("The web inspector is disabled: set server.admin_key in the config "
                    "(or its environment override) to enable /ui.")
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
CONVERSATIONS_PER_TENANT = 200

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Verdict = Literal["ok", "denied"]
LOCKED_MESSAGE = "Too many failed attempts: try again in a minute."


def setup_ui(app: web.Application) -> None:
    """Add the /ui routes; create_app calls this once (settings and store come from app keys)."""
    app[SESSIONS] = UiSessions(trusted_proxies=parse_networks(app[appkeys.SETTINGS].server.trusted_proxies))
    app.router.add_get("/ui", _page(_index))
    app.router.add_get("/ui/", _page(_index))
    app.router.add_get("/ui/login", _page(_login_form, public=True))
    app.router.add_post("/ui/login", _page(_login, public=True))
    app.router.add_post("/ui/logout", _page(_logout, public=True))
    app.router.add_get("/ui/static/{name}", _page(_static, public=True))  # code only, no data
    app.router.add_get("/ui/api/conversations", _api(_api_conversations))
    app.router.add_get("/ui/api/tenants/{tenant}/conversations/{conversation}", _api(_api_conversation))
    app.router.add_get("/ui/api/tenants/{tenant}/summaries/{summary}/expand", _api(_api_expand))


# ---------------------------------------------------------------------------------------------
# Authentication


def admin_key(request: web.Request) -> str | None:
    settings = request.app.get(appkeys.SETTINGS)
    return settings.server.admin_key if settings is not None else None


def authorise(request: web.Request, key: str) -> Verdict:
    """A live session cookie, else a Bearer admin key (compared in constant time).

    A wrong Bearer key counts as a failed attempt of the request's source, exactly like a failed
    login; a locked source's key is not compared at all (TooManyAttemptsError, 429).
    """
    cookie = request.cookies.get(COOKIE, "")
    sessions = request.app[SESSIONS]
    if cookie and sessions.valid(cookie, key):
        return "ok"
    given = bearer_key(request)
    if given is None:
        return "denied"
    return "ok" if check_key(sessions, sessions.source(request), given, key) else "denied"


def check_key(sessions: UiSessions, source: str, given: str, key: str) -> bool:
    """One admin-key attempt from `source`: refused unchecked while locked, failures counted."""
    wait = sessions.retry_after(source)
    if wait:
        raise TooManyAttemptsError(LOCKED_MESSAGE, retry_after_s=wait)
    if hmac.compare_digest(given.encode(), key.encode()):
        sessions.succeeded(source)
        return True
    sessions.failed(source)
    return False


def _secure(resp: web.StreamResponse) -> web.StreamResponse:
    resp.headers.update(SECURITY_HEADERS)
    return resp


def _error(exc: CtxProxyError) -> web.Response:
    headers = dict(SECURITY_HEADERS)
    if isinstance(exc, TooManyAttemptsError):
        headers["Retry-After"] = str(exc.retry_after_s)
    return web.json_response(exc.to_body(), status=http_status(exc), headers=headers)


def _api(handler: Callable[[web.Request], Any]) -> Handler:
    """JSON endpoint: 404 when disabled, 401 without credentials, errors in OpenAI's shape."""
    async def wrapped(request: web.Request) -> web.StreamResponse:
        key = admin_key(request)
        if not key:
            return _error(NotFoundError(DISABLED_MESSAGE, code="ui_disabled"))
        try:
            if authorise(request, key) != "ok":
                raise AuthenticationError("admin key required (Authorization: Bearer <admin_key>)")
            found = await request.app[appkeys.HOST].run(lambda: handler(request))  # the store's thread
            return _secure(web.json_response(found))
        except CtxProxyError as exc:
            return _error(exc)
    return wrapped


def _page(handler: Callable[[web.Request], Awaitable[web.StreamResponse]], public: bool = False) -> Handler:
    """HTML endpoint: plain 404 when disabled; unauthenticated visitors get the login form (401)."""
    async def wrapped(request: web.Request) -> web.StreamResponse:
        key = admin_key(request)
        if not key:
            return _secure(web.Response(status=404, text=DISABLED_MESSAGE + "\n"))
        try:
            if not public and authorise(request, key) != "ok":
                return _secure(_login_page(status=401))
        except TooManyAttemptsError as exc:
            return _secure(_locked_page(exc))
        return _secure(await handler(request))
    return wrapped


def _login_page(status: int = 200, error: str | None = None) -> web.Response:
    html = (STATIC_DIR / "login.html").read_text(encoding="utf-8")
    html = html.replace("<!--ERROR-->", f'<p class="error" data-testid="login-error">{error}</p>'
                        if error else "")  # `error` is one of this module's fixed strings
    return web.Response(status=status, text=html, content_type="text/html")


def _locked_page(exc: TooManyAttemptsError) -> web.Response:
    resp = _login_page(status=429, error=LOCKED_MESSAGE)
    resp.headers["Retry-After"] = str(exc.retry_after_s)
    return resp


async def _login_form(request: web.Request) -> web.StreamResponse:
    return _login_page()


async def _login(request: web.Request) -> web.StreamResponse:
    """Check the posted key; on success set the HttpOnly, SameSite=Strict, expiring session cookie.

    A peer with too many recent failures gets 429 without its key being checked.
    """
    key = admin_key(request) or ""
    sessions = request.app[SESSIONS]
    source = sessions.source(request)
    if sessions.retry_after(source):  # refused before the form is even read
        return _locked_page(TooManyAttemptsError(LOCKED_MESSAGE,
                                                 retry_after_s=sessions.retry_after(source)))
    form = await request.post()
    try:
        if not check_key(sessions, source, str(form.get("admin_key", "")), key):
            return _login_page(status=401, error="Wrong admin key.")
    except TooManyAttemptsError as exc:
        return _locked_page(exc)
    resp = _redirect("/ui/")
    resp.set_cookie(COOKIE, sessions.issue(key), httponly=True, samesite="Strict", path="/ui",
                    max_age=sessions.max_age_s, secure=sessions.over_https(request))
    return resp


def _redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})


async def _logout(request: web.Request) -> web.StreamResponse:
    """Revoke the session token (a copy of the cookie stops working too) and drop the cookie."""
    cookie, key = request.cookies.get(COOKIE), admin_key(request) or ""
    if cookie and request.app[SESSIONS].valid(cookie, key):  # only live tokens: no junk kept
        request.app[SESSIONS].revoke(cookie)
    resp = _redirect("/ui/login")
    resp.del_cookie(COOKIE, path="/ui")
    return resp


# ---------------------------------------------------------------------------------------------
# Static files


async def _index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC_DIR / "index.html", headers={"Content-Type": "text/html"})


async def _static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in STATIC_FILES:  # a fixed allow-list: no path traversal
        return _error(NotFoundError(f"no static file {name}"))
    return web.FileResponse(STATIC_DIR / name, headers={"Content-Type": STATIC_FILES[name]})


# ---------------------------------------------------------------------------------------------
# JSON API


def tenant_ids(store: Any) -> list[str]:
    """Every tenant with at least one conversation (the operator's view spans tenants)."""
    return list(store.tenant_ids())


def _store(request: web.Request) -> Any:
    return request.app[appkeys.STORE]


def _api_conversations(request: web.Request) -> dict[str, Any]:
    """All tenants' conversations, newest first, each row carrying its tenant id."""
    store = _store(request)
    tenants = []
    rows: list[dict[str, Any]] = []
    for tid in tenant_ids(store):
        convs = view.conversation_list(store.for_tenant(tid), limit=CONVERSATIONS_PER_TENANT)
        tenants.append({"id": tid, "conversations": len(convs)})
        rows.extend(convs)
    rows.sort(key=lambda r: -float(r["updated_at"]))
    return {"tenants": tenants, "conversations": rows}


def _api_conversation(request: web.Request) -> dict[str, Any]:
    tenant = _store(request).for_tenant(request.match_info["tenant"])
    return view.inspect_conversation(tenant, request.match_info["conversation"])


def _api_expand(request: web.Request) -> dict[str, Any]:
    tenant = _store(request).for_tenant(request.match_info["tenant"])
    return view.expand_summary(tenant, request.match_info["summary"])
