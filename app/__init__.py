"""The application: the one Definitions ``dagster dev`` loads, the ``pretrain`` command, the demo."""
