"""Schemathesis hooks of scripts/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

A request that schemathesis means to be valid is sent as a client following docs/api.md would
send it, where the API's rules are ones JSON Schema cannot state:

- Every create is a new request: a client makes a new id (or Idempotency-Key) for each one and
  sends one again only to retry the very same request. Schemathesis puts ids it has seen (in the
  document's examples, in earlier answers, or the same generated UUID case after case) into new,
  different requests, each rightly answered 422 idempotency_mismatch. So a well-formed body `id`
  (and each batch item's) and a well-formed Idempotency-Key are replaced by fresh ones.
- A create carries a body `id` or an Idempotency-Key (400 id_required otherwise): one rule across
  two parts of the request, which the document can only say in words. Where neither is sent, a
  fresh key is.
- Integers are JSON integers: `2.0` is refused (docs/api.md, "a number with a fraction or an
  exponent"), although to JSON Schema it is the integer 2. An integer field's whole float is sent
  as the integer it equals.

Requests meant to be refused are left as generated, and so are path ids: they name existing
resources.
"""

from __future__ import annotations

import json
import pathlib
import re
import uuid

import schemathesis

_DOCUMENT = json.loads(
    (pathlib.Path(__file__).resolve().parent.parent / "openapi" / "openapi.json").read_text()
)
_KEY_HEADER = "Idempotency-Key"


def _key_pattern() -> re.Pattern[str]:
    """The document's rule for an Idempotency-Key (`ledger::ids::parse_idempotency_key`)."""
    operation = _DOCUMENT["paths"]["/v1/payments"]["post"]
    (header,) = (p for p in operation["parameters"] if p["name"] == _KEY_HEADER)
    return re.compile(header["schema"]["pattern"])


def _integer_fields() -> frozenset[str]:
    """The names of the integer properties of the document's schemas (`amount`, `version`, ...)."""
    names = set()
    for schema in _DOCUMENT["components"]["schemas"].values():
        for name, prop in schema.get("properties", {}).items():
            kinds = prop.get("type")
            if kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds):
                names.add(name)
    return frozenset(names)


_KEY = _key_pattern()
_INTEGERS = _integer_fields()


def _is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def _fresh_id(body: object) -> None:
    if isinstance(body, dict) and _is_uuid(body.get("id")):
        body["id"] = str(uuid.uuid4())


def _spell_integers(value: object) -> None:
    """Whole floats of integer fields as integers, at any depth but inside `metadata` (any JSON)."""
    if isinstance(value, list):
        for item in value:
            _spell_integers(item)
    elif isinstance(value, dict):
        for name, item in value.items():
            if name == "metadata":
                continue
            if name in _INTEGERS and isinstance(item, float) and item.is_integer():
                value[name] = int(item)
            else:
                _spell_integers(item)


def _takes_key(case) -> bool:
    parameters = _DOCUMENT["paths"].get(case.path, {}).get(case.method.lower(), {}).get("parameters", [])
    return any(p.get("in") == "header" and p.get("name") == _KEY_HEADER for p in parameters)


@schemathesis.hook
def before_call(context, case, kwargs):
    # Only requests meant to be accepted: a negative case's edit would be revalidated (and, for a
    # missing `Authorization`, taken for a positive one).
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    if case.method.upper() != "POST":
        return
    body = case.body
    _spell_integers(body)
    _fresh_id(body)
    # A batch's items are bodies of POST /v1/transactions, each with its own id.
    if isinstance(body, dict) and isinstance(body.get("items"), list):
        for item in body["items"]:
            _fresh_id(item)
    if not _takes_key(case):
        return
    if case.headers is None:
        case.headers = {}
    headers = case.headers
    sent = [name for name in headers if name.lower() == _KEY_HEADER.lower()]
    for name in sent:
        value = headers[name]
        if isinstance(value, str) and _KEY.fullmatch(value):
            fresh = f"st-{uuid.uuid4()}"
            headers[name] = f'"{fresh}"' if value.startswith('"') else fresh
    if not sent and not (isinstance(body, dict) and body.get("id") is not None):
        headers[_KEY_HEADER] = f"st-{uuid.uuid4()}"
