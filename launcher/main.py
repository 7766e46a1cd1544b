"""virt-launcher-py: one VM's daemon inside its pod (the object graph is launcher.app).

Exit codes: 2 the launcher cannot start (configuration, paths), 3 its libvirtd died.
"""

from __future__ import annotations

from launcher.app import DaemonDied, run
from launcher.config import Config
from launcher.errors import StartupError
from shared import logs
from shared.daemon import run_daemon

NAME = "virt-launcher-py"


def main() -> None:
    config = Config.from_args()
    logs.configure(config.log_format, vmi=config.vmi_key, uid=config.uid)
    run_daemon(NAME, run(config), exit_codes={StartupError: 2, DaemonDied: 3})


if __name__ == "__main__":
    main()
