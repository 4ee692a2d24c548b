from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.list_deliveries_status import ListDeliveriesStatus
from ...models.page_delivery_view import PageDeliveryView
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: ListDeliveriesStatus | Unset = UNSET,
    webhook_id: UUID | Unset = UNSET,
    event_id: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    json_webhook_id: str | Unset = UNSET
    if not isinstance(webhook_id, Unset):
        json_webhook_id = str(webhook_id)
    params["webhook_id"] = json_webhook_id

    json_event_id: str | Unset = UNSET
    if not isinstance(event_id, Unset):
        json_event_id = str(event_id)
    params["event_id"] = json_event_id

    params["limit"] = limit

    params["cursor"] = cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/deliveries",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> PageDeliveryView | Problem | None:
    if response.status_code == 200:
        response_200 = PageDeliveryView.from_dict(response.json())

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
) -> Response[PageDeliveryView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    status: ListDeliveriesStatus | Unset = UNSET,
    webhook_id: UUID | Unset = UNSET,
    event_id: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
) -> Response[PageDeliveryView | Problem]:
    """
    Args:
        status (ListDeliveriesStatus | Unset):
        webhook_id (UUID | Unset):
        event_id (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageDeliveryView | Problem]
    """

    kwargs = _get_kwargs(
        status=status,
        webhook_id=webhook_id,
        event_id=event_id,
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    status: ListDeliveriesStatus | Unset = UNSET,
    webhook_id: UUID | Unset = UNSET,
    event_id: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
) -> PageDeliveryView | Problem | None:
    """
    Args:
        status (ListDeliveriesStatus | Unset):
        webhook_id (UUID | Unset):
        event_id (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageDeliveryView | Problem
    """

    return sync_detailed(
        client=client,
        status=status,
        webhook_id=webhook_id,
        event_id=event_id,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    status: ListDeliveriesStatus | Unset = UNSET,
    webhook_id: UUID | Unset = UNSET,
    event_id: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
) -> Response[PageDeliveryView | Problem]:
    """
    Args:
        status (ListDeliveriesStatus | Unset):
        webhook_id (UUID | Unset):
        event_id (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PageDeliveryView | Problem]
    """

    kwargs = _get_kwargs(
        status=status,
        webhook_id=webhook_id,
        event_id=event_id,
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    status: ListDeliveriesStatus | Unset = UNSET,
    webhook_id: UUID | Unset = UNSET,
    event_id: UUID | Unset = UNSET,
    limit: int | Unset = 50,
    cursor: str | Unset = UNSET,
) -> PageDeliveryView | Problem | None:
    """
    Args:
        status (ListDeliveriesStatus | Unset):
        webhook_id (UUID | Unset):
        event_id (UUID | Unset):
        limit (int | Unset):  Default: 50.
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PageDeliveryView | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            webhook_id=webhook_id,
            event_id=event_id,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
