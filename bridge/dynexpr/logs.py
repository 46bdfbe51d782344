"""dynexpr.logs — readable logs chosen by DYNEXPR_LOGS.

    DYNEXPR_LOGS=graph_breaks,guards,recompiles,output_code,cache python app.py

Each topic is the logger "dynexpr.<topic>" of the standard logging module; a topic
named in DYNEXPR_LOGS gets a stderr handler at INFO. Other layers log through
`get(topic)` and check `enabled(topic)` before building an expensive message.
"""

from __future__ import annotations

import logging
import os
import sys

TOPICS = ("graph_breaks", "guards", "recompiles", "dynamic", "output_code", "cache")

_root = logging.getLogger("dynexpr")


def get(topic: str) -> logging.Logger:
    if topic not in TOPICS:
        raise ValueError(f"dynexpr: unknown log topic {topic!r}; topics: {', '.join(TOPICS)}")
    return _root.getChild(topic)


def enabled(topic: str) -> bool:
    return get(topic).isEnabledFor(logging.INFO)


def configure(spec: str | None = None) -> list[str]:
    """Turn on the topics named in `spec` (default: $DYNEXPR_LOGS); returns them."""
    spec = os.environ.get("DYNEXPR_LOGS", "") if spec is None else spec
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if "all" in names:
        names = list(TOPICS)
    unknown = [n for n in names if n not in TOPICS]
    if unknown:
        # A typo in an env variable must not break the program; say so once instead.
        print(
            f"dynexpr: DYNEXPR_LOGS names unknown topics {unknown}; topics: "
            f"{', '.join(TOPICS)} (or all)",
            file=sys.stderr,
        )
    for topic in TOPICS:
        log = get(topic)
        for h in [h for h in log.handlers if getattr(h, "_dynexpr", False)]:
            log.removeHandler(h)
        if topic in names:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(f"[dynexpr {topic}] %(message)s"))
            handler._dynexpr = True  # type: ignore[attr-defined]
            log.addHandler(handler)
            log.setLevel(logging.INFO)
        else:
            log.setLevel(logging.NOTSET)
    return [n for n in names if n in TOPICS]


configure()
