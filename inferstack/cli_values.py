"""The command line's option values: each `type=` of an argparse option, which refuses a wrong value with a message
that says what it takes (argparse prints it with the option's name)."""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TypeVar

from inferstack.spec import REGION_PATTERN, enum_aliases, normalise_enum_text

EnumType = TypeVar("EnumType", bound=Enum)


def plot_path(text: str) -> Path:
    """`--plot`: an .svg or .png file in a folder that exists."""
    path = Path(text)
    if path.suffix.lower() not in (".svg", ".png"):
        raise argparse.ArgumentTypeError(f"must be a file name ending in .svg or .png, got {text!r}")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {str(path.parent)!r} does not exist (got {text!r})")
    return path


def region(text: str) -> str:
    """`--region`: a region name, checked like placement.regions before it names anything."""
    if not re.fullmatch(REGION_PATTERN, text):
        raise argparse.ArgumentTypeError(f"must be a region name such as us-east-1 or us-central1, got {text!r}")
    return text


def concurrency(text: str) -> int | str:
    if text == "max":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'max', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


DURATION_PATTERN = re.compile(r"([1-9][0-9]{0,5})([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> datetime.timedelta:
    """`--since`: how far back, as a number and a unit (90s, 30m, 1h, 7d)."""
    match = DURATION_PATTERN.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a number and a unit, s, m, h or d (30m, 1h, 7d), got {text!r}")
    return datetime.timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value:g}")
    return value


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1] such as 0.9, got {value:g}")
    return value


def enum_option(enum: type[EnumType]) -> Callable[[str], EnumType]:
    """An option that takes an enum's values and the aliases workload files accept (bfloat16, int4, Q4_K_M)."""

    def parse(text: str) -> EnumType:
        try:
            return enum(normalise_enum_text(text))
        except ValueError:
            aliases = enum_aliases(enum)
            also = f" (or {', '.join(aliases)})" if aliases else ""
            raise argparse.ArgumentTypeError(
                f"must be one of {', '.join(str(m.value) for m in enum)}{also}, got {text!r}"
            ) from None

    return parse


def config_entry(text: str) -> tuple[str, str]:
    """`--config KEY=VALUE`: a full stack-config key (namespace:name) and its value (JSON for lists and maps)."""
    key, equals, value = text.partition("=")
    if not equals or ":" not in key.strip(":"):
        raise argparse.ArgumentTypeError(f"expected NAMESPACE:KEY=VALUE, e.g. gcp:project=my-project (got {text!r})")
    return key, value
