"""The OpenAPI document's own promises, in process (ADR 0026): every operation has a unique
camelCase operationId and a summary; every JSON body and answer is a named component schema;
every example (of a schema, a media type, a parameter) is valid against its schema, with no
property the schema does not name; every error answer lists the codes it may carry, each a real
code of api/errors.py answered with that status; docs/openapi.json is the served document.

`json_schema` and `validator` are also how the integration tests check the server's answers."""

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import orjson
import pytest

from api.errors import STATUS
from api.openapi import OPENAPI

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"
SCHEMAS: dict[str, Any] = OPENAPI["components"]["schemas"]
METHODS = ("get", "put", "post", "delete", "patch")
NOT_SCHEMA_KEYWORDS = ("nullable", "example", "discriminator", "xml", "externalDocs")
# Codes no documented operation answers: the router's, for a method a path does not serve.
UNLISTED_CODES = frozenset({"method_not_allowed"})


def json_schema(node: Any, closed: bool = False) -> Any:
    """An OpenAPI 3.0 schema as a JSON Schema (2020-12): `nullable` becomes a union with null,
    OpenAPI's own keywords and `x-` extensions go. `closed`: an object schema that does not say
    otherwise takes no property it does not name (what is sent must be documented)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in NOT_SCHEMA_KEYWORDS or key.startswith("x-"):
            continue
        if key == "properties":
            out[key] = {name: json_schema(sub, closed) for name, sub in value.items()}
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [json_schema(sub, closed) for sub in value]
        elif key in ("items", "not", "additionalProperties"):
            out[key] = json_schema(value, closed)
        else:
            out[key] = value
    if closed and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return {"anyOf": [out, {"type": "null"}]} if node.get("nullable") else out


@cache
def _components(closed: bool) -> dict[str, Any]:
    return {name: json_schema(schema, closed) for name, schema in SCHEMAS.items()}


def validator(schema: dict[str, Any], closed: bool = True) -> jsonschema_rs.Validator:
    """A validator of `schema` (an OpenAPI schema of this document; `$ref`s resolved)."""
    root = {**json_schema(schema, closed), "components": {"schemas": _components(closed)}}
    return jsonschema_rs.Draft202012Validator(root)


def problems(schema: dict[str, Any], value: Any, closed: bool = True) -> list[str]:
    return [f"{e.instance_path}: {e.message}" for e in validator(schema, closed).iter_errors(value)]


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in OPENAPI["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, op


def examples(node: Any, where: str = "#") -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(where, schema, example) of every example in the document: a schema's own, and a media
    type's or a parameter's (beside their `schema`)."""
    if isinstance(node, dict):
        if "example" in node:
            yield where, node.get("schema", node), node["example"]
        for key, value in node.items():
            if key != "example":
                yield from examples(value, f"{where}/{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from examples(value, f"{where}/{n}")


def test_every_operation_has_a_unique_camel_case_id_and_a_summary() -> None:
    ids = [op.get("operationId", "") for _path, _method, op in operations()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    for path, method, op in operations():
        assert re.fullmatch(r"[a-z][a-zA-Z0-9]*", op.get("operationId", "")), (method, path)
        assert op.get("summary"), f"{method} {path} has no summary"


def test_every_json_body_and_answer_is_a_named_schema() -> None:
    for path, method, op in operations():
        media = [("body", op.get("requestBody", {}).get("content", {}))]
        media += [(status, answer.get("content", {})) for status, answer in op["responses"].items()]
        for where, content in media:
            for kind, entry in content.items():
                schema = entry["schema"]
                if kind == "application/json":
                    assert set(schema) == {"$ref"}, f"{method} {path} {where}: inline schema"
                    assert schema["$ref"].rsplit("/", 1)[-1] in SCHEMAS, schema
                else:
                    assert schema == {"type": "string"}, f"{method} {path} {where} {kind}"


def test_every_schema_and_media_type_has_an_example() -> None:
    for name, schema in SCHEMAS.items():
        assert "example" in schema, f"components/schemas/{name} has no example"
    for path, method, op in operations():
        media = list(op.get("requestBody", {}).get("content", {}).values())
        media += [
            m for answer in op["responses"].values() for m in answer.get("content", {}).values()
        ]
        for entry in media:
            named = SCHEMAS.get(entry["schema"].get("$ref", "").rsplit("/", 1)[-1], {})
            assert "example" in entry or "example" in named, f"{method} {path}: no example"
        for parameter in op.get("parameters", []):
            assert "example" in parameter, f"{method} {path}: {parameter['name']} has none"


def test_every_example_is_valid_against_its_schema() -> None:
    found = list(examples(OPENAPI))
    assert len(found) > len(SCHEMAS)  # components, media types, parameters
    for where, schema, example in found:
        assert not problems(schema, example), (where, problems(schema, example))


@pytest.mark.parametrize(
    ("name", "change", "closed"),
    [
        ("Claimed", {"seat_ids": "A-1"}, False),  # a list, not a text
        ("Claimed", {"state": "ON_HOLD"}, False),  # not a state of the tables
        ("Hold", {"order": {"currency": "EUR"}}, False),  # an order without its charge
        ("ChargeStarted", {"expires_ms": None}, False),  # never null
        ("Claimed", {"surprise": 1}, True),  # not named by the schema
    ],
)
def test_a_body_that_breaks_its_schema_is_refused(
    name: str, change: dict[str, Any], closed: bool
) -> None:
    schema = {"$ref": f"#/components/schemas/{name}"}
    example = SCHEMAS[name]["example"]
    assert not problems(schema, example, closed)
    assert problems(schema, {**example, **change}, closed)
    nullable = {**example, "replaced_hold_id": "older"} if name == "Claimed" else example
    assert not problems(schema, nullable, closed)


def test_every_error_answer_lists_real_codes_under_their_status() -> None:
    for path, method, op in operations():
        for status, answer in op["responses"].items():
            if int(status) < 400:
                continue
            codes = answer.get("x-error-codes", [])
            assert codes, f"{method} {path} {status}: no error codes listed"
            for code in codes:
                assert STATUS.get(code) == int(status), f"{method} {path}: {code} under {status}"
            media = answer["content"]["application/json"]
            assert media["schema"] == {"$ref": "#/components/schemas/Error"}
            assert media["example"]["error"]["code"] in codes, f"{method} {path} {status}"


def test_every_code_of_the_table_is_answered_by_some_operation() -> None:
    listed = {
        code
        for _path, _method, op in operations()
        for answer in op["responses"].values()
        for code in answer.get("x-error-codes", ())
    }
    assert set(STATUS) - UNLISTED_CODES <= listed, sorted(set(STATUS) - UNLISTED_CODES - listed)


def test_the_committed_document_is_the_served_one() -> None:
    assert COMMITTED.exists(), "run `make openapi`"
    assert orjson.loads(COMMITTED.read_bytes()) == orjson.loads(orjson.dumps(OPENAPI)), (
        "docs/openapi.json is stale: run `make openapi`"
    )
