"""The schema-driven API fuzzer's test-bed code (issue 35): never part of the product wheel."""
