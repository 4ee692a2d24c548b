from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bucket import Bucket
from ...models.problem import Problem
from ...models.volumes import Volumes
from ...models.window import Window
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    window: Window | Unset = UNSET,
    bucket: Bucket | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_window: str | Unset = UNSET
    if not isinstance(window, Unset):
        json_window = window.value

    params["window"] = json_window

    json_bucket: str | Unset = UNSET
    if not isinstance(bucket, Unset):
        json_bucket = bucket.value

    params["bucket"] = json_bucket

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/stats/volumes",
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | Volumes | None:
    if response.status_code == 200:
        response_200 = Volumes.from_dict(response.json())

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | Volumes]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    window: Window | Unset = UNSET,
    bucket: Bucket | Unset = UNSET,
) -> Response[Problem | Volumes]:
    """
    Args:
        window (Window | Unset): How far back the volumes reach.
        bucket (Bucket | Unset): How wide one bucket is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Volumes]
    """

    kwargs = _get_kwargs(
        window=window,
        bucket=bucket,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    window: Window | Unset = UNSET,
    bucket: Bucket | Unset = UNSET,
) -> Problem | Volumes | None:
    """
    Args:
        window (Window | Unset): How far back the volumes reach.
        bucket (Bucket | Unset): How wide one bucket is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Volumes
    """

    return sync_detailed(
        client=client,
        window=window,
        bucket=bucket,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    window: Window | Unset = UNSET,
    bucket: Bucket | Unset = UNSET,
) -> Response[Problem | Volumes]:
    """
    Args:
        window (Window | Unset): How far back the volumes reach.
        bucket (Bucket | Unset): How wide one bucket is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Volumes]
    """

    kwargs = _get_kwargs(
        window=window,
        bucket=bucket,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    window: Window | Unset = UNSET,
    bucket: Bucket | Unset = UNSET,
) -> Problem | Volumes | None:
    """
    Args:
        window (Window | Unset): How far back the volumes reach.
        bucket (Bucket | Unset): How wide one bucket is.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Volumes
    """

    return (
        await asyncio_detailed(
            client=client,
            window=window,
            bucket=bucket,
        )
    ).parsed
