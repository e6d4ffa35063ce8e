"""One of several workers resuming the same write steps at the same moment, on one store.

    python tests/store/claim_worker.py LOCATION OUT COUNT WORKER

For calls call_0 .. call_{COUNT-1} of one AI message it runs `core.threads.ledger.run_write_once`,
the code the graph's tools node runs for a write, whose write appends "call_N WORKER" to OUT
(slowly, so the workers overtake each other). It prints `ready` once the store is open,
starts at the line `go` on its input, and prints how many writes it ran itself.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from langchain_core.messages import ToolMessage  # noqa: E402

from core.threads.ledger import run_write_once  # noqa: E402
from store import open_store  # noqa: E402

WRITE_SECONDS = 0.01


async def main(location: str, out: Path, count: int, worker: str) -> None:
    async with open_store(location) as store:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        ran = 0
        for n in range(count):
            call = {"id": f"call_{n}", "name": "write_file", "args": {"path": "log.txt"}}

            async def write(call_id: str = call["id"]) -> ToolMessage:
                nonlocal ran
                ran += 1
                with out.open("a") as file:
                    file.write(f"{call_id} {worker}\n")
                await asyncio.sleep(WRITE_SECONDS)
                return ToolMessage(content="ok", tool_call_id=call_id)

            await run_write_once(store, "t", "ai-1", call, call["args"], write)
        print(f"ran {ran}", flush=True)


if __name__ == "__main__":
    location, out, count, worker = sys.argv[1:5]
    asyncio.run(main(location, Path(out), int(count), worker))
