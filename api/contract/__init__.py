"""The API's contract, declared once as types: each answer is a TypedDict whose fields carry
their constraints and words (`Annotated[..., msgspec.Meta(...)]`). The handlers build their
answers as those types (the type checker holds them to it), and the OpenAPI document's component
schemas are derived from the same types (api/contract/derive.py), each with its example, itself
checked against the type. ADR 0054 says why types, and what is not derived yet."""
