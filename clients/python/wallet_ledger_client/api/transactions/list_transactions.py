from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.list_transactions_metadata import ListTransactionsMetadata
from ...models.page_transaction_view import PageTransactionView
from ...models.problem import Problem
from ...models.status_filter import StatusFilter
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    account: str | Unset = UNSET,
    status: StatusFilter | Unset = UNSET,
    external_ref: str | Unset = UNSET,
    reverses: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListTransactionsMetadata | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["account"] = account

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["external_ref"] = external_ref

    json_reverses: str | Unset = UNSET
    if not isinstance(reverses, Unset):
        json_reverses = str(reverses)
    params["reverses"] = json_reverses

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
        "url": "/v1/transactions",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> PageTransactionView | Problem | None:
    if response.status_code == 200:
        response_200 = PageTransactionView.from_dict(response.json())

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
) -> Response[PageTransactionView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    account: str | Unset = UNSET,
    status: StatusFilter | Unset = UNSET,
    external_ref: str | Unset = UNSET,
    reverses: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListTransactionsMetadata | Unset = UNSET,
) -> Response[PageTransactionView | Problem]:
    """
    Args:
        account (str | Unset):
        status (StatusFilter | Unset):
        external_ref (str | Unset):
        reverses (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListTransactionsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageTransactionView | Problem]
    """

    kwargs = _get_kwargs(
        account=account,
        status=status,
        external_ref=external_ref,
        reverses=reverses,
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
    account: str | Unset = UNSET,
    status: StatusFilter | Unset = UNSET,
    external_ref: str | Unset = UNSET,
    reverses: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListTransactionsMetadata | Unset = UNSET,
) -> PageTransactionView | Problem | None:
    """
    Args:
        account (str | Unset):
        status (StatusFilter | Unset):
        external_ref (str | Unset):
        reverses (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListTransactionsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageTransactionView | Problem
    """

    return sync_detailed(
        client=client,
        account=account,
        status=status,
        external_ref=external_ref,
        reverses=reverses,
        limit=limit,
        cursor=cursor,
        metadata=metadata,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    account: str | Unset = UNSET,
    status: StatusFilter | Unset = UNSET,
    external_ref: str | Unset = UNSET,
    reverses: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListTransactionsMetadata | Unset = UNSET,
) -> Response[PageTransactionView | Problem]:
    """
    Args:
        account (str | Unset):
        status (StatusFilter | Unset):
        external_ref (str | Unset):
        reverses (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListTransactionsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageTransactionView | Problem]
    """

    kwargs = _get_kwargs(
        account=account,
        status=status,
        external_ref=external_ref,
        reverses=reverses,
        limit=limit,
        cursor=cursor,
        metadata=metadata,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    account: str | Unset = UNSET,
    status: StatusFilter | Unset = UNSET,
    external_ref: str | Unset = UNSET,
    reverses: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
    metadata: ListTransactionsMetadata | Unset = UNSET,
) -> PageTransactionView | Problem | None:
    """
    Args:
        account (str | Unset):
        status (StatusFilter | Unset):
        external_ref (str | Unset):
        reverses (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):
        metadata (ListTransactionsMetadata | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageTransactionView | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            account=account,
            status=status,
            external_ref=external_ref,
            reverses=reverses,
            limit=limit,
            cursor=cursor,
            metadata=metadata,
        )
    ).parsed
