"""One address in front of the control-plane replicas, as a Kubernetes Service is: each new TCP
connection goes to the next replica in turn; a replica that refuses connections (killed) is
skipped. Run as its own process by bench/fleet.py, so its CPU is not the bench's or a server's.

    python bench/fleet_proxy.py LISTEN_PORT BACKEND_PORT [BACKEND_PORT ...]
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def main(listen: int, backends: list[int]) -> None:
    turn = itertools.cycle(range(len(backends)))

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        first = next(turn)
        for i in range(len(backends)):
            port = backends[(first + i) % len(backends)]
            try:
                server_reader, server_writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                continue
        else:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main(int(sys.argv[1]), [int(p) for p in sys.argv[2:]]))
