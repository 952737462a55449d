"""A wire fuzzer for both protocols against real broker processes (issue 42)."""
