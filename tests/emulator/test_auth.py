"""The authentication matrix over HTTP: every credential form x read / write / disabled / unknown / missing."""

from __future__ import annotations

import base64

import httpx
import pytest

from emulator.testing import InProcessEmulator

NS = "/svc/v2"


def forms(lab: InProcessEmulator, role: str) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    keys = lab.emulator.state.meta["bootstrap"]["api_keys"][role]
    ck, cs = keys["consumer_key"], keys["consumer_secret"]
    basic = base64.b64encode(f"{ck}:{cs}".encode()).decode()
    return {
        "bearer": ({"Authorization": "Bearer " + lab.credentials["api_keys"][role]}, {}),
        "basic": ({"Authorization": "Basic " + basic}, {}),
        "query": ({}, {"consumer_key": ck, "consumer_secret": cs}),
    }


@pytest.mark.parametrize("form", ["bearer", "basic", "query"])
async def test_credential_forms_by_role(lab: InProcessEmulator, form: str) -> None:
    async with lab.client() as client:
        headers, params = forms(lab, "read_write")[form]
        assert (await client.get(f"{NS}/sites/count", headers=headers, params=params)).json()["count"] == 30
        created = await client.post(f"{NS}/tags/add", headers=headers, params=params, json={"name": f"t-{form}"})
        assert created.json()["success"] == 1

        headers, params = forms(lab, "read")[form]
        assert (await client.get(f"{NS}/sites/count", headers=headers, params=params)).status_code == 200
        refused = await client.post(f"{NS}/tags/add", headers=headers, params=params, json={"name": "x"})
        assert refused.status_code == 401
        assert refused.json() == {
            "code": "svc_rest_authentication_error",
            "data": {"status": 401},
            "message": "The API key provided does not have write permissions.",
        }
        deleted = await client.delete(f"{NS}/tags/1/remove", headers=headers, params=params)
        assert deleted.json()["message"] == "The API key provided does not have delete permissions."

        headers, params = forms(lab, "disabled")[form]
        disabled = await client.get(f"{NS}/sites", headers=headers, params=params)
        assert disabled.status_code == 401
        assert disabled.json()["code"] == "svc_rest_authentication_disabled_key"


async def test_missing_unknown_wrong_and_garbage(lab: InProcessEmulator) -> None:
    rw_key = lab.emulator.state.meta["bootstrap"]["api_keys"]["read_write"]["consumer_key"]
    cases = {
        None: ("svc_rest_authentication_error", "You are not authenticated."),
        "Bearer " + "a" * 40 + "==" + "b" * 40: (
            "svc_rest_authentication_disabled_key",
            "The REST API Key are disabled.",
        ),
        "Bearer " + "0" * 40 + "==" + rw_key[3:]: ("svc_rest_authentication_error", "Consumer secret is invalid."),
        "Bearer not-a-token": ("svc_rest_authentication_missing_parameter", "Invalid OAuth parameter."),
    }
    async with lab.client() as client:
        for header, (code, message) in cases.items():
            response = await client.get(f"{NS}/sites", headers={"Authorization": header} if header else {})
            assert response.status_code == 401
            assert response.json() == {"code": code, "message": message, "data": {"status": 401}}
        app = lab.credentials["application_password"]
        basic = base64.b64encode(f"{app['username']}:{app['password']}".encode()).decode()
        as_app = await client.get(f"{NS}/sites", headers={"Authorization": "Basic " + basic})
        assert as_app.json()["code"] == "svc_rest_authentication_disabled_key"


async def test_every_key_disabled_refuses_everything(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    for key in list(lab.emulator.state.api_keys.values()):
        if key.enabled and key.key_id != 1:
            assert (
                await rw.request("PUT", f"{NS}/rest-api/edit-key/{key.key_id}", json={"active": False})
            ).status_code == 200
    assert (await rw.put(f"{NS}/rest-api/edit-key/1", json={"active": False})).json()["success"] == 1
    assert not any(k.enabled for k in lab.emulator.state.api_keys.values())
    assert (await rw.get(f"{NS}/sites/count")).status_code == 401


async def test_application_password_and_v1(lab: InProcessEmulator) -> None:
    from emulator.auth import verify_application_password

    app = lab.credentials["application_password"]
    state = lab.emulator.state
    assert verify_application_password(state, app["username"], app["password"])
    assert not verify_application_password(state, app["username"], "wrong password")
    v1 = lab.credentials["v1"]
    async with lab.client() as client:
        ok = await client.get("/svc/v1/sites/all-sites-count", params=v1)
        assert ok.json() == {"count": 30}
        missing = await client.get("/svc/v1/sites/all-sites")
        assert missing.status_code == 401 and "ERROR" in missing.json()
        bearer = await client.get(
            "/svc/v1/sites/all-sites", headers={"Authorization": "Bearer " + lab.credentials["api_keys"]["read_write"]}
        )
        assert bearer.status_code == 401 and "ERROR" in bearer.json()
        read = state.meta["bootstrap"]["api_keys"]["read"]
        pair = {"consumer_key": read["consumer_key"], "consumer_secret": read["consumer_secret"]}
        writing = await client.put("/svc/v1/site/site-update-plugins", params={**pair, "site_id": 1})
        assert writing.status_code == 401 and writing.json()["code"] == "rest_method_not_allowed"
        state.set_option("svc_enable_legacy_rest_api", 0)
        off = await client.get("/svc/v1/sites/all-sites-count", params=v1)
        assert off.status_code == 404 and off.json()["code"] == "rest_no_route"
