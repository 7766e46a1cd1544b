"""``python -m launcher``."""

from launcher.main import main

main()
