"""Thread count (environment variables, set/get_num_threads) and allocation limits."""

import os
import subprocess
import sys

import ferrograd as fg
import pytest


def _threads_in_child(env_extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FERROGRAD_NUM_THREADS", "RAYON_NUM_THREADS")
    }
    env.update(env_extra)
    out = subprocess.run(
        [sys.executable, "-c", "import ferrograd as fg; print(fg.get_num_threads())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def test_ferrograd_num_threads_env_var_sets_the_thread_count():
    assert _threads_in_child({"FERROGRAD_NUM_THREADS": "3"}) == 3


def test_rayon_num_threads_is_the_fallback_and_ferrograd_wins():
    assert _threads_in_child({"RAYON_NUM_THREADS": "5"}) == 5
    assert _threads_in_child({"RAYON_NUM_THREADS": "5", "FERROGRAD_NUM_THREADS": "2"}) == 2


def test_set_num_threads_round_trips_and_rejects_non_positive():
    before = fg.get_num_threads()
    try:
        fg.set_num_threads(3)
        assert fg.get_num_threads() == 3
        with pytest.raises(RuntimeError, match="positive"):
            fg.set_num_threads(0)
        assert fg.get_num_threads() == 3
    finally:
        fg.set_num_threads(before)


def test_huge_allocations_raise_instead_of_aborting():
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        fg.zeros(10**7, 10**7)
    with pytest.raises(RuntimeError, match="can't allocate memory|overflows"):
        fg.randn(2**40, 2**40)
    # Sizes a lazily-mapping allocator would grant and the OOM killer would then collect.
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        fg.randn(10**7, 10**7)
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        fg.arange(0, 10**14)
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        fg.full((10**7, 10**7), 2.0)
    a = fg.ones(10**6, 1).expand(10**6, 10**7)
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        a.contiguous()
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        a * 0.5  # a map over the expanded view
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        a.exp()
    with pytest.raises(RuntimeError, match="can't allocate memory"):
        fg.ones(10**7, 1) + fg.ones(1, 10**7)
    assert fg.ones(3).sum().item() == 3.0  # still usable afterwards
