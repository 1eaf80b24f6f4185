"""/ui over the real app: disabled without an admin key, 401 without credentials, cookie login,
and the JSON API (all tenants, conversation detail, summary expansion)."""

from __future__ import annotations

from pytest_aiohttp import AiohttpClient

from config.settings import StoreSettings
from proxy.inspector import view as inspect_view
from store.sqlite.store import Store
from tests.proxy.inspector.inspect_fixtures import ADMIN_KEY, API_KEY, Populated, UiClient, UiServerFactory
from tests.proxy.inspector.inspect_scenario import ORIGINAL_TEXT

BEARER = {"Authorization": f"Bearer {ADMIN_KEY}"}


async def test_disabled_without_admin_key(make_ui_server: UiServerFactory,
                                          aiohttp_client: AiohttpClient) -> None:
    client: UiClient = await aiohttp_client(await make_ui_server(admin_key=None))
    page = await client.get("/ui/")
    assert page.status == 404 and "set server.admin_key" in await page.text()
    api = await client.get("/ui/api/conversations", headers=BEARER)
    assert api.status == 404
    assert (await api.json())["error"]["code"] == "ui_disabled"
    login = await client.post("/ui/login", data={"admin_key": ADMIN_KEY})
    assert login.status == 404 and "ctxproxy_admin" not in login.cookies


async def test_credentials_required(make_ui_server: UiServerFactory, aiohttp_client: AiohttpClient) -> None:
    client: UiClient = await aiohttp_client(await make_ui_server())
    api = await client.get("/ui/api/conversations")
    assert api.status == 401 and (await api.json())["error"]["type"] == "authentication_error"
    wrong = await client.get("/ui/api/conversations", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401
    page = await client.get("/ui/")
    assert page.status == 401 and 'action="/ui/login"' in await page.text()
    assert (await client.get("/ui/static/style.css")).status == 200  # the login page needs it; no data
    ok = await client.get("/ui/api/conversations", headers=BEARER)
    assert ok.status == 200


async def test_cookie_login_and_logout(make_ui_server: UiServerFactory,
                                       aiohttp_client: AiohttpClient) -> None:
    client: UiClient = await aiohttp_client(await make_ui_server())
    bad = await client.post("/ui/login", data={"admin_key": "wrong"}, allow_redirects=False)
    assert bad.status == 401 and 'data-testid="login-error"' in await bad.text()
    good = await client.post("/ui/login", data={"admin_key": ADMIN_KEY}, allow_redirects=False)
    assert good.status == 303 and good.headers["Location"] == "/ui/"
    set_cookie = good.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and "Path=/ui" in set_cookie
    assert ADMIN_KEY not in set_cookie
    page = await client.get("/ui/")
    assert page.status == 200 and 'data-testid="conversation-view"' in await page.text()
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert (await client.get("/ui/api/conversations")).status == 200
    await client.post("/ui/logout", allow_redirects=False)
    assert (await client.get("/ui/api/conversations")).status == 401


async def test_api_lists_every_tenant(make_ui_server: UiServerFactory, aiohttp_client: AiohttpClient,
                                      populated: Populated) -> None:
    client: UiClient = await aiohttp_client(await make_ui_server())
    body = await (await client.get("/ui/api/conversations", headers=BEARER)).json()
    tenants = {t["id"]: t["conversations"] for t in body["tenants"]}
    assert tenants == {populated.scenario.tenant_id: 1, populated.other_tenant: 1}
    by_id = {c["id"]: c for c in body["conversations"]}
    assert by_id[populated.scenario.conversation_id]["tenant_id"] == populated.scenario.tenant_id
    assert by_id[populated.scenario.conversation_id]["summary_count"] == 6
    assert by_id[populated.other_conversation]["tenant_id"] == populated.other_tenant


async def test_api_detail_is_the_inspection_model(make_ui_server: UiServerFactory,
                                                  aiohttp_client: AiohttpClient,
                                                  populated: Populated) -> None:
    sc = populated.scenario
    client: UiClient = await aiohttp_client(await make_ui_server())
    resp = await client.get(f"/ui/api/tenants/{sc.tenant_id}/conversations/{sc.conversation_id}",
                            headers=BEARER)
    assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store"
    body = await resp.json()
    store = Store.open(StoreSettings(path=str(populated.db_path)))
    try:
        expected = inspect_view.inspect_conversation(store.for_tenant(store.tenant_id_for_key(API_KEY)),
                                                     sc.conversation_id)
    finally:
        store.close()
    assert body == expected
    cross = await client.get(f"/ui/api/tenants/{sc.tenant_id}/conversations/{populated.other_conversation}",
                             headers=BEARER)
    assert cross.status == 404 and (await cross.json())["error"]["code"] == "not_found"


async def test_api_expand_reaches_original_messages(make_ui_server: UiServerFactory,
                                                    aiohttp_client: AiohttpClient,
                                                    populated: Populated) -> None:
    sc = populated.scenario
    client: UiClient = await aiohttp_client(await make_ui_server())
    resp = await client.get(f"/ui/api/tenants/{sc.tenant_id}/summaries/{sc.condensed.id}/expand",
                            headers=BEARER)
    tree = await resp.json()
    assert resp.status == 200 and tree["id"] == sc.condensed.id
    texts = [m["text"] for leaf in tree["sources"] for m in leaf["sources"]]
    assert len(texts) == 30 and any(t.startswith(ORIGINAL_TEXT) for t in texts)
    other = await client.get(f"/ui/api/tenants/{populated.other_tenant}/summaries/{sc.condensed.id}/expand",
                             headers=BEARER)
    assert other.status == 404


async def test_static_assets_are_served_from_an_allow_list(make_ui_server: UiServerFactory,
                                                           aiohttp_client: AiohttpClient) -> None:
    client: UiClient = await aiohttp_client(await make_ui_server())
    js = await client.get("/ui/static/app.js", headers=BEARER)
    assert js.status == 200 and js.headers["Content-Type"].startswith("text/javascript")
    assert "innerHTML" not in await js.text()
    css = await client.get("/ui/static/style.css", headers=BEARER)
    assert css.status == 200 and css.headers["X-Content-Type-Options"] == "nosniff"
    assert (await client.get("/ui/static/..%2Fui.py", headers=BEARER)).status == 404
    assert (await client.get("/ui/static/login.html", headers=BEARER)).status == 404
