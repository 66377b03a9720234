"""`forge-verify run=<dir>`: the thin Hydra main around `search.verify.run` (conf/forge-verify.yaml).

    forge-verify run=outputs/search/<stamp>                    # 8 front picks + 8 random controls
    forge-verify run=<dir> k=4 control=4 refit=true            # then: forge-search evaluator.predictor=<dir>/verify/surrogate-verified
"""
from __future__ import annotations

import json

from omegaconf import DictConfig

from forge.config import forge_main


@forge_main("forge-verify")
def main(cfg: DictConfig) -> None:
    from search.verify import brief, run

    print(json.dumps(brief(run(cfg)), indent=2))


if __name__ == "__main__":
    main()
