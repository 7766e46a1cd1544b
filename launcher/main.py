"""virt-launcher-py: one VM's daemon inside its pod (its start: launcher.app).

Exit codes: 2 the launcher cannot start (configuration, paths), 3 its libvirtd died.
"""

from __future__ import annotations

import time

import structlog

from launcher.app import run
from launcher.config import Config
from launcher.errors import DaemonDied, StartupError
from shared import logs
from shared.daemon import run_daemon
from shared.proctime import process_started_at

NAME = "virt-launcher-py"


def main() -> None:
    config = Config.from_args()
    logs.configure(config.log_format, vmi=config.vmi_key, uid=config.uid)
    # The start-up benchmark's first marks: the process's start, and this line's time
    # (interpreter and the start path's imports done).
    structlog.get_logger("launcher").info(
        "launcher_process", started_at=process_started_at(), cpu_s=round(time.process_time(), 3)
    )
    run_daemon(NAME, run(config), exit_codes={StartupError: 2, DaemonDied: 3})


if __name__ == "__main__":
    main()
