"""Split a page into YAML front matter and Markdown body, with a line for every field.

Whatever the bytes, `parse_page` returns a `FrontMatter` or raises `FrontMatterError`
with the line it concerns; it never raises anything else. YAML aliases are refused
(they are never needed in front matter and make alias bombs impossible), so are
duplicate keys, non-string keys and tags other than the standard scalar ones.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import FrontMatterError

try:  # libyaml's composer is several times faster; fall back to the pure-Python one
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

MAX_PAGE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
DELIMITER = "---"
Path_ = tuple[str | int, ...]

_SCALARS = yaml.constructor.SafeConstructor.yaml_constructors
_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:timestamp",
}


@dataclass
class FrontMatter:
    """A parsed page: its front-matter mapping, where each field sits, and the body."""

    data: dict[str, Any]
    lines: dict[Path_, int] = field(default_factory=dict)
    start_line: int = 1  # line of the opening '---'
    end_line: int = 1  # line of the closing '---'
    body: str = ""
    body_line: int = 1  # line on which the body starts
    text: str = ""  # the whole page, decoded, newlines normalised to '\n'
    newline: str = "\n"
    bom: bool = False

    def line_of(self, path: Path_) -> int:
        """Line of the deepest known prefix of `path`, else the opening delimiter."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.start_line


def decode(raw: bytes) -> tuple[str, str, bool]:
    """Bytes to text with '\n' newlines; returns (text, newline style, had BOM)."""
    if len(raw) > MAX_PAGE_BYTES:
        raise FrontMatterError(f"file is {len(raw)} bytes, over the {MAX_PAGE_BYTES} byte limit for a page", line=1)
    bom = raw.startswith(b"\xef\xbb\xbf")
    if bom:
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FrontMatterError(f"not UTF-8: byte 0x{raw[exc.start]:02x} cannot be decoded", line=line) from None
    newline = "\r\n" if "\r\n" in text else "\n"
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise FrontMatterError("NUL byte in page (is this a binary file?)", line=line)
    return text, newline, bom


def split(text: str) -> tuple[str, int, str, int]:
    """Return (yaml text, closing line number, body, body line) of a decoded page."""
    if not text.strip():
        raise FrontMatterError("empty page: a page starts with a '---' line opening its front matter", line=1)
    lines = text.split("\n")
    if lines[0].rstrip() != DELIMITER:
        raise FrontMatterError("no front matter: the first line must be '---'", line=1)
    for i in range(1, len(lines)):
        stripped = lines[i].rstrip()
        if stripped == DELIMITER or stripped == "...":
            body = "\n".join(lines[i + 1 :])
            return "\n".join(lines[1:i]), i + 1, body, i + 2
    raise FrontMatterError("unterminated front matter: no closing '---' line", line=1)


def parse_yaml(source: str, first_line: int = 1) -> tuple[Any, dict[Path_, int]]:
    """Compose YAML `source` (whose first line is page line `first_line`) into plain data."""
    offset = first_line - 1
    try:
        node = yaml.compose(source, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = offset + (mark.line + 1 if mark else 1)
        raise FrontMatterError(f"invalid YAML: {exc.problem or exc.context}", line=line) from None
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"invalid YAML: {exc}", line=first_line) from None
    except (RecursionError, MemoryError):
        raise FrontMatterError("invalid YAML: nested too deeply", line=first_line) from None
    lines: dict[Path_, int] = {}
    if node is None:
        return None, lines
    return _Builder(offset, lines).build(node, (), 0), lines


class _Builder:
    def __init__(self, offset: int, lines: dict[Path_, int]):
        self.offset = offset
        self.lines = lines
        self.seen: set[int] = set()
        self.constructor = yaml.constructor.SafeConstructor()

    def line(self, node: yaml.Node) -> int:
        return self.offset + node.start_mark.line + 1

    def fail(self, node: yaml.Node, message: str) -> FrontMatterError:
        return FrontMatterError(message, line=self.line(node))

    def build(self, node: yaml.Node, path: Path_, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nested more than {MAX_DEPTH} levels deep")
        if id(node) in self.seen:
            raise self.fail(node, "YAML aliases (*name) are not allowed in front matter")
        self.seen.add(id(node))
        self.lines.setdefault(path, self.line(node))
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        return self.scalar(node)

    def mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise self.fail(key_node, "YAML merge keys (<<) are not allowed in front matter")
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, "a key must be a plain string, not a list or mapping")
            key = key_node.value
            if key in out:
                first = self.lines.get(path + (key,), 0)
                raise self.fail(key_node, f"duplicate key '{key}' (first defined on line {first})")
            self.lines[path + (key,)] = self.line(key_node)
            out[key] = self.build(value_node, path + (key,), depth + 1)
        return out

    def scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag not in _STANDARD_TAGS:
            raise self.fail(node, f"unsupported YAML tag {node.tag!r}")
        try:
            value = _SCALARS[node.tag](self.constructor, node)
        except (ValueError, TypeError, OverflowError, yaml.YAMLError) as exc:
            raise self.fail(node, f"cannot read value {node.value!r}: {exc}") from None
        if isinstance(value, (_dt.date, _dt.datetime)):
            return value.isoformat()
        if isinstance(value, float) and value != value:
            raise self.fail(node, "NaN is not a valid value")
        return value


def parse_page(raw: bytes) -> FrontMatter:
    """Parse a whole page file's bytes."""
    text, newline, bom = decode(raw)
    source, end_line, body, body_line = split(text)
    data, lines = parse_yaml(source, first_line=2)
    if data is None:
        raise FrontMatterError("empty front matter: a page needs at least 'id', 'title' and 'type'", line=1)
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise FrontMatterError(f"front matter must be a mapping of fields, not {kind}", line=2)
    return FrontMatter(
        data=data,
        lines=lines,
        start_line=1,
        end_line=end_line,
        body=body,
        body_line=body_line,
        text=text,
        newline=newline,
        bom=bom,
    )
