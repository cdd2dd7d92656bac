"""Input files and documents: read bounded, parsed bounded, errors that name the field without quoting the input.

Every file inferstack reads from a user (workload, stack, price override, plan, calibration, a model's config.json)
comes through `read_input_file` and `parse_document`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from inferstack.errors import InputError, input_error

# A workload is a few KB; these bound what a hostile file can cost to read.
MAX_INPUT_BYTES = 1_048_576
MAX_DOCUMENT_VALUES = 10_000  # scalars and collections after YAML aliases are expanded
MAX_DOCUMENT_DEPTH = 32


def read_input_file(path: Path, *, field: str, what: str, example: str) -> str:
    """The text of a small UTF-8 input file, or an InputError that says why not, naming `field`.

    `what` says what the file should be ("a workload file") and `example` a path to one, for the fixes.
    """

    def problem(message: str, fix: str = f"pass the path of {what}, e.g. {example}") -> InputError:
        return input_error(field, message, value=str(path), fix=fix)

    try:
        if path.is_dir():
            raise problem("is a directory, not a file")
        if path.exists() and not path.is_file():
            raise problem("is not a regular file")
        with path.open("rb") as file:
            content = file.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise problem("file not found") from None
    except PermissionError:
        raise problem("cannot be read: permission denied", "make the file readable by this user") from None
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        raise problem(f"cannot be read ({error})") from None
    if len(content) > MAX_INPUT_BYTES:
        raise problem(f"is larger than {MAX_INPUT_BYTES // 1024} KiB", f"check that this is {what}: those are a few KB")
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise problem(
            f"is not UTF-8 text (byte 0x{content[error.start]:02x} at offset {error.start})",
            "save the file as UTF-8",
        ) from None


# PyYAML's pure-Python reader compiles, as it is imported, a character class over all of Unicode to find characters
# it refuses (yaml/pyyaml#124 and #301): 47 M instructions, 5 % of a `plan --json`, for a pattern the C loader used
# here never reads. `import_yaml` has that one pattern compiled when the pure-Python reader first uses it.
_YAML_NON_PRINTABLE = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"


class _PatternOnFirstUse:
    """Stands in for re.compile(pattern) and compiles it when one of its methods is first asked for."""

    def __init__(self, pattern: str) -> None:
        self._pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # its own (not yet set while copy or pickle rebuilds it) and special names
            raise AttributeError(name)
        if self._compiled is None:
            # re.UNICODE, the default for text patterns, only so that re's cache (where this object stands) is missed
            self._compiled = re.compile(self._pattern, re.UNICODE)
        return getattr(self._compiled, name)


def import_yaml() -> ModuleType:
    """The yaml module, imported without compiling its reader's unprintable-character pattern at once.

    re.compile answers from its caches first (`re._cache`, and `re._cache2` from 3.12; checked on CPython 3.10 to
    3.13), so the pattern yaml.reader compiles is put there as a `_PatternOnFirstUse` while yaml is imported, then
    taken out. Where re has no such cache, yaml is imported as usual."""
    if "yaml" in sys.modules:
        return sys.modules["yaml"]
    key = (str, _YAML_NON_PRINTABLE, 0)
    caches = [cache for name in ("_cache", "_cache2") if isinstance(cache := getattr(re, name, None), dict)]
    if caches:
        caches[0][key] = _PatternOnFirstUse(_YAML_NON_PRINTABLE)
    try:
        import yaml
    finally:
        for cache in caches:
            if isinstance(cache.get(key), _PatternOnFirstUse):
                del cache[key]
    return yaml


def parse_document(text: str, *, suffix: str, source: str, field: str = "WORKLOAD") -> Any:
    """YAML or JSON text (chosen by the file suffix) as plain data, or an InputError naming `field` and `source`.

    Bounded: at most MAX_INPUT_BYTES of text, MAX_DOCUMENT_VALUES values once YAML aliases are expanded (a
    500-byte "billion laughs" document would otherwise expand to billions), MAX_DOCUMENT_DEPTH levels.
    """
    yaml = import_yaml()  # imported here: YAML is only needed for files

    def problem(message: str, fix: str) -> InputError:
        return input_error(field, message, value=source, fix=fix)

    if len(text) > MAX_INPUT_BYTES:
        raise problem(f"is longer than {MAX_INPUT_BYTES} characters", "a workload is a few KB: check the input")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available
    try:
        data = json.loads(text) if suffix == ".json" else yaml.load(text, Loader=loader)
    except RecursionError:
        raise problem(f"nests deeper than {MAX_DOCUMENT_DEPTH} levels", "flatten the document") from None
    except (ValueError, yaml.YAMLError) as error:
        raise problem(f"cannot be parsed: {_parse_error_text(error)}", "check the file's JSON/YAML syntax") from None
    _check_document_size(data, problem)
    return data


def _parse_error_text(error: Exception) -> str:
    """What the parser found wrong and where: `expected ',' or ']' (line 2, column 1)`, without the input."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if problem and mark is not None:  # a YAML error
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def _check_document_size(data: Any, problem: Any) -> None:
    """Refuse documents with too many values (aliases counted at each use), too deep, or containing themselves.

    Walks the data without recursion, each distinct list or mapping once: a YAML alias makes several places
    share one object, so sizes are memoised by identity and summed at each use.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    started: set[int] = set()
    pending: list[tuple[Any, bool]] = [(data, False)]
    while pending:
        value, children_done = pending.pop()
        if not isinstance(value, dict | list):
            continue
        key = id(value)
        children = [c for c in (value.values() if isinstance(value, dict) else value) if isinstance(c, dict | list)]
        if children_done:
            size[key] = 1 + len(value) + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_DOCUMENT_VALUES:
                raise problem(
                    f"expands to more than {MAX_DOCUMENT_VALUES} values (YAML aliases count at each use)",
                    "write the values out without anchors and aliases; a workload needs a few dozen",
                )
            if depth[key] > MAX_DOCUMENT_DEPTH:
                raise problem(f"nests deeper than {MAX_DOCUMENT_DEPTH} levels", "flatten the document")
            continue
        if key in size:
            continue
        if key in started:
            raise problem("contains itself (a YAML alias inside its own anchor)", "remove the recursive alias")
        started.add(key)
        pending.append((value, True))
        pending.extend((c, False) for c in children)
