"""Schemathesis hooks of scripts/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

A request that schemathesis means to be valid is sent as a client following docs/api.md would
send it, where the API's rules are ones JSON Schema cannot state:

- Every create is a new request: a client makes a new id (or Idempotency-Key) for each one and
  sends one again only to retry the very same request. Schemathesis puts ids it has seen (in the
  document's examples, in earlier answers, or the same generated UUID case after case) into new,
  different requests, each rightly answered 422 idempotency_mismatch. So a well-formed body `id`
  (and each batch item's) and a well-formed Idempotency-Key are replaced by fresh ones.
- A transaction's legs name distinct accounts and sum to zero (rules across the items of an
  array, which JSON Schema cannot state): in a `POST /v1/transactions` body, and in each batch
  item, a leg that names a seeded dollar account an earlier leg named takes another seeded one
  (`dollar-accounts` in scripts/schemathesis.toml: schemathesis draws one dictionary value for
  every leg), a repeat of any other account is dropped while two legs or more remain, and the
  last leg takes what the others leave (an atomic batch with one item that does not is refused
  whole).
- A create carries a body `id` or an Idempotency-Key (400 id_required otherwise): one rule across
  two parts of the request, which the document can only say in words. Where neither is sent, a
  fresh key is.
- Integers are JSON integers: `2.0` is refused, 422 `invalid_type` (docs/api.md, "a number with
  a fraction or an exponent"; the document's description says so too), although to JSON Schema
  it is the integer 2. Schemathesis sends such whole floats on purpose: for a JSON body it draws
  every `type: integer` value as either `n` or `float(n)` (schemathesis 4.x,
  `generation/jsonschema/strategy.py`, `_integer` with `whole_floats`), to find readers stricter
  than their schema. The server is stricter by design, and no JSON Schema keyword can say so (a
  schema sees values, not how they are written), so schemathesis would count each such request
  as valid data refused. An integer field's whole float is therefore sent as the integer it
  equals, as a client's JSON encoder writes an integer: a normalisation on the client's side, not
  a rule the server relaxes (requests meant to be refused are left alone, and
  tests/api/bad_input.rs checks the 422 of `"amount": 100.0`).
- A capture or a reversal can take only what is left of its hold or original: more is 422, and
  a hold captured (or an original reversed) whole takes nothing more. The document cannot tie
  `amount` to another resource's state, and the run sends hundreds of them to a few seeded ids.
  So a capture or reversal meant to be accepted whose path names one of the seeded holds
  (`holds` in scripts/schemathesis.toml) or seeded transactions (`transactions`), the document's
  examples among them, or one this hook made (schemathesis reuses ids from earlier answers), is
  sent to a hold or posted transaction made for it just before, of its `amount` (5000 without
  one), between two accounts of its own (balances are bounded: one pair could not take every
  amount up to the maximum). Other path ids (found in other answers, or generated) are left as
  they are.

Requests meant to be refused are left as generated, and so are other path ids: they name
existing resources.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import tomllib
import uuid

import requests
import schemathesis

_ROOT = pathlib.Path(__file__).resolve().parent.parent
_DOCUMENT = json.loads((_ROOT / "openapi" / "openapi.json").read_text())
_DICTIONARIES = tomllib.loads((_ROOT / "scripts" / "schemathesis.toml").read_text())["dictionaries"]
_KEY_HEADER = "Idempotency-Key"
# The server under test, for the holds and transactions made for captures and reversals
# (scripts/schemathesis.sh sets both).
_BASE_URL = os.environ.get("SCHEMATHESIS_LEDGER_URL")
_TOKEN = os.environ.get("SCHEMATHESIS_LEDGER_TOKEN")
# What a hold or an original is made of when the request names no amount.
_DEFAULT_AMOUNT = 5000


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


# The seeded accounts in one currency that the toml's `dollar-accounts` dictionary names.
_DOLLAR_ACCOUNTS = ("st-w1", "st-w2", "st-sys", "alice-usd")


def _balance(item: object) -> None:
    """A transaction's legs on distinct accounts and summing to zero, as a client writes them:
    a leg repeating an earlier leg's account is dropped while two or more remain, and the last
    leg takes what the others leave (rules across array items, which JSON Schema cannot state)."""
    legs = item.get("entries") if isinstance(item, dict) else None
    if isinstance(legs, list) and all(isinstance(l, dict) for l in legs):
        seen, distinct = set(), []
        for leg in legs:
            account = leg.get("account")
            if isinstance(account, str) and account in seen:
                spare = [a for a in _DOLLAR_ACCOUNTS if a not in seen]
                if account not in _DOLLAR_ACCOUNTS or not spare:
                    continue
                leg["account"] = account = spare[0]
            seen.add(account if isinstance(account, str) else id(leg))
            distinct.append(leg)
        if len(distinct) >= 2:
            item["entries"] = legs = distinct
    if not isinstance(legs, list) or len(legs) < 2 or not all(isinstance(l, dict) for l in legs):
        return
    amounts = [l.get("amount") for l in legs[:-1]]
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in amounts):
        return
    rest = -sum(amounts)
    if rest != 0 and abs(rest) <= 9007199254740991:
        legs[-1]["amount"] = rest


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


def _post(path: str, body: dict) -> None:
    response = requests.post(
        f"{_BASE_URL}{path}", json=body, headers={"Authorization": f"Bearer {_TOKEN}"}, timeout=30
    )
    if response.status_code != 201:
        raise RuntimeError(f"seeding POST {path} answered {response.status_code}: {response.text}")


def _made_for(amount: int, status: str) -> str:
    """A new transaction of `amount` (a hold or posted) from a new system account to a new wallet."""
    stem = f"st-made-{uuid.uuid4().hex[:12]}"
    _post("/v1/accounts", {"id": f"{stem}-from", "currency": "USD", "type": "system"})
    _post("/v1/accounts", {"id": f"{stem}-to", "currency": "USD", "type": "wallet"})
    transaction = str(uuid.uuid4())
    _MADE.add(transaction)
    entries = [{"account": f"{stem}-from", "amount": -amount}, {"account": f"{stem}-to", "amount": amount}]
    _post("/v1/transactions", {"id": transaction, "entries": entries, "status": status})
    return transaction


# The holds and transactions made so far: each stands, as a seeded id does, for a new one.
_MADE: set[str] = set()

# Operation path, the dictionary of the seeded ids it stands for, the status of what is made.
_MADE_FOR = {
    "/v1/transactions/{id}/post": ("holds", "pending"),
    "/v1/transactions/{id}/reverse": ("transactions", "posted"),
}


def _send_to_one_made_for_it(case) -> None:
    made = _MADE_FOR.get(case.path)
    if made is None or _BASE_URL is None or _TOKEN is None:
        return
    dictionary, status = made
    named = (case.path_parameters or {}).get("id")
    if named not in _DICTIONARIES[dictionary]["values"] and named not in _MADE:
        return
    amount = case.body.get("amount") if isinstance(case.body, dict) else None
    if not isinstance(amount, int) or isinstance(amount, bool):
        amount = _DEFAULT_AMOUNT
    case.path_parameters["id"] = _made_for(amount, status)


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
    _send_to_one_made_for_it(case)
    _fresh_id(body)
    if case.path == "/v1/transactions":
        _balance(body)
    # A batch's items are bodies of POST /v1/transactions, each with its own id and legs that
    # balance (an atomic batch with one item that does not is refused whole).
    if isinstance(body, dict) and isinstance(body.get("items"), list):
        for item in body["items"]:
            _fresh_id(item)
            _balance(item)
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
