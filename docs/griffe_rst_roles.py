"""A griffe extension for the docs build: the package's docstrings name other objects with
Sphinx roles (:func:`read_records`, :class:`~tfrec_fast.DataLossError`), which Markdown would
show as they are typed. Each becomes inline code of the name (``~`` keeps the last part, as in
Sphinx). mkdocs.yml loads it; it is not part of the package.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:func|meth|class|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _code(match: re.Match) -> str:
    short, name = match.group(1), match.group(2)
    return f"``{name.rsplit('.', 1)[-1] if short else name}``"


class RstRoles(griffe.Extension):
    """Rewrites the roles of every docstring griffe loads."""

    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_code, obj.docstring.value)
