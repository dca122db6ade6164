"""``python -m pdd_tasks.tools.gguf_server``: the documented command of lm-eval-pdd's completions server
for a GGUF model (docs/backends.md); the server is :mod:`pdd_tasks.tools.servers.gguf_server`."""

import sys

from pdd_tasks.tools.servers.gguf_server import main


if __name__ == "__main__":
    sys.exit(main())
