"""The answers declared as types (api/contract/) and the schemas derived from them: OpenAPI
3.0's words for what msgspec reads, and every declared answer in the document with its
example."""

import ast
import inspect
import re
from pathlib import Path
from typing import Annotated, Literal, NotRequired, TypedDict

import pytest
from msgspec import Meta

from api.contract.atoms import fields_of, limited
from api.contract.derive import components
from api.contract.document import FAMILIES
from api.contract.webhooks import WebhookEndpointCreate
from api.openapi import OPENAPI
from api.openapi_parts import answer, operation, path, query, with_path_parameters
from api.routes.webhooks import CREATE_FIELDS
from api.validate import LIMITS

Code = Annotated[str, Meta(pattern="^[A-Z]{3}$")]


class Inner(TypedDict):
    """An inner record,
    over two lines."""

    zeta: int
    alpha: str


class Outer(TypedDict):
    first: Code | None
    inner: Inner | None
    inners: list[Inner]
    kind: Literal["one"]
    later: NotRequired[Annotated[int, Meta(description="sometimes")]]


class Bounded(TypedDict):
    n: Annotated[int, limited("quantity")]
    tags: Annotated[list[str], limited("event_types", unique=True)]


def test_nullable_fields_speak_openapi_3_0() -> None:
    schemas = components({Outer: {}, Inner: {}})
    props = schemas["Outer"]["properties"]
    assert props["first"] == {"type": "string", "pattern": "^[A-Z]{3}$", "nullable": True}
    # a reference's siblings are ignored in 3.0: a nullable one is wrapped
    assert props["inner"] == {"allOf": [{"$ref": "#/components/schemas/Inner"}], "nullable": True}
    assert props["inners"] == {"type": "array", "items": {"$ref": "#/components/schemas/Inner"}}
    assert props["kind"] == {"type": "string", "enum": ["one"]}
    assert props["later"] == {"type": "integer", "description": "sometimes"}


def test_fields_keep_their_declared_order_and_docstrings_read_as_one_line() -> None:
    schemas = components({Outer: {"kind": "one"}, Inner: {}})
    assert list(schemas["Outer"]["properties"]) == ["first", "inner", "inners", "kind", "later"]
    assert schemas["Outer"]["required"] == ["first", "inner", "inners", "kind"]
    assert list(schemas["Inner"]["properties"]) == ["zeta", "alpha"]
    assert schemas["Inner"]["description"] == "An inner record, over two lines."
    assert schemas["Outer"]["example"] == {"kind": "one"}
    assert "title" not in schemas["Outer"]


def test_closed_and_named_types() -> None:
    schemas = components({Outer: {}}, closed=(Inner,), named=("Outer",))
    assert "Outer" not in schemas  # declared by the document itself
    assert schemas["Inner"]["additionalProperties"] is False


def test_every_declared_answer_is_in_the_document_with_its_example() -> None:
    declared = {
        value
        for module in FAMILIES
        for value in vars(module).values()
        if inspect.isclass(value) and hasattr(value, "__total__")
        and value.__module__ == module.__name__
    }  # fmt: skip
    schemas = OPENAPI["components"]["schemas"]
    named = {t for t in declared if t.__name__ in schemas}
    # a type only built on (its fields flattened into a type in the document) has no schema
    parts = {t.__name__ for t in declared - named
             if not any(fields_of(t) < fields_of(u) for u in named)}  # fmt: skip
    assert parts == set()
    assert sorted(t.__name__ for t in named if "example" not in schemas[t.__name__]) == []


def test_a_request_type_is_what_its_handler_accepts_and_its_limits_are_the_validators() -> None:
    assert (
        CREATE_FIELDS == fields_of(WebhookEndpointCreate) == {"url", "description", "event_types"}
    )
    schema = components({Bounded: {}})["Bounded"]["properties"]
    assert schema["n"] == {
        "type": "integer", "minimum": LIMITS["quantity"].low, "maximum": LIMITS["quantity"].high,
        "x-limit": "quantity",
    }  # fmt: skip
    assert schema["tags"]["maxItems"] == LIMITS["event_types"].high
    assert schema["tags"]["uniqueItems"] is True
    assert limited("url").min_length == LIMITS["url"].low


