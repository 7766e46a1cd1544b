"""The test-bed CSI driver's one door to grpc: generic unary handlers over this package's
messages, a server on a unix socket, and a client call. A CsiError becomes the status code
it carries; anything else is INTERNAL with its text (the sidecars retry)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc
import structlog

from localkube.csi.errors import Code, CsiError

log = structlog.get_logger()
GRACE = 5.0
R = TypeVar("R")
Table = dict[str, tuple[type[Any], Callable[[Any], Awaitable[Any]]]]


def _encode(message: Any) -> bytes:
    return bytes(message.encode())


def handler(service: str, table: Table) -> Any:
    """A generic handler serving `table`'s methods of the gRPC service `service`."""

    def unary(request_type: type[Any], call: Callable[[Any], Awaitable[Any]], name: str) -> Any:
        async def handle(request: Any, context: Any) -> Any:
            try:
                return await call(request)
            except CsiError as exc:
                log.info("csi_call_refused", method=name, code=exc.code, reason=exc.message)
                await context.abort(getattr(grpc.StatusCode, exc.code.value), exc.message)
            except Exception as exc:
                log.exception("csi_call_failed", method=name)
                await context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=request_type.decode, response_serializer=_encode
        )

    methods = {name: unary(req, call, name) for name, (req, call) in table.items()}
    return grpc.method_handlers_generic_handler(service, methods)


@contextlib.asynccontextmanager
async def serving(path: Path, *handlers: Any) -> AsyncIterator[None]:
    """A gRPC server on the unix socket `path` for the block; the socket removed after."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(handlers)
    if not server.add_insecure_port(f"unix://{path}"):
        raise OSError(f"cannot listen on {path}")
    await server.start()
    log.info("csi_serving", socket=str(path))
    try:
        yield
    finally:
        await server.stop(GRACE)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def call(endpoint: Path, method: str, request: Any, reply: type[R], *, timeout: float) -> R:
    """One unary call of `method` ("/pkg.Service/Method") on the unix socket `endpoint`;
    CsiError with the status code on failure."""
    async with grpc.aio.insecure_channel(f"unix://{endpoint}") as channel:
        stub = channel.unary_unary(
            method,
            request_serializer=_encode,
            response_deserializer=reply.decode,  # type: ignore[attr-defined]
        )
        try:
            result: R = await stub(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            code = Code.__members__.get(exc.code().name, Code.INTERNAL)
            raise CsiError(code, exc.details() or exc.code().name) from None
        return result
