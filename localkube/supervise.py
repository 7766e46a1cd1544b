"""A control-plane component kept running as a real host keeps it: restarted on exit.

`python -m localkube.supervise -- ARGV...` runs ARGV and, whenever it exits, starts it
again after a backoff (1 s, doubling to 30 s; back to 1 s once a run lasted a minute), as
systemd's Restart=always or the kubelet's static pods would. SIGTERM, SIGINT or SIGHUP
stop it: the signal goes to the component, the supervisor waits for it and exits with its
code. The component shares the supervisor's session and process group, so stopping the
group (localkube.procs.stop_process) stops both; SIGKILL of the component alone is a
crash, and it comes back.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from types import FrameType


@dataclass(slots=True)
class Supervisor:
    argv: list[str]
    initial: float = 1.0
    maximum: float = 30.0
    reset_after: float = 60.0
    stopping: bool = False
    child: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self) -> int:
        backoff = self.initial
        code = 0
        while not self.stopping:
            started = time.monotonic()
            self.child = subprocess.Popen(self.argv)
            code = self.child.wait()
            if self.stopping:
                break
            if time.monotonic() - started >= self.reset_after:
                backoff = self.initial
            self.restarts += 1
            _event("component_exited", code=code, restart_in=backoff, restarts=self.restarts)
            self._sleep(backoff)
            backoff = min(backoff * 2, self.maximum)
        return code

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(0.1)


def _event(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "supervisor": True, **fields}), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="localkube.supervise", description=__doc__)
    parser.add_argument("--backoff", type=float, default=1.0, help="first restart delay (s)")
    parser.add_argument("--backoff-max", type=float, default=30.0)
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="-- the component's command")
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        parser.error("no command to supervise")
    sup = Supervisor(command, initial=args.backoff, maximum=args.backoff_max)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, sup.on_signal)
    sys.exit(sup.run())


if __name__ == "__main__":
    main()
