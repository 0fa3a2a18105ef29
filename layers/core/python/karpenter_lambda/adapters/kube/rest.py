"""Kubernetes REST requests through ``kubernetes.client.ApiClient``, without the generated API classes.

The generated classes (``CoreV1Api``, ``AppsV1Api``, ...) cost about 0.65 s of imports per process (they import
the pydantic models of every type they name), and :class:`~.client.KubeClient` uses none of what they add: it asks
for the raw answer (``_preload_content=False``) and parses the JSON itself.  :func:`call` sends what a generated
method sends, through the same ``ApiClient`` (its configuration, default headers, connection pool, bearer-token auth
with ``Configuration.refresh_api_key_hook``, path quoting, query encoding, body serialisation):

* the path: the generated method's ``resource_path`` template, its ``{name}``-style parameters quoted by the client;
* ``Accept: application/json`` (what ``select_header_accept`` picks for every operation used here);
* ``Content-Type`` only when given (each PATCH names its own: merge, strategic merge or JSON patch; the generated
  POST and DELETE methods send none and let the REST layer choose, as here);
* ``auth_settings=['BearerToken']``;
* the query as a list of ``(name, value)`` pairs under the API's names (``continue``, ``fieldSelector``,
  ``labelSelector``, ``limit``, ``gracePeriodSeconds``), in the generated methods' order;
* the body as given (a dict, or a list for a JSON patch).  kubernetes 37's generated create methods first validated
  a dict body into its pydantic model and serialised that back: times went out as ``...+00:00`` rather than ``...Z``
  (the same instant to the API server), and a field the model did not know raised pydantic's ValidationError before
  anything was sent; now the API server judges it, as it does for kubectl (by default: dropped, with a warning).

The answer is the unread ``urllib3`` response, as the generated methods return it with ``_preload_content=False``;
a status outside 2xx raises ``kubernetes.client.exceptions.ApiException`` (with status, reason, body and headers), as
they do.

Both generations of the official client are handled: ``kubernetes`` >= 37 (``ApiClient.param_serialize`` then
``call_api``) and the older python-legacy one (``ApiClient.call_api(resource_path, method, ...)``; 31.0.0 sends the
same requests as its generated methods).
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["call", "ACCEPT", "AUTH"]

ACCEPT = "application/json"
AUTH = ["BearerToken"]


def call(api_client, method: str, path: str, path_params: dict | None = None, query: Iterable[tuple[str, Any]] = (),
         body: Any = None, content_type: str | None = None, *, _preload_content: bool = False,
         _request_timeout: Any = None):
    """Send ``method path`` (a template such as ``/api/v1/nodes/{name}``, filled from ``path_params``) as the
    generated API method does with ``_preload_content=False``: the answer is the unread ``urllib3`` response
    (``_preload_content`` is accepted for :meth:`~.client.KubeClient._call`, which always passes False).
    Raises ``ApiException`` for an answer outside 2xx."""
    if _preload_content:
        raise ValueError("rest.call returns the raw response: _preload_content must be False")
    headers = {"Accept": ACCEPT}
    if content_type:
        headers["Content-Type"] = content_type
    query = list(query)
    if not hasattr(api_client, "param_serialize"):    # kubernetes < 37: the python-legacy ApiClient
        return api_client.call_api(path, method, dict(path_params or {}), query, headers, body=body, post_params=[],
                                   files={}, response_type=None, auth_settings=AUTH, async_req=None,
                                   _return_http_data_only=True, _preload_content=False,
                                   _request_timeout=_request_timeout, collection_formats={})
    request = api_client.param_serialize(method=method, resource_path=path, path_params=dict(path_params or {}),
                                         query_params=query, header_params=headers, body=body, post_params=[],
                                         files={}, auth_settings=AUTH, collection_formats={})
    response = api_client.call_api(*request, _request_timeout=_request_timeout)
    if not 200 <= response.status <= 299:
        from kubernetes.client.exceptions import ApiException

        response.read()
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return response.response
