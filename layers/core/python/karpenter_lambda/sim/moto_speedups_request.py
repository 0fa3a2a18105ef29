"""A faster moto for the embedded environment: the WSGI environ of each intercepted request written directly.

moto turns every request botocore sends (in-process, through its stubber) into a werkzeug ``Request`` with
``Request.from_values``: werkzeug's ``EnvironBuilder`` parses the URL and base URL again (IRI quoting, IDNA), copies
the headers into a ``Headers`` object, and builds the environ -- about a tenth of a mocked DynamoDB read.  For the
requests botocore makes (a lowercase ASCII host, a path of URL-safe characters with nothing percent-encoded, an
ASCII query string, header values that are strings, a body of bytes) every one of those steps is the identity, and
the environ is written here directly, key for key what ``EnvironBuilder.get_environ`` gives.  Anything else
(non-ASCII, ``%`` in the path, a form or multipart body to encode, other arguments) goes to werkzeug as before.
``tests/sim/test_speed_request.py`` holds the two equal on every request of a simulated run and on edge cases.
"""

from __future__ import annotations

import re
import sys
from io import BytesIO
from typing import Any

# what iri_to_uri and the PATH_INFO unquoting leave as they are (no '%': PATH_INFO would be unquoted)
_PATH = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,/:;=@]*\Z")
# urlsplit(...).hostname lowercases and .port reads an int (no leading zero, at most 65535); IDNA of ASCII is itself
_HOST = re.compile(r"[a-z0-9.\-]+(:[1-9][0-9]{0,3}|:[1-5][0-9]{4})?\Z")
_ARGS = frozenset(("method", "base_url", "path", "query_string", "data", "headers"))
_SCHEMES = {"https": 443, "http": 80}


def _environ(method: str, base_url: str, path: str, query_string: str, data: Any, headers: list) -> dict | None:
    """``EnvironBuilder(...).get_environ()`` for moto's arguments, or None when they are not the plain case."""
    scheme, sep, host = base_url.partition("://")
    port = _SCHEMES.get(scheme)
    if (not sep or port is None or not _HOST.match(host) or not isinstance(path, str) or not path.startswith("/")
            or not _PATH.match(path) or not isinstance(query_string, str) or not query_string.isascii()
            or "#" in query_string or not isinstance(method, str) or not isinstance(headers, list)):
        return None
    if isinstance(data, str):
        data = data.encode()
    if not isinstance(data, (bytes, bytearray)):
        return None
    content_type = None
    http: dict = {}
    for key, value in headers:
        if not isinstance(key, str) or not isinstance(value, str) or "\n" in value or "\r" in value:
            return None
        low = key.lower()
        if low == "content-type":
            if content_type is None:
                content_type = value
            continue
        if low == "content-length":
            continue
        name = f"HTTP_{key.upper().replace('-', '_')}"
        http[name] = f"{http[name]}, {value}" if name in http else value
    name, colon, number = host.partition(":")
    env = {"REQUEST_METHOD": method, "SCRIPT_NAME": "", "PATH_INFO": path, "QUERY_STRING": query_string,
           "REQUEST_URI": path, "RAW_URI": path, "SERVER_NAME": name,
           "SERVER_PORT": number if colon else str(port), "HTTP_HOST": host, "SERVER_PROTOCOL": "HTTP/1.1",
           "wsgi.version": (1, 0), "wsgi.url_scheme": scheme, "wsgi.input": None, "wsgi.errors": sys.stderr,
           "wsgi.multithread": False, "wsgi.multiprocess": False, "wsgi.run_once": False}
    if data:
        env["wsgi.input"] = BytesIO(bytes(data))
        length: int | None = len(data)
    else:
        mimetype = content_type.partition(";")[0].strip() if content_type else None
        if mimetype == "multipart/form-data":
            return None
        env["wsgi.input"] = BytesIO()
        length = 0 if mimetype == "application/x-www-form-urlencoded" else None
    if content_type is not None:
        env["CONTENT_TYPE"] = content_type
    if length is not None:
        env["CONTENT_LENGTH"] = str(length)
    env.update(http)
    return env


def install() -> bool:
    """Patch moto's ``Request.from_values`` (once)."""
    from moto.core.request import Request

    if _installed(Request):
        return True
    original = Request.from_values   # werkzeug's, inherited: bound to the class it is read from

    def from_values(cls: Any, *args: Any, **kwargs: Any) -> Any:
        env = _environ(**kwargs) if not args and set(kwargs) == _ARGS else None
        if env is None:
            return original.__func__(cls, *args, **kwargs)
        return cls(env)

    from_values.karpenter_lambda_fast = True
    Request.from_values = classmethod(from_values)
    return True


def _installed(request_class: Any) -> bool:
    own = vars(request_class).get("from_values")
    return own is not None and getattr(own.__func__, "karpenter_lambda_fast", False)


def uninstall() -> None:
    from moto.core.request import Request

    if _installed(Request):
        del Request.from_values   # werkzeug's, inherited, again
