/**
 * The wallet-ledger API client: openapi-fetch over the `paths` that openapi-typescript
 * generated from openapi/openapi.json (src/schema.d.ts, never edited by hand).
 */
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
export type Problem = components["schemas"]["Problem"];
export type AccountView = components["schemas"]["AccountView"];
export type TransactionView = components["schemas"]["TransactionView"];

export type LedgerClient = Client<paths>;

/** A client of the API at `baseUrl` that sends `token` as its bearer API key. */
export function createLedgerClient(
  baseUrl: string,
  token: string,
  options: ClientOptions = {},
): LedgerClient {
  return createClient<paths>({
    ...options,
    baseUrl,
    headers: { ...options.headers, Authorization: `Bearer ${token}` },
  });
}
