"""`forge-verify run=<dir>`: the thin Hydra main around `search.verify.run` (conf/forge-verify.yaml).

    forge-verify run=outputs/search/<stamp>                    # 8 front picks + 8 random controls
    forge-verify run=<dir> k=4 control=4 refit=true            # then: forge-search evaluator.predictor=<dir>/verify/surrogate-verified
"""
from __future__ import annotations

import json

import hydra
from omegaconf import DictConfig

from forge.config import CONFIG_PATH, user_errors


@user_errors("forge-verify")  # outside Hydra too: its config errors exit 2 with one line
@hydra.main(config_path=CONFIG_PATH, config_name="forge-verify", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from search.verify import brief, run

    with user_errors("forge-verify"):
        print(json.dumps(brief(run(cfg)), indent=2))


if __name__ == "__main__":
    main()
