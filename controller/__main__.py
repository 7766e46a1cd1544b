"""`python -m controller`."""

from controller.main import main

main()
