"""`python -m exportserver`."""

from exportserver.main import main

main()
