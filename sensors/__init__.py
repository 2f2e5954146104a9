"""Sensors: read state since a cursor, call a pure decision function, emit run requests."""
