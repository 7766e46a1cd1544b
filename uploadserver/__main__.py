"""`python -m uploadserver`."""

from uploadserver.main import main

main()
