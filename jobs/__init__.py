"""Jobs: asset jobs per stage, the training job, and the Pipes event sink for the trainer.

Kept import-light on purpose: ``jobs.pipes_sink`` is imported inside the torchrun workers.
"""
