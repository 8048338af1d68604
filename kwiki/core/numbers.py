"""How kwiki writes numbers, spreads and parameter sets: one definition for pages, site, charts and terminal."""

from __future__ import annotations

import math
from collections.abc import Mapping

NONE = "—"  # a figure that was not measured


def fmt(value: float | None, digits: int = 4, *, trim: bool = False) -> str:
    """A number with `digits` significant digits, no exponent for everyday magnitudes; `trim` drops
    trailing zeros (axis labels), otherwise they stay (they say how many digits are significant)."""
    if value is None or not math.isfinite(value):
        return NONE
    if value == 0:
        return "0"
    mag = math.floor(math.log10(abs(value)))
    if -4 <= mag < 9:
        text = f"{value:.{max(0, digits - 1 - mag)}f}"
        return text.rstrip("0").rstrip(".") if trim and "." in text else text
    text = f"{value:.{digits - 1}e}"
    if trim:
        mantissa, exponent = text.split("e")
        text = (mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa) + "e" + exponent
    return text


def fmt_spread(spread: float | None) -> str:
    """' ±1.2%' for a relative spread; nothing when no spread is known."""
    return "" if spread is None else f" ±{spread * 100:.1f}%"


def params_text(params: Mapping[str, object]) -> str:
    """'K=4096, M=4096': a record's parameters, sorted by name."""
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def round_sig(x: float | None, digits: int = 5) -> float | None:
    """`x` kept to `digits` significant digits, as figures are stored (None stays None)."""
    return None if x is None else float(f"{x:.{digits}g}")
