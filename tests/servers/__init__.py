"""Real servers for the tests, started by a fixture and stopped by PID."""
