"""The checks: every document kind judged against its schema and, per kind (:mod:`.kinds`), every
derived number recomputed from its source; ``validate`` (:mod:`.validate`) and ``load_validated``."""
