"""Run by tests/operations/test_worker_fork_server.py in a process the fork server forked: prints what the process
was given (its environment, folder and arguments) and what it inherited, then sleeps as long as it is told."""

import json
import os
import sys
import time

if __name__ == "__main__":
    print(
        json.dumps(
            {
                "argv": sys.argv[1:],
                "cwd": os.getcwd(),
                "probe": os.environ.get("PROBE"),
                "environment": sorted(os.environ),
                "torch": "torch" in sys.modules,
                "settings": "subtlebench.settings" in sys.modules,
            }
        ),
        flush=True,
    )
    time.sleep(float(sys.argv[1]))
    sys.exit(int(sys.argv[2]))
