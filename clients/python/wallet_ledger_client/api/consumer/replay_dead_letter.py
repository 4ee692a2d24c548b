from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.lifecycle_request import LifecycleRequest
from ...models.problem import Problem
from ...models.settled_dead_letter import SettledDeadLetter
from ...types import UNSET, Response, Unset


def _get_kwargs(
    partition: int,
    id: str,
    *,
    body: LifecycleRequest | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/dead-letters/{partition}/{id}/replay".format(
            partition=quote(str(partition), safe=""),
            id=quote(str(id), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | SettledDeadLetter | None:
    if response.status_code == 200:
        response_200 = SettledDeadLetter.from_dict(response.json())

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

    if response.status_code == 408:
        response_408 = Problem.from_dict(response.json())

        return response_408

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

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
) -> Response[Problem | SettledDeadLetter]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    partition: int,
    id: str,
    *,
    client: AuthenticatedClient,
    body: LifecycleRequest | Unset = UNSET,
) -> Response[Problem | SettledDeadLetter]:
    """
    Args:
        partition (int):
        id (str):
        body (LifecycleRequest | Unset): The body of freeze, unfreeze and close: nothing, or `{}`.
            Held to the rules of every other
            body (JSON, no unknown field), so that a request meant for another endpoint is refused,
            not silently applied as a bare transition.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SettledDeadLetter]
    """

    kwargs = _get_kwargs(
        partition=partition,
        id=id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    partition: int,
    id: str,
    *,
    client: AuthenticatedClient,
    body: LifecycleRequest | Unset = UNSET,
) -> Problem | SettledDeadLetter | None:
    """
    Args:
        partition (int):
        id (str):
        body (LifecycleRequest | Unset): The body of freeze, unfreeze and close: nothing, or `{}`.
            Held to the rules of every other
            body (JSON, no unknown field), so that a request meant for another endpoint is refused,
            not silently applied as a bare transition.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SettledDeadLetter
    """

    return sync_detailed(
        partition=partition,
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    partition: int,
    id: str,
    *,
    client: AuthenticatedClient,
    body: LifecycleRequest | Unset = UNSET,
) -> Response[Problem | SettledDeadLetter]:
    """
    Args:
        partition (int):
        id (str):
        body (LifecycleRequest | Unset): The body of freeze, unfreeze and close: nothing, or `{}`.
            Held to the rules of every other
            body (JSON, no unknown field), so that a request meant for another endpoint is refused,
            not silently applied as a bare transition.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | SettledDeadLetter]
    """

    kwargs = _get_kwargs(
        partition=partition,
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    partition: int,
    id: str,
    *,
    client: AuthenticatedClient,
    body: LifecycleRequest | Unset = UNSET,
) -> Problem | SettledDeadLetter | None:
    """
    Args:
        partition (int):
        id (str):
        body (LifecycleRequest | Unset): The body of freeze, unfreeze and close: nothing, or `{}`.
            Held to the rules of every other
            body (JSON, no unknown field), so that a request meant for another endpoint is refused,
            not silently applied as a bare transition.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | SettledDeadLetter
    """

    return (
        await asyncio_detailed(
            partition=partition,
            id=id,
            client=client,
            body=body,
        )
    ).parsed
