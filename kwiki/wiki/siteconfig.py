"""The repository's `mkdocs.yml`, read as data: only the fields kwiki's site needs, with a safe loader.

MkDocs reads its config with a loader that builds Python objects (`!!python/object`, `!!python/name`),
reads the environment (`!ENV`), and then runs what the config names: hooks, plugins, Markdown extensions
(`pymdownx.snippets` reads any file, `/proc/self/environ` included), theme overrides (templates with
inline script), analytics (a script fetched from another host). `kwiki build` never hands the
repository's file to MkDocs: `read_config` keeps only the fields below, refuses everything else with a
located message, and kwiki builds from a config it writes itself (kwiki.site.theme.config_overrides).

What the repository's mkdocs.yml may set:
- `site_name`, `site_description`, `site_author`, `copyright`, `site_url` (http or https): text;
- `use_directory_urls`: true or false; `docs_dir` only as `wiki`, `site_dir` and `strict` (kwiki sets them);
- `theme`: `name: material`, `font: false`, `language`, `features` (Material's feature names) and
  `palette` (colour schemes and their toggles);
- `markdown_extensions`: the ones in EXTENSIONS, with options that are plain values;
- `plugins`: `search` and `tags`, with options that are plain values;
- `validation` (MkDocs' link checks) and `not_in_nav`.
Anything else (hooks, other plugins or extensions, `theme.custom_dir`, `extra`, `extra_css`,
`extra_javascript`, `repo_url`, `nav`, ...), any tag beyond YAML's plain ones (`!ENV`, `!!python/...`) and
any anchor or alias is an error.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from kwiki.core.errors import Problem

BASE_CONFIG = "mkdocs.yml"
MAX_CONFIG_BYTES = 256 * 1024
TEXT_FIELDS = ("site_name", "site_description", "site_author", "copyright", "site_url", "not_in_nav")
BOOL_FIELDS = ("use_directory_urls", "strict")
FIELDS = frozenset({*TEXT_FIELDS, *BOOL_FIELDS, "docs_dir", "site_dir", "theme", "markdown_extensions", "plugins",
                    "validation"})
THEME_FIELDS = frozenset({"name", "font", "language", "features", "palette"})
PLUGINS = frozenset({"search", "tags"})
EXTENSIONS = frozenset({
    "abbr", "admonition", "attr_list", "def_list", "footnotes", "md_in_html", "sane_lists", "tables", "toc",
    "pymdownx.betterem", "pymdownx.caret", "pymdownx.details", "pymdownx.highlight", "pymdownx.inlinehilite",
    "pymdownx.keys", "pymdownx.mark", "pymdownx.smartsymbols", "pymdownx.superfences", "pymdownx.tabbed",
    "pymdownx.tasklist", "pymdownx.tilde",
})
_PLAIN = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq"))


class ConfigProblems(Exception):
    """The repository's mkdocs.yml asks for what kwiki's site does not allow (located problems)."""

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problems in {BASE_CONFIG}")
        self.problems = problems


def _walk(node: yaml.Node, path: str, seen: set[int], out: list[Problem], at: int | None = None) -> None:
    """Every tag that is not one of YAML's plain ones, and every anchor or alias (a node met twice; located
    at `at`, the line that names it, as the node's own is its anchor's)."""
    line = at if at is not None else node.start_mark.line + 1
    if id(node) in seen:
        out.append(Problem(BASE_CONFIG, line, path, "anchors and aliases are not allowed"))
        return
    seen.add(id(node))
    if node.tag not in _PLAIN:
        out.append(Problem(BASE_CONFIG, line, path, f"tag {node.tag!r} is not allowed (kwiki reads {BASE_CONFIG} "
                                                    "as plain data: no !ENV, no !!python)"))
        return
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            _walk(key, f"{path}.{name}" if path else name, seen, out)
            _walk(value, f"{path}.{name}" if path else name, seen, out, key.start_mark.line + 1)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, f"{path}[{i}]", seen, out)


def _lines(node: yaml.Node) -> dict[str, int]:
    """The line of each top-level key and of each item of a top-level list, by field path."""
    out: dict[str, int] = {}
    if not isinstance(node, yaml.MappingNode):
        return out
    for key, value in node.value:
        name = str(key.value)
        out[name] = key.start_mark.line + 1
        if isinstance(value, yaml.SequenceNode):
            for i, item in enumerate(value.value):
                out[f"{name}[{i}]"] = item.start_mark.line + 1
        elif isinstance(value, yaml.MappingNode):
            for k, _ in value.value:
                out[f"{name}.{k.value}"] = k.start_mark.line + 1
    return out


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _named(items: Any, field: str, allowed: frozenset[str], lines: dict[str, int], out: list[Problem]) -> None:
    """A list of names, each alone or as `{name: {option: plain value}}`, every name in `allowed`."""
    if not isinstance(items, list):
        out.append(Problem(BASE_CONFIG, lines.get(field, 0), field, "must be a list"))
        return
    for i, item in enumerate(items):
        where, line = f"{field}[{i}]", lines.get(f"{field}[{i}]", lines.get(field, 0))
        if isinstance(item, dict) and len(item) == 1:
            name, options = next(iter(item.items()))
        else:
            name, options = item, None
        if not isinstance(name, str) or name not in allowed:
            out.append(Problem(BASE_CONFIG, line, where, f"{name!r} is not allowed: kwiki's site runs only "
                                                         f"{', '.join(sorted(allowed))}"))
        elif options is not None and not (isinstance(options, dict) and all(
                _plain(v) or (isinstance(v, list) and all(map(_plain, v))) for v in options.values())):
            out.append(Problem(BASE_CONFIG, line, where, f"{name}: options must be plain values"))


def _theme(theme: Any, lines: dict[str, int], out: list[Problem]) -> None:
    line = lines.get("theme", 0)
    if isinstance(theme, str):
        theme = {"name": theme}
    if not isinstance(theme, dict):
        out.append(Problem(BASE_CONFIG, line, "theme", "must be a mapping"))
        return
    for key, value in theme.items():
        at = lines.get(f"theme.{key}", line)
        if key not in THEME_FIELDS:
            out.append(Problem(BASE_CONFIG, at, f"theme.{key}", f"not allowed (kwiki's site takes only "
                                                              f"{', '.join(sorted(THEME_FIELDS))} from the theme)"))
        elif key == "name" and value != "material":
            out.append(Problem(BASE_CONFIG, at, "theme.name", "kwiki's site is built with 'material'"))
        elif key == "font" and value is not False:
            out.append(Problem(BASE_CONFIG, at, "theme.font", "only 'false': a web font is fetched from another host"))
        elif key == "features" and not (isinstance(value, list) and all(isinstance(f, str) for f in value)):
            out.append(Problem(BASE_CONFIG, at, "theme.features", "must be a list of Material's feature names"))
        elif key == "language" and not isinstance(value, str):
            out.append(Problem(BASE_CONFIG, at, "theme.language", "must be text"))
        elif key == "palette" and not _palette(value):
            out.append(Problem(BASE_CONFIG, at, "theme.palette", "must be colour schemes: mappings of plain values "
                                                                 "(and a toggle of icon and name)"))


def _palette(value: Any) -> bool:
    schemes = value if isinstance(value, list) else [value]
    for scheme in schemes:
        if not isinstance(scheme, dict):
            return False
        for k, v in scheme.items():
            if not (_plain(v) or (k == "toggle" and isinstance(v, dict) and all(map(_plain, v.values())))):
                return False
    return True


def check_config(data: Any, lines: dict[str, int]) -> list[Problem]:
    """What the loaded config asks for that kwiki's site does not allow (see the module's docstring)."""
    if not isinstance(data, dict):
        return [Problem(BASE_CONFIG, 1, "", "not a mapping")]
    out: list[Problem] = []
    for key in data:
        if key not in FIELDS:
            out.append(Problem(BASE_CONFIG, lines.get(str(key), 0), str(key),
                               f"not allowed: kwiki's site reads only {', '.join(sorted(FIELDS))} from {BASE_CONFIG}"))
    for key in TEXT_FIELDS:
        if key in data and not isinstance(data[key], str):
            out.append(Problem(BASE_CONFIG, lines.get(key, 0), key, "must be text"))
    for key in BOOL_FIELDS:
        if key in data and not isinstance(data[key], bool):
            out.append(Problem(BASE_CONFIG, lines.get(key, 0), key, "must be true or false"))
    if isinstance(data.get("site_url"), str) and not data["site_url"].startswith(("https://", "http://")):
        out.append(Problem(BASE_CONFIG, lines.get("site_url", 0), "site_url", "must be an http(s) URL"))
    if "docs_dir" in data and data["docs_dir"] != "wiki":
        out.append(Problem(BASE_CONFIG, lines.get("docs_dir", 0), "docs_dir", "kwiki builds its site from 'wiki'"))
    if "theme" in data:
        _theme(data["theme"], lines, out)
    if "markdown_extensions" in data:
        _named(data["markdown_extensions"], "markdown_extensions", EXTENSIONS, lines, out)
    if "plugins" in data:
        _named(data["plugins"], "plugins", PLUGINS, lines, out)
    validation = data.get("validation")
    if validation is not None and not (isinstance(validation, dict) and all(
            isinstance(v, dict) and all(map(_plain, v.values())) for v in validation.values())):
        out.append(Problem(BASE_CONFIG, lines.get("validation", 0), "validation", "must be MkDocs' link checks: "
                                                                                  "mappings of plain values"))
    return out


def read_config(root: Path) -> dict[str, Any]:
    """The repository's mkdocs.yml as plain data (empty when there is none); ConfigProblems when it asks for
    anything kwiki's site does not allow, or cannot be read as plain YAML."""
    path = root / BASE_CONFIG
    if not os.path.lexists(path):
        return {}
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or path.is_symlink():
            raise ConfigProblems([Problem(BASE_CONFIG, 0, "", "not a regular file (a link, a FIFO, a device)")])
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigProblems([Problem(BASE_CONFIG, 0, "", f"cannot read it: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigProblems([Problem(BASE_CONFIG, 0, "", f"over {MAX_CONFIG_BYTES} bytes")])
    text = raw.decode("utf-8", errors="replace")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise ConfigProblems([Problem(BASE_CONFIG, line, "", f"not YAML: {getattr(exc, 'problem', exc)}")]) from None
    if node is None:
        return {}
    problems: list[Problem] = []
    _walk(node, "", set(), problems)
    if problems:
        raise ConfigProblems(problems)
    data = yaml.safe_load(text)
    problems = check_config(data, _lines(node))
    if problems:
        raise ConfigProblems(problems)
    assert isinstance(data, dict)
    return data


def config_problems(root: Path) -> list[Problem]:
    """`kwiki check`'s view of mkdocs.yml: what `read_config` refuses."""
    try:
        read_config(root)
    except ConfigProblems as exc:
        return exc.problems
    return []
