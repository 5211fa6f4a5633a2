"""The test corpus: forged documents and bad inputs (see README.md)."""
