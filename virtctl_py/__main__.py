"""``python -m virtctl_py``."""

from virtctl_py.main import main

main()
