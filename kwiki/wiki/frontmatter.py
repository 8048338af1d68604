"""Split a page into YAML front matter and Markdown body, with a line for every field.

Whatever the bytes, `parse_page` returns a `FrontMatter` or raises `FrontMatterError`
with the line it concerns; it never raises anything else. YAML aliases are refused
(they are never needed in front matter and make alias bombs impossible), so are merge
keys, duplicate keys, lists or mappings as keys, more than one document, non-finite
numbers and tags other than the standard ones. Keys are read as the text written
(``1: x`` has the key ``'1'``). YAML's own line numbers count NEL, LS and PS as line
breaks; the lines reported here are the page's, counted by '\n' only.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from kwiki.core.errors import FrontMatterError

try:  # libyaml's parser is several times faster; fall back to the pure-Python one
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]  # a sibling class, not a subclass

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
            # each YAML line keeps its newline: a block scalar ending the front matter keeps its last one
            return "".join(line + "\n" for line in lines[1:i]), i + 1, body, i + 2
    raise FrontMatterError("unterminated front matter: no closing '---' line", line=1)


def parse_yaml(source: str, first_line: int = 1) -> tuple[Any, dict[Path_, int]]:
    """Read YAML `source` (whose first line is page line `first_line`) into plain data.

    Works on the parser's events with an explicit stack, so no nesting depth or alias
    can make it recurse deeply or grow without bound.
    """
    to_line = _line_map(source, first_line)
    loader = _Loader(source)
    try:
        return _Builder(to_line).run(loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = to_line(mark.line) if mark else first_line
        raise FrontMatterError(f"invalid YAML: {exc.problem or exc.context}", line=line) from None
    except yaml.reader.ReaderError as exc:
        line = _reader_line(source, exc.position, to_line)
        raise FrontMatterError(f"invalid YAML: {exc.reason}", line=line) from None
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"invalid YAML: {exc}", line=first_line) from None
    except UnicodeEncodeError as exc:
        line = to_line(source[: exc.start].count("\n"))
        raise FrontMatterError("invalid text: a lone surrogate character", line=line) from None
    except MemoryError:
        raise FrontMatterError("invalid YAML: too large to read", line=first_line) from None
    finally:
        loader.dispose()


_BREAKS = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
_YAML_ONLY_BREAKS = ("\x85", "\u2028", "\u2029")


def _line_map(source: str, first_line: int) -> Callable[[int], int]:
    """Page line of a 0-based YAML line: YAML also breaks lines at NEL, LS and PS."""
    if not any(ch in source for ch in _YAML_ONLY_BREAKS):
        return lambda line: first_line + line
    table = [first_line]
    page_line = first_line
    for m in _BREAKS.finditer(source):
        if m.group() not in _YAML_ONLY_BREAKS:
            page_line += 1
        table.append(page_line)
    return lambda line: table[min(max(line, 0), len(table) - 1)]


def _reader_line(source: str, position: int, to_line: Callable[[int], int]) -> int:
    """Line of a reader error; libyaml counts its position in UTF-8 bytes, PyYAML in characters."""
    if _Loader.__name__.startswith("C"):
        before = source.encode("utf-8", "replace")[:position].decode("utf-8", "replace")
    else:
        before = source[:position]
    return to_line(len(_BREAKS.findall(before)))


_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_RESOLVER = yaml.resolver.Resolver()
_PLAIN_VALUES: dict[str, Any] = {}  # value of a plain scalar that reads without error, by its text
_MISS = object()
_STR = "tag:yaml.org,2002:str"
_COLLECTION_TAGS = {yaml.MappingStartEvent: "tag:yaml.org,2002:map", yaml.SequenceStartEvent: "tag:yaml.org,2002:seq"}
_NO_KEY = object()


class _Frame:
    """An open mapping or sequence: its data, its path, and (mappings) the key awaiting a value."""

    __slots__ = ("data", "key", "path")

    def __init__(self, data: dict[Any, Any] | list[Any], path: Path_):
        self.data = data
        self.path = path
        self.key: Any = _NO_KEY


class _Builder:
    def __init__(self, to_line: Callable[[int], int]):
        self.to_line = to_line
        self.lines: dict[Path_, int] = {}

    def fail(self, event: yaml.Event, message: str, path: Path_ = ()) -> FrontMatterError:
        # the parser gives every event its marks; the stubs allow None for events built by hand
        line = self.to_line(event.start_mark.line)  # type: ignore[union-attr]
        return FrontMatterError(message, line=line, field=field_name(path))

    def run(self, loader: Any) -> tuple[Any, dict[Path_, int]]:  # noqa: C901  (one event loop, inlined for speed)
        # the hot path (keys, plain scalars, collections) is inlined: it runs once per event
        scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
        mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
        mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
        plain_values, miss = _PLAIN_VALUES, _MISS
        lines, to_line = self.lines, self.to_line
        stack: list[_Frame] = []
        top: _Frame | None = None  # stack[-1]
        root: Any = None
        documents = 0
        get = loader.get_event
        while True:
            event = get()
            kind = type(event)
            if kind is scalar_event:
                if top is not None and type(top.data) is dict and top.key is _NO_KEY:
                    key = event.value
                    if event.tag is not None or (key == "<<" and event.implicit[0]):
                        self.check_key(top, event)
                    if key in top.data:
                        path = (*top.path, key)
                        first = lines.get(path, 0)
                        raise self.fail(event, f"duplicate key '{key}' (first defined on line {first})", path)
                    lines[(*top.path, key)] = to_line(event.start_mark.line)
                    top.key = key
                    continue
                if event.tag is not None:
                    value = miss
                elif event.implicit[0]:
                    value = plain_values.get(event.value, miss)
                else:
                    value = event.value  # quoted, literal or folded: a string
                if value is miss:
                    value = self.scalar(event, self.child(top, event))
                elif top is not None and type(top.data) is list:
                    lines[(*top.path, len(top.data))] = to_line(event.start_mark.line)
            elif kind is mapping_start or kind is sequence_start:
                if top is not None and top.key is _NO_KEY and type(top.data) is dict:
                    raise self.fail(event, "a key must be a plain string, not a list or mapping", top.path)
                path = self.child(top, event)
                if event.tag is not None and event.tag not in ("!", _COLLECTION_TAGS[kind]):
                    raise self.fail(event, f"unsupported YAML tag {event.tag!r}", path)
                if len(stack) >= MAX_DEPTH:
                    raise self.fail(event, f"nested more than {MAX_DEPTH} levels deep", path)
                top = _Frame({} if kind is mapping_start else [], path)
                stack.append(top)
                continue
            elif kind is mapping_end or kind is sequence_end:
                value = stack.pop().data
                top = stack[-1] if stack else None
            elif kind is alias_event:
                if top is not None and top.key is _NO_KEY and type(top.data) is dict:  # the alias is a key
                    path = top.path
                else:
                    path = self.child(top, event)
                raise self.fail(event, "YAML aliases (*name) are not allowed in front matter", path)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise self.fail(event, "more than one YAML document ('--- ...' line) in front matter")
                continue
            elif kind is yaml.StreamEndEvent or event is None:
                return root, lines
            else:  # stream start, document end
                continue
            if top is None:
                root = value
                lines.setdefault((), to_line(event.start_mark.line))
            elif type(top.data) is list:
                top.data.append(value)
            else:
                top.data[top.key] = value
                top.key = _NO_KEY

    def child(self, top: _Frame | None, event: yaml.Event) -> Path_:
        """Path of the value that `event` starts, recording its line."""
        if top is None:
            path: Path_ = ()
        elif type(top.data) is list:
            path = (*top.path, len(top.data))
        else:
            path = (*top.path, top.key)
        if path not in self.lines:
            self.lines[path] = self.to_line(event.start_mark.line)  # type: ignore[union-attr]  # as in `fail`
        return path

    def check_key(self, top: _Frame, event: yaml.ScalarEvent) -> None:
        """Refuse a merge key, or a key with a tag other than the standard ones."""
        if event.tag is None or event.tag == "!":
            if event.value == "<<" and event.implicit[0]:
                raise self.fail(event, "YAML merge keys (<<) are not allowed in front matter", top.path)
        elif event.tag not in _STANDARD_TAGS:
            raise self.fail(event, f"unsupported YAML tag {event.tag!r} on key {event.value!r}", top.path)

    def scalar(self, event: yaml.ScalarEvent, path: Path_) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            if not event.implicit[0]:  # quoted, literal or folded: a string
                return event.value
            # types-PyYAML leaves BaseResolver.resolve unannotated
            tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, (True, False))  # type: ignore[no-untyped-call]
        if tag == _STR:
            if event.tag is None and len(_PLAIN_VALUES) < 65536:
                _PLAIN_VALUES[event.value] = event.value
            return event.value
        if tag not in _STANDARD_TAGS:
            raise self.fail(event, f"unsupported YAML tag {tag!r}", path)
        # the stubs type an event's marks as the Python or the C parser's Mark, a node's as the Python one only
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark)  # type: ignore[arg-type]
        try:
            value = _SCALARS[tag](_CONSTRUCTOR, node)
        except (ValueError, TypeError, OverflowError, IndexError, KeyError, AttributeError, yaml.YAMLError):
            # PyYAML's constructors trust the resolver; an explicit tag can hand them anything ('!!int ')
            raise self.fail(event, f"cannot read {event.value!r} as {tag.rsplit(':', 1)[-1]}", path) from None
        if isinstance(value, (_dt.date, _dt.datetime)):
            value = value.isoformat()
        elif isinstance(value, float) and not math.isfinite(value):
            raise self.fail(event, f"{event.value!r} is not a finite number", path)
        if event.tag is None and len(_PLAIN_VALUES) < 65536:
            _PLAIN_VALUES[event.value] = value  # immutable: str, int, float, bool, None
        return value


def field_name(path: Path_) -> str:
    """A data path as people write it: `claims[0].measure.artifact`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


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
