"""Types -> the OpenAPI 3.0 document's component schemas.

msgspec reads the types (TypedDicts whose fields are `Annotated[..., Meta(...)]`) into JSON
Schema 2020-12; this module says the same in OpenAPI 3.0, which the document speaks: a nullable
field is `nullable: true` (a reference wrapped in `allOf`, whose siblings 3.0 would ignore),
`examples` is `example`, a `Literal` enum has its type, and no schema repeats its component's
name as a title. Properties keep the order their type declares them in (msgspec sorts them), and
each answer carries its example (tests/unit/test_openapi_examples.py checks it against the
schema). A type named in `named` is left to the document's own declaration (the states, from their
tables)."""

import re
import typing
from collections.abc import Collection, Mapping
from typing import Any

import msgspec

REF = "#/components/schemas/{name}"
NULL = {"type": "null"}


def components(
    examples: Mapping[type, Mapping[str, Any]],
    *,
    closed: Collection[type] = (),
    named: Collection[str] = (),
) -> dict[str, dict[str, Any]]:
    """The component schemas of the types `examples` maps to their example, and of every type
    they use. `closed`: types whose unknown fields a client must not expect (additionalProperties
    false)."""
    _, found = msgspec.json.schema_components(list(examples), ref_template=REF)
    by_name = _types_by_name(examples)
    closed_names = {t.__name__ for t in closed}
    out: dict[str, dict[str, Any]] = {}
    for name, schema in found.items():
        if name in named:  # declared there, by its own table
            continue
        converted = openapi_3_0(schema)
        declared = by_name.get(name)
        if declared is not None:
            converted = _in_declared_order(converted, declared)
        if name in closed_names:
            converted["additionalProperties"] = False
        elif converted.get("properties") == {}:  # no field declared: any object
            del converted["properties"]
        if declared is not None and declared in examples:
            converted["example"] = examples[declared]
        elif "enum" in converted:  # an enum a type uses: its first value shows it
            converted["example"] = converted["enum"][0]
        out[name] = converted
    return out


def schema_of(tp: Any) -> dict[str, Any]:
    """One field type's schema (no component of its own), for documents not yet derived."""
    return openapi_3_0(msgspec.json.schema(tp, ref_template=REF))


def openapi_3_0(schema: dict[str, Any]) -> dict[str, Any]:
    """The 2020-12 schema `schema` (msgspec's) in OpenAPI 3.0's words."""
    out = {k: v for k, v in schema.items() if k != "title"}
    if "description" in out:  # a docstring's lines, as one paragraph
        out["description"] = re.sub(r"\s*\n\s*", " ", out["description"])
    if "examples" in out:
        out["example"] = out.pop("examples")[0]
    if "anyOf" in out and NULL in out["anyOf"]:
        kept = [openapi_3_0(s) for s in out.pop("anyOf") if s != NULL]
        if len(kept) == 1:
            return {**nullable(kept[0]), **out}
        return {"nullable": True, "anyOf": kept, **out}
    if "$ref" in out:  # a named type: its component says what it holds (3.0 ignores siblings)
        said = {k: v for k, v in out.items() if k == "description"}
        return {"allOf": [{"$ref": out["$ref"]}], **said} if said else {"$ref": out["$ref"]}
    if "enum" in out and "type" not in out and all(isinstance(v, str) for v in out["enum"]):
        out = {"type": "string", **out}
    return _inner(out)


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` or null (a reference wrapped: 3.0 ignores a $ref's siblings)."""
    if "$ref" in schema:
        return {"allOf": [schema], "nullable": True}
    return {**schema, "nullable": True}


def _inner(out: dict[str, Any]) -> dict[str, Any]:
    """`out` with the schemas inside it (properties, items, ...) said in 3.0's words too."""
    if "properties" in out:
        out["properties"] = {k: openapi_3_0(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = openapi_3_0(out[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in out:
            out[key] = [openapi_3_0(s) for s in out[key]]
    return out


def _types_by_name(examples: Mapping[type, Any]) -> dict[str, type]:
    """Every TypedDict reachable from the answers, by its component name."""
    seen: dict[str, type] = {}
    pending = list(examples)
    while pending:
        tp = pending.pop()
        if tp.__name__ in seen:  # one name, one type: msgspec would rename both otherwise
            assert seen[tp.__name__] is tp, f"two answer types named {tp.__name__}"
            continue
        seen[tp.__name__] = tp
        for hint in _hints(tp).values():
            pending.extend(_typed_dicts_in(hint))
    return seen


def _hints(tp: type) -> dict[str, Any]:
    return typing.get_type_hints(tp, include_extras=True) if hasattr(tp, "__total__") else {}


def _typed_dicts_in(hint: Any) -> list[type]:
    if isinstance(hint, type) and hasattr(hint, "__total__"):
        return [hint]
    return [t for arg in typing.get_args(hint) for t in _typed_dicts_in(arg)]


def _in_declared_order(schema: dict[str, Any], tp: type) -> dict[str, Any]:
    """`schema` with its properties, and the required ones, in the order `tp` declares them."""
    props = schema.get("properties")
    if props is None:
        return schema
    order = [name for name in _hints(tp) if name in props]
    out = {k: v for k, v in schema.items() if k not in ("properties", "required")}
    required = set(schema.get("required", ()))
    if required:
        out["required"] = [name for name in order if name in required]
    out["properties"] = {name: props[name] for name in order}
    return out
