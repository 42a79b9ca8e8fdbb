"""Griffe extension for the API reference: turns the reStructuredText parts of the library's
docstrings (written for Sphinx, as numpyro's are) into the Markdown that mkdocstrings
renders, before griffe's ``sphinx`` parser reads their ``:param:`` fields.

- Roles (``:class:``, ``:meth:``, ``:func:``, ``:attr:``, ``:data:``, ``:mod:``) become
  cross-references when they name an object of the documented public API, code otherwise.
  ``~`` shortens the title to the last component; ``title <target>`` is honoured.
- ``.. doctest::`` blocks become fenced ``pycon`` code and ``.. note::`` an admonition.
- Text after the field list (the ``**Example**``) is moved before it: griffe's sphinx parser
  would append it to the last ``:param:``.

Loaded by ``mkdocs.yml`` (``plugins.mkdocstrings.handlers.python.options.extensions``); it
changes what the site shows, never the library.
"""

import re
import textwrap

import griffe

PACKAGE = "numpyro_discrete"
ROLE = re.compile(r":(?:py:)?(class|meth|func|attr|data|mod|obj|exc):`([^`]+)`")
FIELD = re.compile(r"^:(param|parameter|arg|type|returns?|rtype|raises?|var|ivar|cvar)\b")
DIRECTIVE = re.compile(r"^(\s*)\.\. (doctest|note|warning|code-block|code)::\s*(.*)$")


class RstDocstrings(griffe.Extension):
    def on_package(self, *, pkg, **kwargs):
        if pkg.name != PACKAGE:
            return
        public = set(_public_names(pkg))
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = convert(obj.docstring.value, obj, pkg, public)


def _public_names(pkg):
    all_attr = pkg.members.get("__all__")
    if all_attr is None or all_attr.value is None:
        return []
    return [str(e).strip("'\"") for e in getattr(all_attr.value, "elements", [])]


def _walk(obj):
    yield obj
    for member in obj.members.values():
        if member.is_alias:
            continue
        yield from _walk(member)


def convert(text, obj, pkg, public):
    text = _move_trailing_text(text)
    text = _convert_directives(text)
    return ROLE.sub(lambda m: _role(m.group(2), obj, pkg, public), text)


def _move_trailing_text(text):
    """Text after the ``:param:`` field list, moved in front of it."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if FIELD.match(line)), None)
    if start is None:
        return text
    end = start
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if FIELD.match(line) or not line.strip() or line[0].isspace():
            continue
        end = i
        break
    else:
        return text
    # drop the blank lines that closed the field list
    fields = lines[start:end]
    while fields and not fields[-1].strip():
        fields.pop()
    body = lines[:start]
    while body and not body[-1].strip():
        body.pop()
    return "\n".join([*body, "", *lines[end:], "", *fields])


def _convert_directives(text):
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent, name, argument = match.groups()
        i += 1
        block = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > len(indent)):
            block.append(lines[i])
            i += 1
        trailing = []
        while block and not block[-1].strip():
            trailing.append(block.pop())
        body = textwrap.dedent("\n".join(block)).strip("\n")
        if name in ("note", "warning"):
            content = "\n".join(filter(None, [argument.strip(), body]))
            out.append(f"{indent}!!! {name}")
            out.extend(f"{indent}    {line}" if line else "" for line in content.splitlines())
        else:
            language = "pycon" if name == "doctest" else (argument.strip() or "python")
            out.append(f"{indent}```{language}")
            out.extend(f"{indent}{line}" if line else "" for line in body.splitlines())
            out.append(f"{indent}```")
        out.extend(trailing)
    return "\n".join(out)


def _indent(line):
    return len(line) - len(line.lstrip())


def _role(content, obj, pkg, public):
    title, target = content, content
    explicit = re.fullmatch(r"(.*?)\s*<([^>]+)>", content)
    if explicit:
        title, target = explicit.groups()
    target = target.lstrip("~.")
    if not explicit:
        title = target.rsplit(".", 1)[-1] if content.startswith("~") else target
    identifier = _resolve(target, obj, pkg, public)
    if identifier is None:
        return f"`{title}`"
    return f"[`{title}`][{identifier}]"


def _resolve(target, obj, pkg, public):
    """The identifier under which the API reference renders `target`, or None."""
    parts = target.split(".")
    if parts[0] == PACKAGE:
        parts = parts[1:]
        # a canonical path (numpyro_discrete.kernels.lbp.LBP): keep from the public name on
        for i, part in enumerate(parts):
            if part in public:
                parts = parts[i:]
                break
    if parts and parts[0] in public:
        candidate = parts
    else:
        # a member of the enclosing class (``:meth:`binary``` inside SiteSupport)
        cls = obj if obj.is_class else obj.parent
        if cls is None or not cls.is_class or cls.name not in public:
            return None
        candidate = [cls.name, *parts]
    try:
        found = pkg[".".join(candidate)]
    except (KeyError, ValueError):
        return None
    if len(candidate) > 1 and (found.docstring is None or candidate[-1].startswith("_")):
        return None  # members without a docstring are not rendered
    return ".".join([PACKAGE, *candidate])
