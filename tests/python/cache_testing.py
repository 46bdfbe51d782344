"""Helpers for tests that give themselves an empty cache but reuse the session's
precompiled prelude (building one takes about a minute): with the `shared_pch` fixture of
conftest.py."""

from pathlib import Path

from dynexpr import cache, cxx


def link_pch(layout_dir: Path, pch_dir: Path) -> None:
    """Makes the cache whose layout directory is layout_dir use pch_dir's prelude."""
    target = layout_dir / "pch" / cxx.pch_key()
    if not target.exists() and pch_dir.parent.name == "pch":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(pch_dir, target_is_directory=True)


def use_cache(root: Path, monkeypatch, pch_dir: Path) -> None:
    """Points this process (and its subprocesses) at the cache `root`, sharing pch_dir."""
    monkeypatch.setenv("DYNEXPR_CACHE_DIR", str(root))
    cache.reset()
    link_pch(cache.cache_dir(), pch_dir)
