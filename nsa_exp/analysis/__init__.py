"""Analysis of records: statistics, comparisons, derived figures (pure: numpy, scipy, pandas)."""
