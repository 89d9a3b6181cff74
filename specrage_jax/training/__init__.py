"""4. Training: the jitted steps, the loop and its schedule, sharding, data-aware defaults, the
pre-training stages and orbax checkpoints."""
