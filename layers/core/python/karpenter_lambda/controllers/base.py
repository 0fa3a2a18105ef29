"""What every controller shares: a logger, a clock, and one structured log line per decision.

The five controllers (provision, lifecycle, disrupt, interrupt, offpeak) derive from :class:`Controller`; each
still builds itself from the Lambda environment with a ``from_environment(env, ...)`` classmethod (its own
collaborators), so the same object runs in Lambda, in the simulator and in tests.
"""

from __future__ import annotations

import json
import logging
from typing import Callable

from . import runtime

log = logging.getLogger("karpenter_lambda.controllers")


class Controller:
    #: added to every decision line (``{"sweep": "drift"}``); a subclass or instance may set it
    log_fields: dict = {}

    def __init__(self, clock: Callable[[], float] | None = None, logger=None):
        self.clock = clock or runtime.clock_proxy
        self.logger = logger or log

    def _decision(self, decision: str, message: str, **fields) -> None:
        """One structured line per decision: Powertools' Logger takes the fields as keys; a plain ``logging``
        Logger (reserved keys such as ``name`` would raise) gets them as JSON after the message."""
        extra = {"decision": decision, **self.log_fields, **fields}
        try:
            self.logger.info(message, extra=extra)
        except TypeError:
            self.logger.info("%s %s", message, json.dumps(extra, default=str))
        except KeyError:   # logging refuses to overwrite a LogRecord attribute ("name", "message", ...)
            self.logger.info("%s %s", message, json.dumps(extra, default=str))
