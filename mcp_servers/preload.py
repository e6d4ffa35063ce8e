"""What serving imports on first use, imported before the kernel sandbox closes its files.

Once restricted (`kernel_sandbox.py`), the server can read nothing outside its roots, the
Python modules it has not imported yet included: an import on a tool's path would fail there
and then. The server's own modules import everything at their top; these are the modules the
libraries it runs on import only when first used, and the one file the C library reads late.
Running the server's whole suite under the restriction is what finds them (an import that
fails there fails its test).
"""

from __future__ import annotations

import importlib
import time

LAZY_MODULES = (
    "anyio._backends._asyncio",  # anyio.run picks its backend by name
)


def import_what_serving_needs() -> None:
    for name in LAZY_MODULES:
        importlib.import_module(name)
    # glibc reads /etc/localtime at the first local time it gives (a log line's), then keeps it.
    time.localtime()
