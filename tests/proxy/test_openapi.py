"""The OpenAPI document names exactly the routes the aiohttp app registers, and the proxy serves it."""

from __future__ import annotations

import httpx

from seamlessflow.proxy import ProxyOptions
from seamlessflow.proxy.openapi import openapi_document
from seamlessflow.proxy.server import ProxyServer


def _routes(app) -> set[tuple[str, str]]:
    """(METHOD, path) of every registered route; aiohttp's implicit HEAD twin of each GET is left out."""
    return {(route.method, route.resource.canonical) for route in app.router.routes() if route.method != "HEAD"}


def _documented(document: dict) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in document["paths"].items() for method in item}


def test_every_registered_route_is_documented_and_nothing_else(settings):
    config = ProxyOptions(port=0, listen_control=False, discover_engines=False)
    server = ProxyServer(settings, config)
    try:
        assert _routes(server.app()) == _documented(openapi_document(config))
    finally:
        server.publisher.close()


def test_limits_come_from_the_configuration():
    document = openapi_document(ProxyOptions(max_n=3, max_body_bytes=1234))
    chat = document["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert chat["properties"]["n"]["maximum"] == 3 and "1234 bytes" in document["info"]["description"]


async def test_the_proxy_serves_its_document_without_a_key(proxy):
    async with httpx.AsyncClient() as http:
        response = await http.get(proxy.base_url.removesuffix("/v1") + "/openapi.json")
    assert response.status_code == 200 and response.json() == openapi_document(proxy.options)
