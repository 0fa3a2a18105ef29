"""A faster botocore against the in-process moto: requests are not hashed and HMAC-signed, event-name aliases are
worked out once per process instead of once per client, and moto's random strings are drawn in one call.

* **Signing.** botocore signs every request with SigV4: a canonical request (the body hashed, the headers
  normalised), a string to sign (hashed again) and four chained HMACs, about a twentieth of a simulation's time.
  moto reads only the access key from the ``Authorization`` header (to pick the account) and never checks the
  signature. While moto's in-process mock is active (``mock_aws``: its botocore stubber answers the request before
  anything is sent), a request of plain SigV4 (:class:`botocore.auth.SigV4Auth` itself, not a subclass: S3's and
  presigned URLs, such as the EKS token's STS URL, are signed as before) gets the same headers a signed one gets --
  ``X-Amz-Date``, ``X-Amz-Security-Token``, ``Authorization`` with the credential scope and signed-header list --
  and a signature of zeros.  With the mock off (a real endpoint, ``moto_server`` over HTTP) every request is signed.
* **Event aliases.** Each botocore client copies its event emitter, and each copy renames every event it sees through
  the alias table again (``EventAliaser._alias_event_name``: a split and a list search per alias). The renaming is a
  function of the event name and the alias table only; here copies with the same table share one memo.
* **Random strings.** moto draws every response's 52-character request id (and many resource ids) a character at a
  time (``MotoRandom.get_random_string``: a ``choice`` per character, about a twentieth of a DynamoDB read); here
  ``choices`` draws them at once, from the same characters, as uniformly.

``tests/sim/test_speed_botocore.py`` holds them to botocore's and moto's own answers.
"""

from __future__ import annotations

import string
from typing import Any

from karpenter_lambda.sim import moto_patch

ZERO_SIGNATURE = "0" * 64
_LETTERS = string.ascii_letters
_LETTERS_DIGITS = string.ascii_letters + string.digits
_MEMOS: dict = {}   # alias table (as a sorted tuple) -> {event name: aliased name}, shared by the emitters using it


def install() -> bool:
    """Patch ``SigV4Auth.add_auth``, ``EventAliaser.__init__`` and ``MotoRandom.get_random_string`` (once)."""
    import botocore.auth as auth
    from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
    from botocore.exceptions import NoCredentialsError
    from botocore.hooks import EventAliaser
    from moto.core.models import botocore_stubber   # enabled while a mock_aws is active in this process
    from moto.moto_api._internal.moto_random import MotoRandom

    def make_add_auth(original: Any) -> Any:
        def add_auth(self: Any, request: Any) -> None:
            if type(self) is not SigV4Auth or not botocore_stubber.enabled:
                return original(self, request)
            if self.credentials is None:
                raise NoCredentialsError()
            request.context["timestamp"] = auth.get_current_datetime().strftime(SIGV4_TIMESTAMP)   # as botocore
            self._modify_request_before_signing(request)
            self._inject_signature_to_request(request, ZERO_SIGNATURE)
        return add_auth

    def make_init(original: Any) -> Any:
        def __init__(self: Any, event_emitter: Any, event_aliases: Any = None) -> None:
            original(self, event_emitter, event_aliases)
            key = tuple(sorted(self._event_aliases.items()))
            self._alias_name_cache = _MEMOS.setdefault(key, {})
        return __init__

    def make_random_string(original: Any) -> Any:
        def get_random_string(self: Any, length: int = 20, include_digits: bool = True,
                              lower_case: bool = False) -> str:
            pool = _LETTERS_DIGITS if include_digits else _LETTERS
            out = "".join(self.choices(pool, k=length))
            return out.lower() if lower_case else out
        return get_random_string

    moto_patch.replace(SigV4Auth, "add_auth", make_add_auth)
    moto_patch.replace(EventAliaser, "__init__", make_init)
    moto_patch.replace(MotoRandom, "get_random_string", make_random_string)
    return True


def uninstall() -> None:
    from botocore.auth import SigV4Auth
    from botocore.hooks import EventAliaser
    from moto.moto_api._internal.moto_random import MotoRandom

    moto_patch.restore(SigV4Auth, "add_auth")
    moto_patch.restore(EventAliaser, "__init__")
    moto_patch.restore(MotoRandom, "get_random_string")
