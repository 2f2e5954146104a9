"""pretrain: the library behind the Dagster pretraining system.

Plain Python + torch + data libraries; it never imports dagster. Every stage of a
pretraining campaign (harvest/read raw text, filter, dedup, mix, tokenize, pack, train,
evaluate, decide on recovery) is a function here that the Dagster layer calls.
"""

__version__ = "0.1.0"
