"""Loads the optbench plugin and the workload fixtures for every test under this root."""

pytest_plugins = ["optbench.plugin", "fixtures.causal_lm", "fixtures.models", "fixtures.data", "fixtures.training"]
