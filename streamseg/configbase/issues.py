"""pydantic's validation errors as ``ConfigIssue``s: the field as written, its line, a hint.

pydantic's error locations name things that are no keys of the file: the
member of a tagged union (``rules[4].zone.colour``, where ``zone`` is the
rule's ``type``; ``sinks[0].mqtt.qos``) and function validators. They are
taken out by walking the schema along the location, so that the path and
the line are the field's own (``rules[4].colour`` on the line of
``colour:``). The same walk finds the model of an unknown key, for a hint
with the keys it allows, and the members of a union whose ``type`` is
missing or unknown, for a hint with the known types.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from streamseg.configbase.errors import ConfigIssue, Loc
from streamseg.configbase.yaml_tree import line_of

__all__ = ["SECRET_FIELDS", "issue_from_pydantic"]

# Fields whose input is never echoed in an error message.
SECRET_FIELDS = frozenset({"password", "username", "url", "otlp_endpoint", "swap_token", "token"})

_UNIONS = (typing.Union, types.UnionType)


def issue_from_pydantic(err: ErrorDetails, tree: Any, schema: type[Any]) -> ConfigIssue:
    """One pydantic error of validating ``tree`` (a ruamel tree) as ``schema``."""
    raw: Loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
    kind = err["type"]
    if kind in ("union_tag_invalid", "union_tag_not_found") or kind.endswith("_type"):
        loc, ann = _resolve(schema, raw)
        members = _tagged(ann)
        if members is not None:  # a tagged union's type: unknown or missing
            return _type_issue(err, tree, loc, members)
    loc, _ = _resolve(schema, raw)
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        valid = _keys(_resolve(schema, raw[:-1])[1])
        close = difflib.get_close_matches(key, valid, n=1)
        keys = f"did you mean {close[0]!r}? " if close else ""
        keys += f"valid keys: {', '.join(valid)}" if valid else ""
        return ConfigIssue(
            f"unknown key {key!r}", loc=loc, line=line_of(tree, loc, key_line=True), hint=keys
        )
    if kind == "missing":
        return ConfigIssue(
            "required key is missing",
            loc=loc,
            line=line_of(tree, loc),
            hint=f"add `{loc[-1]}:`" if loc and isinstance(loc[-1], str) else None,
        )
    message = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    hint = None
    last = loc[-1] if loc else None
    if kind != "value_error" and last not in SECRET_FIELDS and _echoable(err.get("input")):
        hint = f"got {err['input']!r}"
    return ConfigIssue(message, loc=loc, line=line_of(tree, loc), hint=hint)


def _type_issue(err: ErrorDetails, tree: Any, loc: Loc, members: Mapping[str, Any]) -> ConfigIssue:
    """A ``type`` that names no member of the union (or is missing)."""
    known = ", ".join(members)
    given = err["input"].get("type") if isinstance(err.get("input"), Mapping) else None
    at = (*loc, "type")
    if given is None:
        return ConfigIssue(
            "type is required", loc=at, line=line_of(tree, at), hint=f"one of: {known}"
        )
    close = difflib.get_close_matches(str(given), list(members), n=1)
    hint = (f"did you mean {close[0]!r}? " if close else "") + f"known types: {known}"
    shown = repr(given) if _echoable(given) else "given"
    return ConfigIssue(f"unknown type {shown}", loc=at, line=line_of(tree, at), hint=hint)


def _resolve(schema: Any, loc: Loc) -> tuple[Loc, Any]:
    """``loc`` without the tags of tagged-union members, and the annotation it leads to
    (``None`` where the schema does not say)."""
    ann: Any = schema
    kept: list[str | int] = []
    for part in loc:
        members = _tagged(ann)
        if members is not None and isinstance(part, str) and part in members:
            ann = members[part]  # a tag: the member it picked, no key of the file
            continue
        kept.append(part)
        ann = _unwrap(ann)
        origin = typing.get_origin(ann)
        if _is_model(ann):
            field = ann.model_fields.get(part) if isinstance(part, str) else None
            ann = None if field is None else _field_annotation(field)
        elif origin in (list, tuple, Sequence) and isinstance(part, int):
            ann = typing.get_args(ann)[0] if typing.get_args(ann) else None
        elif origin in (dict, Mapping) and len(typing.get_args(ann)) == 2:
            ann = typing.get_args(ann)[1]
        else:
            ann = None
    return tuple(kept), ann


def _field_annotation(field: FieldInfo) -> Any:
    """A field's annotation with its discriminator, which pydantic keeps aside."""
    if field.discriminator is None:
        return field.annotation
    return typing.Annotated[field.annotation, pydantic.Field(discriminator=field.discriminator)]


def _unwrap(ann: Any) -> Any:
    """``X`` out of ``Annotated[X, ...]`` and ``X | None`` (a tagged union stays)."""
    while True:
        if typing.get_origin(ann) is typing.Annotated and _tagged(ann) is None:
            ann = typing.get_args(ann)[0]
            continue
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) in _UNIONS and len(args) == 1:
            ann = args[0]
            continue
        return ann


def _tagged(ann: Any) -> dict[str, Any] | None:
    """The members of a tagged (discriminated) union by tag; ``None`` if ``ann`` is not one."""
    if typing.get_origin(ann) is not typing.Annotated:
        return None
    inner, *meta = typing.get_args(ann)
    if typing.get_origin(inner) not in _UNIONS:
        return None
    field = next(
        (m.discriminator for m in meta if isinstance(m, FieldInfo) and m.discriminator), None
    )
    if field is None and not any(isinstance(m, pydantic.Discriminator) for m in meta):
        return None
    members: dict[str, Any] = {}
    for arg in typing.get_args(inner):
        model, tags = arg, []
        if typing.get_origin(arg) is typing.Annotated:
            model, *arg_meta = typing.get_args(arg)
            tags = [m.tag for m in arg_meta if isinstance(m, pydantic.Tag)]
        if not tags and isinstance(field, str) and _is_model(model) and field in model.model_fields:
            tags = [str(t) for t in typing.get_args(model.model_fields[field].annotation)]
        members.update(dict.fromkeys(tags, model))
    return members or None


def _keys(ann: Any) -> list[str]:
    """The field names of the model ``ann`` is (empty if it is none)."""
    ann = _unwrap(ann)
    return sorted(ann.model_fields) if _is_model(ann) else []


def _echoable(value: Any) -> bool:
    return isinstance(value, int | float | bool | str) and len(str(value)) <= 80


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, pydantic.BaseModel)
