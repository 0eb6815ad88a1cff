"""A mypy plugin: ``.get("key")`` on a typed view of the facts (gpudoctor/facts_types.py) with a key the view
does not name is an error, as ``facts["key"]`` already is.

mypy itself types such a ``get`` as ``object`` and says nothing, so a mistyped fact name would still read
as None at run time. pyproject.toml's [tool.mypy] loads this file; the typing is then mypy's own."""

from __future__ import annotations

from typing import Callable, Optional

from mypy import errorcodes
from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.typeops import try_getting_str_literals
from mypy.types import Type, TypedDictType, get_proper_type

VIEWS = "gpudoctor.facts_types."


class FactKeys(Plugin):
    def get_method_hook(self, fullname: str) -> Optional[Callable[[MethodContext], Type]]:
        return _checked_get if fullname == "typing.Mapping.get" else None


def _checked_get(ctx: MethodContext) -> Type:
    view = get_proper_type(ctx.type)
    if isinstance(view, TypedDictType) and view.fallback.type.fullname.startswith(VIEWS) \
            and ctx.args and len(ctx.args[0]) == 1:
        for key in try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or ():
            if key not in view.items:
                ctx.api.fail(f'TypedDict "{view.fallback.type.name}" has no key "{key}"', ctx.context,
                             code=errorcodes.TYPEDDICT_ITEM)
    return typed_dict_get_callback(ctx)  # mypy's own typing of the value


def plugin(version: str) -> type[Plugin]:
    return FactKeys
