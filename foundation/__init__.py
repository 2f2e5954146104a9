"""The Dagster side's foundation: what every asset, job and sensor builds on."""
