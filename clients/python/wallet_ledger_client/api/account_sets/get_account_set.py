import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.get_account_set_time import GetAccountSetTime
from ...models.problem import Problem
from ...models.set_view import SetView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    as_of: datetime.datetime | Unset = UNSET,
    time: GetAccountSetTime | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_as_of: str | Unset = UNSET
    if not isinstance(as_of, Unset):
        json_as_of = as_of.isoformat()
    params["as_of"] = json_as_of

    json_time: str | Unset = UNSET
    if not isinstance(time, Unset):
        json_time = time.value

    params["time"] = json_time

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/account-sets/{id}".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | SetView | None:
    if response.status_code == 200:
        response_200 = SetView.from_dict(response.json())

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

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | SetView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: str,
    *,
    client: AuthenticatedClient,
    as_of: datetime.datetime | Unset = UNSET,
    time: GetAccountSetTime | Unset = UNSET,
) -> Response[Problem | SetView]:
    """
    Args:
        id (str):
        as_of (datetime.datetime | Unset):
        time (GetAccountSetTime | Unset): `time` of an `as_of` read.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SetView]
    """

    kwargs = _get_kwargs(
        id=id,
        as_of=as_of,
        time=time,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient,
    as_of: datetime.datetime | Unset = UNSET,
    time: GetAccountSetTime | Unset = UNSET,
) -> Problem | SetView | None:
    """
    Args:
        id (str):
        as_of (datetime.datetime | Unset):
        time (GetAccountSetTime | Unset): `time` of an `as_of` read.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SetView
    """

    return sync_detailed(
        id=id,
        client=client,
        as_of=as_of,
        time=time,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient,
    as_of: datetime.datetime | Unset = UNSET,
    time: GetAccountSetTime | Unset = UNSET,
) -> Response[Problem | SetView]:
    """
    Args:
        id (str):
        as_of (datetime.datetime | Unset):
        time (GetAccountSetTime | Unset): `time` of an `as_of` read.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SetView]
    """

    kwargs = _get_kwargs(
        id=id,
        as_of=as_of,
        time=time,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient,
    as_of: datetime.datetime | Unset = UNSET,
    time: GetAccountSetTime | Unset = UNSET,
) -> Problem | SetView | None:
    """
    Args:
        id (str):
        as_of (datetime.datetime | Unset):
        time (GetAccountSetTime | Unset): `time` of an `as_of` read.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SetView
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            as_of=as_of,
            time=time,
        )
    ).parsed
