"""`python -m importer`."""

from importer.main import main

main()
