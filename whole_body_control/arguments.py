"""Command-line numbers checked where they are parsed: a value outside its range is an
``argparse`` error naming the flag and the allowed range (exit code 2, no traceback),
before anything is loaded."""

from __future__ import annotations

import argparse
import math


def number(
    kind: type = float,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    unit: str = "",
):
    """An ``argparse`` ``type=`` that parses a finite ``kind`` (float or int) within the bounds.

    Args:
        gt / ge / le: bounds (strictly greater, greater or equal, less or equal).
        unit: printed after the range, for example ``"[s]"``.
    """
    parts = []
    if gt is not None:
        parts.append(f"> {gt:g}")
    if ge is not None:
        parts.append(f">= {ge:g}")
    if le is not None:
        parts.append(f"<= {le:g}")
    allowed = "an integer" if kind is int else "a finite number"
    if parts:
        allowed += " " + " and ".join(parts)
    if unit:
        allowed += f" {unit}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None
        ok = math.isfinite(value)
        ok = ok and (gt is None or value > gt) and (ge is None or value >= ge) and (le is None or value <= le)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse
