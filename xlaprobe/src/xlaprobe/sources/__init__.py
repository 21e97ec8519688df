"""Sources of Programs: the fuzzer, the model zoo, user functions and stored artifacts."""