def test_a_drafts_change_declares_exactly_the_details_an_event_has() -> None:
    from api.contract.catalogue import EventDetailsChange, EventListed
    from engine.model.event_details import DETAIL_FIELDS

    assert fields_of(EventDetailsChange) == set(DETAIL_FIELDS)
    assert set(DETAIL_FIELDS) <= fields_of(EventListed)


def test_the_layout_the_engine_encodes_is_the_declared_layout() -> None:
    import msgspec

    from api.contract.seatmap import SeatMapLayout
    from engine.views.seatmap import SeatPlace, layout_json

    places = [SeatPlace("A-1", "A", "1", 0.0, 0.0, "front", "1"), SeatPlace("A-2", "A")]
    for prices in (None, {"front": 4500}):
        body = layout_json(places, prices)
        msgspec.json.decode(body, type=SeatMapLayout, strict=True)  # each field as declared
        assert set(msgspec.json.decode(body)) == fields_of(SeatMapLayout)  # and no other


def _called(node: ast.expr) -> str:
    """The name of the function `node` calls (awaited or not); "" for anything else."""
    node = node.value if isinstance(node, ast.Await) else node
    return node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""


def _answer_is_declared(tree: ast.Module, returns: dict[str, str]) -> list[str]:
    """What json_response is given, in `tree`, where that value's type is not one of
    api/contract's: a variable annotated with one, or what a function returning one gave."""
    aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and (n.module or "").startswith("api.contract") for a in n.names}  # fmt: skip
    bad = []
    for f in ast.walk(tree):
        if not isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        typed = {n.target.id: ast.unparse(n.annotation) for n in ast.walk(f)
                 if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}  # fmt: skip
        made = {n.targets[0].id: returns.get(_called(n.value), "") for n in ast.walk(f)
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}  # fmt: skip
        for n in ast.walk(f):
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "json_response":
                sent = n.args[0]
                if isinstance(sent, ast.Name):
                    annotation = typed.get(sent.id) or made.get(sent.id, "")
                else:
                    annotation = returns.get(_called(sent), "")
                if annotation.split(".")[0].split("[")[0] not in aliases:
                    bad.append(ast.unparse(sent))
    return bad


def test_every_json_answer_a_handler_sends_is_a_declared_type() -> None:
    """A handler builds its answer as a type of api/contract/ (mypy then holds it to the
    declaration the document is read from); the one exception is the document itself."""
    root = Path(__file__).resolve().parents[2]
    trees = {
        str(p.relative_to(root)): ast.parse(p.read_text())
        for p in sorted((root / "api").rglob("*.py"))
    }
    returns = {f.name: ast.unparse(f.returns) for t in trees.values() for f in ast.walk(t)
               if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.returns}  # fmt: skip
    found = [(p, sent) for p, t in trees.items() for sent in _answer_is_declared(t, returns)]
    assert found == [("api/routes/meta.py", "OPENAPI")]  # the document itself


def test_path_parameters_are_read_from_the_path_in_its_order() -> None:
    """`{name}` in a path is its parameter, an ID unless the operation declares that one with
    another schema; path parameters come first, then the operation's own; a declared one that
    the path lacks stops the document's build."""
    code = {"type": "string", "pattern": "^[A-Z]+$"}
    limit_param = query("limit", 50)
    paths = {
        "/v1/events/{event_id}/presales/{presale}": {
            "get": operation(
                "op",
                "An op",
                answer(200, "X", "x"),
                (),
                parameters=[limit_param, path("presale", code)],
            )
        },
        "/v1/plain": {"get": operation("plain", "Plain", answer(200, "X", "x"), ())},
    }
    with_path_parameters(paths)
    op = paths["/v1/events/{event_id}/presales/{presale}"]["get"]
    assert [p["name"] for p in op["parameters"]] == ["event_id", "presale", "limit"]
    assert op["parameters"][0] == path("event_id") and op["parameters"][1]["schema"] == code
    assert list(op) == ["operationId", "summary", "security", "parameters", "responses"]
    assert "parameters" not in paths["/v1/plain"]["get"]
    stray = {"/v1/x": {"get": operation("x", "X", {}, (), parameters=[path("event_id")])}}
    with pytest.raises(ValueError, match="event_id"):
        with_path_parameters(stray)


def test_every_path_parameter_of_the_document_is_in_its_path() -> None:
    for route, item in OPENAPI["paths"].items():
        for op in item.values():
            named = [p["name"] for p in op.get("parameters", ()) if p["in"] == "path"]
            assert named == re.findall(r"{(\w+)}", route), route
