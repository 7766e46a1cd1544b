"""The one door to grpc: the device-plugin API's two services over unix sockets.

Both services are registered as grpc generic handlers with this package's own
(de)serialisers (messages.py), one table entry per method. Servicers implement the
Protocols below in plain typed Python and raise this package's errors; the door maps them
to gRPC status codes and back (INVALID_ARGUMENT for a refused registration or allocation,
anything else arrives as `CallFailed`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, Self

# grpc core installs fork handlers unless told otherwise, and the node agent forks a process
# per container while gRPC threads run: now and then the child then dies of SIGSEGV before
# it execs. No forked child here uses gRPC, so fork support is off (read at grpc's import;
# the environment can still say otherwise).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc

from shared.deviceplugin.errors import AllocationRefused, CallFailed, RegistrationRefused
from shared.deviceplugin.messages import (
    API_VERSION,
    AllocateRequest,
    AllocateResponse,
    DevicePluginOptions,
    Empty,
    ListAndWatchResponse,
    PreferredAllocationRequest,
    PreferredAllocationResponse,
    PreStartContainerRequest,
    PreStartContainerResponse,
    RegisterRequest,
)

REGISTRATION = f"{API_VERSION}.Registration"
DEVICE_PLUGIN = f"{API_VERSION}.DevicePlugin"


class RegistrationService(Protocol):
    """The kubelet's side: accept (or refuse with RegistrationRefused) a plugin."""

    async def register(self, request: RegisterRequest) -> None: ...


class PluginService(Protocol):
    """A device plugin's side."""

    def options(self) -> DevicePluginOptions: ...

    def list_and_watch(self) -> AsyncIterator[ListAndWatchResponse]: ...

    async def allocate(self, request: AllocateRequest) -> AllocateResponse: ...

    async def preferred_allocation(
        self, request: PreferredAllocationRequest
    ) -> PreferredAllocationResponse: ...

    async def pre_start(self, request: PreStartContainerRequest) -> PreStartContainerResponse: ...


def _target(path: Path) -> str:
    return f"unix://{path}"


def _encode(message: Any) -> bytes:
    return bytes(message.encode())


# -- servers ---------------------------------------------------------------------------------


def _unary(
    request_type: Any,
    call: Callable[[Any], Awaitable[Any]],
    *,
    refused: tuple[type[Exception], ...] = (),
) -> Any:
    async def handle(request: Any, context: Any) -> Any:
        try:
            return await call(request)
        except refused as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=request_type.decode, response_serializer=_encode
    )


def registration_handler(service: RegistrationService) -> Any:
    async def register(request: RegisterRequest) -> Empty:
        await service.register(request)
        return Empty()

    return grpc.method_handlers_generic_handler(
        REGISTRATION,
        {"Register": _unary(RegisterRequest, register, refused=(RegistrationRefused,))},
    )


def plugin_handler(service: PluginService) -> Any:
    async def options(_: Empty) -> DevicePluginOptions:
        return service.options()

    async def list_and_watch(_: Empty, context: Any) -> AsyncIterator[ListAndWatchResponse]:
        async for response in service.list_and_watch():
            yield response

    table = {
        "GetDevicePluginOptions": _unary(Empty, options),
        "ListAndWatch": grpc.unary_stream_rpc_method_handler(
            list_and_watch, request_deserializer=Empty.decode, response_serializer=_encode
        ),
        "Allocate": _unary(AllocateRequest, service.allocate, refused=(AllocationRefused,)),
        "GetPreferredAllocation": _unary(
            PreferredAllocationRequest, service.preferred_allocation, refused=(AllocationRefused,)
        ),
        "PreStartContainer": _unary(
            PreStartContainerRequest, service.pre_start, refused=(AllocationRefused,)
        ),
    }
    return grpc.method_handlers_generic_handler(DEVICE_PLUGIN, table)


class UnixServer:
    """One gRPC server on one unix socket; `stop` ends its calls and removes the socket."""

    def __init__(self, path: Path, handler: Any) -> None:
        self.path = path
        self._handler = handler
        self._server: Any = None
        self.inode: tuple[int, int] | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket of a previous run
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((self._handler,))
        try:
            bound = server.add_insecure_port(_target(self.path))
        except RuntimeError as exc:  # grpc's way of saying the bind failed
            raise OSError(f"cannot listen on {self.path}: {exc}") from None
        if not bound:
            raise OSError(f"cannot listen on {self.path}")
        await server.start()
        self._server = server
        st = os.stat(self.path)
        self.inode = (st.st_dev, st.st_ino)

    async def stop(self, grace: float) -> None:
        """Cancel calls still running after `grace` seconds; remove our socket (only ours)."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
        if self.inode is not None and socket_identity(self.path) == self.inode:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self.inode = None


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a socket file, None when absent: a recreated file differs."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


# -- clients ---------------------------------------------------------------------------------


def _failed(method: str, exc: Any) -> Exception:
    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        if method == "Register":
            field, _, reason = details.partition(": ")
            return RegistrationRefused(field, reason)
        return AllocationRefused(details)
    return CallFailed(method, code.name, details)


async def register(kubelet_socket: Path, request: RegisterRequest, *, timeout: float) -> None:
    """Register a plugin with the kubelet listening on `kubelet_socket`."""
    async with grpc.aio.insecure_channel(_target(kubelet_socket)) as channel:
        call = channel.unary_unary(
            f"/{REGISTRATION}/Register",
            request_serializer=_encode,
            response_deserializer=Empty.decode,
        )
        try:
            await call(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise _failed("Register", exc) from None


class PluginClient:
    """The kubelet's connection to one plugin's socket."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._channel: Any = None

    async def __aenter__(self) -> Self:
        self._channel = grpc.aio.insecure_channel(_target(self.path))
        return self

    async def __aexit__(self, *exc: object) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close(grace=None)

    async def _unary(self, method: str, request: Any, response_type: Any, timeout: float) -> Any:
        call = self._channel.unary_unary(
            f"/{DEVICE_PLUGIN}/{method}",
            request_serializer=_encode,
            response_deserializer=response_type.decode,
        )
        try:
            return await call(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise _failed(method, exc) from None

    async def options(self, *, timeout: float) -> DevicePluginOptions:
        result: DevicePluginOptions = await self._unary(
            "GetDevicePluginOptions", Empty(), DevicePluginOptions, timeout
        )
        return result

    async def allocate(self, request: AllocateRequest, *, timeout: float) -> AllocateResponse:
        result: AllocateResponse = await self._unary("Allocate", request, AllocateResponse, timeout)
        return result

    async def list_and_watch(self) -> AsyncGenerator[ListAndWatchResponse, None]:
        """The plugin's device lists as they change, for as long as the plugin serves.

        No deadline: this is a watch, and it ends when the plugin's socket goes away.
        """
        call = self._channel.unary_stream(
            f"/{DEVICE_PLUGIN}/ListAndWatch",
            request_serializer=_encode,
            response_deserializer=ListAndWatchResponse.decode,
        )
        stream = call(Empty())
        try:
            async for response in stream:
                yield response
        except grpc.aio.AioRpcError as exc:
            raise _failed("ListAndWatch", exc) from None
        finally:
            stream.cancel()
