"""Model-based quality: a DCLM-style fastText classifier, reference-good text vs the web pool.

:mod:`pretrain.quality.classifier` trains and saves it; the filter stage loads it and writes
its probability of "reference-like" text into the ``quality_score`` column.
"""
