"""The one JSON number encoding: non-finite floats as "inf" / "-inf" / "nan", read back by every reader,
and files written before it (a NaN label stored as "inf") still read."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from forge.disk.io import as_float, json_line, json_num
from forge.genomes.labels import Label
from forge.spaces.space import load_space


@pytest.mark.parametrize("x, text", [(1.5, 1.5), (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan"),
                                     (np.float32(2.0), 2.0)])
def test_every_float_round_trips(x, text):
    assert json_num(x) == text
    back = as_float(json.loads(json.dumps(json_num(x))))
    assert (math.isnan(back) and math.isnan(x)) or back == float(x)


def test_readers_take_old_spellings_and_refuse_text():
    assert as_float("Infinity") == math.inf and as_float(" -INF ") == -math.inf
    assert math.isnan(as_float(None)) and as_float(None, math.inf) == math.inf
    assert math.isnan(as_float("3.1x")) and math.isnan(as_float(True))
    assert json_line({"b": np.int64(2), "a": np.arange(2)}) == '{"a": [0, 1], "b": 2}'


def test_a_nan_label_is_written_as_nan_and_an_old_inf_still_reads():
    g = load_space("iha-tiny").sample(1, np.random.default_rng(0))[0]
    lab = Label(g, math.nan, {"protocol": "test"}, reason="non-finite training loss (nan)")
    line = lab.to_json()
    assert json.loads(line)["label"] == "nan" and math.isnan(Label.from_json(line).label)
    old = json.loads(line) | {"label": "inf"}
    assert Label.from_json(json.dumps(old)).label == math.inf
    with pytest.raises(ValueError, match="not a number"):
        Label.from_json(json.dumps(old | {"label": "3.1"}))
