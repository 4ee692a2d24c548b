//! The OpenAPI 3.1 document, generated from the handlers' annotations. The committed
//! `openapi/openapi.json` must equal [`document`] (a test checks it); regenerate it with
//! `cargo run -- openapi > openapi/openapi.json`.

use super::{accounts, batch, health, metrics, reconciliations, transactions, webhooks};
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "wallet-ledger",
        description = "A double-entry wallet ledger built on natural idempotency. Every create is keyed by its id: a retry replays the stored answer (`Idempotent-Replayed: true`), a different payload under the same id is `idempotency_mismatch`. Errors are `application/problem+json` with a stable `code`."
    ),
    paths(
        accounts::create, accounts::get, accounts::patch, accounts::entries, accounts::holds,
        accounts::freeze, accounts::unfreeze, accounts::close,
        transactions::create, transactions::list, transactions::get,
        transactions::transfer, transactions::payment, batch::batch,
        transactions::post, transactions::void, transactions::reverse,
        webhooks::create, webhooks::list, webhooks::get, webhooks::delete, webhooks::rotate_secret,
        webhooks::list_deliveries, webhooks::get_delivery, webhooks::redeliver,
        reconciliations::list, reconciliations::get,
        health::healthz, health::readyz, health::openapi, metrics::metrics,
    ),
    components(schemas(crate::problem::Problem, crate::problem::FieldError)),
    tags(
        (name = "accounts", description = "wallets and system accounts, with derived balances"),
        (name = "transactions", description = "moving money, exactly once per id"),
        (name = "holds", description = "reserving money, then capturing or releasing it exactly once"),
        (name = "webhooks", description = "subscriptions to ledger events and their deliveries (Standard Webhooks, sent once per event id)"),
        (name = "reconciliations", description = "stored runs of the reconciliation job"),
        (name = "operations", description = "health, readiness, this document"),
    )
)]
pub struct ApiDoc;

/// The document as committed: pretty JSON with a trailing newline.
pub fn document() -> String {
    let mut json = ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serializes");
    json.push('\n');
    json
}
