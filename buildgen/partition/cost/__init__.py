"""The cost policy: tuning records, the analytic fallback, and the cheapest-cover search."""
