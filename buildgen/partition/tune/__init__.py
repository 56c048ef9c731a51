"""`buildgen tune`: build each candidate kernel on its own, time it, write tuning records."""
