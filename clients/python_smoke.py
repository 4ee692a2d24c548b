"""Smoke test of the generated Python client (clients/python) against a running server:
`python3 clients/python_smoke.py URL TOKEN` with an admin key. scripts/clients.sh runs it.

What a client team relies on: a create answers its typed view; the same request again is a
replay (200, `Idempotent-Replayed: true`, the same transaction); the same id with another
amount is the typed `idempotency_mismatch` problem naming the field; and a search by metadata
finds the wallet with its balances.
"""

import sys
import uuid

from wallet_ledger_client import AuthenticatedClient
from wallet_ledger_client.api.accounts import create_account, list_accounts
from wallet_ledger_client.api.transactions import create_payment, create_transfer
from wallet_ledger_client.models import (
    AccountTypeRequest,
    CreateAccountRequest,
    CurrencyCode,
    ListAccountsMetadata,
    Metadata,
    PaymentRequest,
    Problem,
    TransactionView,
    TransferRequest,
)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"python client: {what}")


def main(base_url: str, token: str) -> None:
    client = AuthenticatedClient(base_url=base_url, token=token)
    run = uuid.uuid4().hex[:8]
    a, b = f"py-{run}-a", f"py-{run}-b"
    for wallet, metadata in [(a, {"customer": f"py-{run}"}), (b, {})]:
        body = CreateAccountRequest(
            id=wallet, currency=CurrencyCode.SAR, type_=AccountTypeRequest.WALLET,
            metadata=Metadata.from_dict(metadata),
        )
        created = create_account.sync_detailed(client=client, body=body)
        check(created.status_code == 201, f"create {wallet}: {created.status_code} {created.content!r}")
    top_up = create_payment.sync_detailed(client=client, body=PaymentRequest(
        id=uuid.uuid4(), account=a, amount=1000, currency=CurrencyCode.SAR, provider="smoke"))
    check(top_up.status_code == 201, f"top-up: {top_up.status_code} {top_up.content!r}")

    transfer = TransferRequest(id=uuid.uuid4(), from_=a, to=b, amount=300)
    first = create_transfer.sync_detailed(client=client, body=transfer)
    check(first.status_code == 201 and isinstance(first.parsed, TransactionView),
          f"transfer: {first.status_code} {first.content!r}")
    again = create_transfer.sync_detailed(client=client, body=transfer)
    check(again.status_code == 200 and again.headers.get("Idempotent-Replayed") == "true",
          f"retry: {again.status_code} {dict(again.headers)}")
    check(isinstance(again.parsed, TransactionView) and again.parsed.id == first.parsed.id,
          "the retry answers the same transaction")
    transfer.amount = 301
    wrong = create_transfer.sync_detailed(client=client, body=transfer)
    check(wrong.status_code == 422 and isinstance(wrong.parsed, Problem),
          f"mismatch: {wrong.status_code} {wrong.content!r}")
    check(wrong.parsed.code == "idempotency_mismatch" and wrong.parsed.differing_fields == ["/amount"],
          f"mismatch problem: {wrong.parsed}")

    # The generator sends an object query parameter's keys as they are, not as
    # `metadata[key]`: name the filters whole (clients/README.md).
    filters = ListAccountsMetadata.from_dict({"metadata[customer]": f"py-{run}"})
    found = list_accounts.sync(client=client, metadata=filters)
    check(found is not None and [x.id for x in found.data] == [a], f"search: {found}")
    check(found.data[0].balances.posted == 700, f"balance: {found.data[0].balances}")
    print("python client: ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
