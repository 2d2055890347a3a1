"""Every place we change vLLM's behaviour: the scoped, reversible override helper and the written census of each
divergence (``manifest``), from which the hook-point tests are driven."""
