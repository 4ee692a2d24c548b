from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.currency_code import CurrencyCode
from ...models.list_accounts_metadata import ListAccountsMetadata
from ...models.list_accounts_status import ListAccountsStatus
from ...models.list_accounts_type import ListAccountsType
from ...models.page_account_view import PageAccountView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    type_: ListAccountsType | Unset = UNSET,
    currency: CurrencyCode | Unset = UNSET,
    status: ListAccountsStatus | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListAccountsMetadata | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_type_: str | Unset = UNSET
    if not isinstance(type_, Unset):
        json_type_ = type_.value

    params["type"] = json_type_

    json_currency: str | Unset = UNSET
    if not isinstance(currency, Unset):
        json_currency = currency.value

    params["currency"] = json_currency

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["id_prefix"] = id_prefix

    params["limit"] = limit

    params["cursor"] = cursor

    json_metadata: dict[str, Any] | Unset = UNSET
    if not isinstance(metadata, Unset):
        json_metadata = metadata.to_dict()
    if not isinstance(json_metadata, Unset):
        params.update(json_metadata)

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/accounts",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> PageAccountView | Problem | None:
    if response.status_code == 200:
        response_200 = PageAccountView.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

    if response.status_code == 500:
        response_500 = Problem.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[PageAccountView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    type_: ListAccountsType | Unset = UNSET,
    currency: CurrencyCode | Unset = UNSET,
    status: ListAccountsStatus | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListAccountsMetadata | Unset = UNSET,
) -> Response[PageAccountView | Problem]:
    """
    Args:
        type_ (ListAccountsType | Unset): `type` of `GET /v1/accounts`.
        currency (CurrencyCode | Unset): An ISO 4217 code the ledger knows.
        status (ListAccountsStatus | Unset): `status` of `GET /v1/accounts`.
        id_prefix (str | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListAccountsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageAccountView | Problem]
    """

    kwargs = _get_kwargs(
        type_=type_,
        currency=currency,
        status=status,
        id_prefix=id_prefix,
        limit=limit,
        cursor=cursor,
        metadata=metadata,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    type_: ListAccountsType | Unset = UNSET,
    currency: CurrencyCode | Unset = UNSET,
    status: ListAccountsStatus | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListAccountsMetadata | Unset = UNSET,
) -> PageAccountView | Problem | None:
    """
    Args:
        type_ (ListAccountsType | Unset): `type` of `GET /v1/accounts`.
        currency (CurrencyCode | Unset): An ISO 4217 code the ledger knows.
        status (ListAccountsStatus | Unset): `status` of `GET /v1/accounts`.
        id_prefix (str | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListAccountsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageAccountView | Problem
    """

    return sync_detailed(
        client=client,
        type_=type_,
        currency=currency,
        status=status,
        id_prefix=id_prefix,
        limit=limit,
        cursor=cursor,
        metadata=metadata,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    type_: ListAccountsType | Unset = UNSET,
    currency: CurrencyCode | Unset = UNSET,
    status: ListAccountsStatus | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListAccountsMetadata | Unset = UNSET,
) -> Response[PageAccountView | Problem]:
    """
    Args:
        type_ (ListAccountsType | Unset): `type` of `GET /v1/accounts`.
        currency (CurrencyCode | Unset): An ISO 4217 code the ledger knows.
        status (ListAccountsStatus | Unset): `status` of `GET /v1/accounts`.
        id_prefix (str | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListAccountsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageAccountView | Problem]
    """

    kwargs = _get_kwargs(
        type_=type_,
        currency=currency,
        status=status,
        id_prefix=id_prefix,
        limit=limit,
        cursor=cursor,
        metadata=metadata,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    type_: ListAccountsType | Unset = UNSET,
    currency: CurrencyCode | Unset = UNSET,
    status: ListAccountsStatus | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListAccountsMetadata | Unset = UNSET,
) -> PageAccountView | Problem | None:
    """
    Args:
        type_ (ListAccountsType | Unset): `type` of `GET /v1/accounts`.
        currency (CurrencyCode | Unset): An ISO 4217 code the ledger knows.
        status (ListAccountsStatus | Unset): `status` of `GET /v1/accounts`.
        id_prefix (str | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListAccountsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageAccountView | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            type_=type_,
            currency=currency,
            status=status,
            id_prefix=id_prefix,
            limit=limit,
            cursor=cursor,
            metadata=metadata,
        )
    ).parsed
