"""Executors: the data stages' steps on a Ray cluster's step pool, runs forked from one server."""
