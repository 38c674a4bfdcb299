"""The fixture price catalog: unit and functional tests price against it, not the bundled file.

The bundled ``data/prices.json`` follows AWS (``costguard prices refresh`` rewrites it), so
a test that asserted its figures would break on a routine refresh. The fixture's rates
stay put; ``tests/unit/test_bundled_catalog.py`` is the one test of the bundled data.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from costguard.adapters.catalog import load_catalog
from costguard.domain.pricing import PriceCatalog

FIXTURE_CATALOG_PATH = Path(__file__).resolve().parent.parent / "fixtures" / "prices.json"


@cache
def fixture_catalog() -> PriceCatalog:
    """The small, stable catalog every priced test uses (loaded once, through the real loader)."""
    return load_catalog(FIXTURE_CATALOG_PATH)
