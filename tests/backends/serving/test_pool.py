"""LLMShare Table I space, the device template's performance numbers and the die + HBM cost model."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from backends.serving.pool import (FIELDS, PoolError, PoolSpace, design, device_cost, device_perf, die_area_mm2,
                                   pool_cost, total_memory_gb)
from forge.runtime.config import conf_dir


def load(group: str, name: str) -> dict:
    return yaml.safe_load((conf_dir() / "serve" / group / f"{name}.yaml").read_text())


COST = load("cost", "n4-hbm3")
H100 = design(load("baseline", "h100-8gpu")["prefill"])


def test_table1_space_size():
    s = PoolSpace.from_config(load("space", "llmshare"))
    assert s.size == 29_491_200 and s.size ** 2 == pytest.approx(8.7e14, rel=0.01)  # "nearly 9 x 10^14"
    assert list(s.sizes) == [10, 4, 4, 6, 10, 6, 8, 4, 4, 4]


def test_unknown_or_missing_pool_field_is_an_error():
    with pytest.raises(PoolError, match="pool field 'hbm_tb' is unknown; allowed: servers"):
        PoolSpace.from_config({**load("space", "tiny"), "hbm_tb": [1]})
    with pytest.raises(PoolError, match="lacks field 'lanes'"):
        design({k: v for k, v in load("baseline", "h100-8gpu")["decode"].items() if k != "lanes"})


def test_h100_template_numbers_and_calibrated_die():
    p = device_perf(H100, COST)
    assert p["bw"] == pytest.approx(3.352e12) and p["link"] == pytest.approx(450e9)
    assert p["flops"] == pytest.approx(132 * 4 * 256 * 2 * 1.6e9)
    assert die_area_mm2(H100, COST) == pytest.approx(814, rel=0.05)  # H100's die, which the constants target


@pytest.mark.parametrize("field", ["hbm_gb", "cores", "array_height", "global_buffer_mb", "links"])
def test_cost_grows_with_every_resource(field):
    bigger = H100.copy()
    bigger[FIELDS.index(field)] *= 2
    assert device_cost(bigger, COST) > device_cost(H100, COST)


def test_yield_makes_large_dies_superlinear():
    s = PoolSpace.from_config(load("space", "llmshare"))
    big = s.decode((s.sizes - 1)[None, :])
    ratio_area = die_area_mm2(big, COST)[0] / die_area_mm2(H100, COST)
    die_cost = lambda v: device_cost(v, COST) - v[..., FIELDS.index("hbm_gb")] * COST["hbm_usd_per_gb"]  # noqa: E731
    assert die_cost(big)[0] / die_cost(H100) > ratio_area


def test_pool_cost_and_total_memory_scale_with_servers():
    two = H100.copy()
    two[FIELDS.index("servers")] = 2
    assert pool_cost(two, COST) == pytest.approx(2 * pool_cost(H100, COST))
    assert total_memory_gb(H100, two) == pytest.approx(4 * 80 + 8 * 80)
