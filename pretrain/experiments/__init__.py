"""The data-value engine: decide data by what it does to a small model.

Proxy experiments are cheap training runs of the project's own trainer on a *view* of the
corpus (no copy: :mod:`.view` over per-shard-group token :mod:`.pools`), scored on one fixed
validation set per source and on the eval tasks' continuous likelihood (:mod:`.basis`,
:mod:`.run`). Three uses, each a Dagster asset over ``proxy_runs[experiment]`` partitions:

- **mixture search** (:mod:`.search`): RegMix-style — sample mixtures around the natural token
  distribution, train a proxy on each, regress target on weights (LightGBM, a linear
  baseline), check the fit on held-out proxies, propose the best weights; ``data_mixture`` can
  take them (``weights_from: searched``);
- **admission** (:mod:`.admission`): a new shard group with and without, against its floor (its
  own words shuffled) and clean data of its kind (the basis's reserve), over seeds: its relative
  value, or "cannot see", plus its noise risk and cleaning cost, decided by a policy (admit /
  hold / reject);
- **filter ablations** (:mod:`.ablation`): filter settings compared by proxy loss (DCLM-style).

    from pretrain.experiments import DataVariant, ExperimentSpec, run_experiment
    spec = ExperimentSpec(name="mix-demo-s0", variant=DataVariant(weights={"web": 0.7, "news": 0.3}))
    result = run_experiment(spec, pools, val_packed_dir="art/experiment_basis/validation",
                            tokenizer_uri="art/experiment_basis/tokenizer", out_dir="art/proxy_runs/mix-demo-s0")

| module       | concept                                                          |
|--------------|------------------------------------------------------------------|
| config.py    | ``DataVariant``, ``ExperimentSpec``, proxy recipes (and their ladder) |
| basis.py     | the proxy tokenizer, the validation set, the targets, the reserve |
| yardsticks.py| target sets, what a yardstick holds, when it is unfit to judge by |
| pools.py     | one shard group tokenized once (a packed directory); its floor   |
| view.py      | a variant as row ranges of pools (weights, boosts, epoch caps)   |
| run.py       | train + evaluate one proxy; ``ExperimentResult``; its cost       |
| registry.py  | specs under the artifact root; specs for search/admission/ablation |
| search.py    | Dirichlet sampling, the regressions, the proposal               |
| admission.py | evidence over seeds, noise risk, cleaning cost, the policy      |
| ablation.py  | a shard group re-filtered with an arm's settings                 |
| corpus.py    | ``ExperimentRoot``: the engine's files under one artifact root    |
| evidence.py  | what a search's fit and an admission's decision read             |
| workflow.py  | ``gather`` the root's state, the pure ``next_steps``: what runs next |
| records.py   | one reader for every file the engine reads back                  |
| decisions.py | decisions and reviews as stored; what the mixture leaves out     |

The Dagster side (``pretrain_assets/basis.py``, ``proxy.py``, ``search.py``, ``admission.py``, ``sensors/experiments.py``,
``foundation/experiments.py``) only reads the instance and calls these.
"""

from pretrain.experiments.config import (
    PROXY_RECIPES,
    DataVariant,
    ExperimentSpec,
    ProxyRecipe,
    experiment_name,
)
from pretrain.experiments.run import ExperimentResult, read_result, run_experiment

__all__ = [
    "PROXY_RECIPES",
    "DataVariant",
    "ExperimentResult",
    "ExperimentSpec",
    "ProxyRecipe",
    "experiment_name",
    "read_result",
    "run_experiment",
]
