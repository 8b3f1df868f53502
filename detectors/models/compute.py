"""How the models use the CPU: one OpenMP thread per fit and prediction.

scikit-learn's histogram gradient boosting spreads over every core with OpenMP; on a shared
machine whose cores are busy, its threads spin waiting for each other and a 0.6 s fit takes 20 s
(measured on this project's 2-core machine). One thread is never far from the best there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["one_thread"]


@contextmanager
def one_thread() -> Iterator[None]:
    """Limit native thread pools (OpenMP, BLAS) to one thread inside the block."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield
