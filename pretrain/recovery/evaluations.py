"""Which checkpoints are evaluated next: never one a rollback abandoned, at most N per branch.

``eval_sensor`` keeps an :class:`EvalQueue` as its cursor (the checkpoints committed since it
last read, not yet requested) and asks :func:`plan_evaluations` each tick::

    queue = EvalQueue.from_json(cursor).add([("b00-s000000010", "a1b2..."), ...], after=123)
    plan = plan_evaluations(queue.pending, in_flight={"b00": 1}, rollbacks=decisions, limit=1)
    plan.requests    # evaluate these now (oldest first, at most ``limit`` per branch in flight)
    plan.waiting     # keep them for a later tick: their branch is at its limit
    plan.abandoned   # key -> why it is never evaluated

A rollback decision on branch ``b`` to the checkpoint at step ``s`` abandons every checkpoint of
``b`` after ``s``: the campaign continues on a new branch, and an evaluation of the old branch's
later weights would only queue ahead of (and compete with) the resumed training. Checkpoints up
to ``s`` are evaluated as before. The queue is only a saving: a cursor reset reads every
checkpoint again, and the sensor drops those already evaluated (their reports are current).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pretrain.checkpoint.dcp import checkpoint_key, parse_checkpoint_key
from pretrain.errors import DataError
from pretrain.recovery.policy import Decision

Pending = tuple[str, str | None]  # (checkpoint key, the data version of its materialization)


@dataclass(frozen=True)
class EvalQueue:
    """The sensor's cursor: the storage id read up to and the checkpoints still to request."""

    after: int | None = None
    pending: tuple[Pending, ...] = ()

    def add(self, found: Iterable[Pending], after: int | None) -> EvalQueue:
        """``found`` (oldest first) joins the queue; a key found again replaces its old entry
        (its new data version is what must be evaluated), keeping its place at the end."""
        entries = dict(self.pending)
        for key, version in found:
            entries.pop(key, None)
            entries[key] = version
        return EvalQueue(
            after=after if after is not None else self.after, pending=tuple(entries.items())
        )

    def to_json(self) -> str:
        return json.dumps({"after": self.after, "pending": [list(p) for p in self.pending]})

    @classmethod
    def from_json(cls, text: str | None) -> EvalQueue:
        """The queue :meth:`to_json` wrote; the bare storage id of the sensor's first version;
        an empty queue for ``None``. Any other text is a ``DataError``."""
        if not text:
            return cls()
        if text.isdigit():
            return cls(after=int(text))
        try:
            data = json.loads(text)
            after = data["after"]
            pending = tuple((str(k), None if v is None else str(v)) for k, v in data["pending"])
            if after is not None and not isinstance(after, int):
                raise TypeError(f"after={after!r} is not a storage id")
        except (TypeError, ValueError, KeyError) as exc:
            raise DataError(
                f"eval_sensor cursor {text[:80]!r} is not an evaluation queue: {exc}"
            ) from exc
        return cls(after=after, pending=pending)


def abandonment(key: str, rollbacks: Sequence[Decision]) -> str | None:
    """Why the checkpoint ``key`` is never evaluated (a rollback left its branch at an earlier
    step), or None."""
    branch, step = parse_checkpoint_key(key)
    for decision in rollbacks:
        if (
            decision.action == "rollback"
            and decision.branch == branch
            and decision.checkpoint_step is not None
            and step > decision.checkpoint_step
        ):
            target = checkpoint_key(branch, decision.checkpoint_step)
            return (
                f"abandoned: the spike at step {decision.spike_step} rolled branch {branch} back "
                f"to {target} and training continued on {decision.new_branch}"
            )
    return None


@dataclass(frozen=True)
class EvalPlan:
    requests: tuple[Pending, ...] = ()
    waiting: tuple[Pending, ...] = ()
    abandoned: dict[str, str] = field(default_factory=dict)


def plan_evaluations(
    pending: Sequence[Pending],
    *,
    in_flight: Mapping[str, int],
    rollbacks: Sequence[Decision],
    limit: int,
) -> EvalPlan:
    """Split ``pending`` (oldest first) into what to request now, what waits, what is abandoned.

    ``in_flight``: branch -> evaluations already queued or running; a branch gets at most
    ``limit`` in flight, its oldest checkpoints first."""
    requests: list[Pending] = []
    waiting: list[Pending] = []
    abandoned: dict[str, str] = {}
    slots = dict(in_flight)
    for key, version in pending:
        reason = abandonment(key, rollbacks)
        if reason is not None:
            abandoned[key] = reason
            continue
        branch, _ = parse_checkpoint_key(key)
        if slots.get(branch, 0) < limit:
            slots[branch] = slots.get(branch, 0) + 1
            requests.append((key, version))
        else:
            waiting.append((key, version))
    return EvalPlan(requests=tuple(requests), waiting=tuple(waiting), abandoned=abandoned)
