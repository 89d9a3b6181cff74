"""One process of a multi-process `fit` on digits (run by tests/test_distributed.py):
python fit_worker.py COORDINATOR NUM_PROCESSES PROCESS_ID OUT.npz [EPOCHS]

Joins the process group, trains with the 'data' mesh over every process's devices and writes
the trained parameters, R^-1 and the history from process 0 (host-local copies, NumPy only)."""

from __future__ import annotations

import json
import sys

from specrage_jax.training.distributed import ProcessGroup, initialize


def main(argv: list[str]) -> None:
    coordinator, count, index, out = argv[0], int(argv[1]), int(argv[2]), argv[3]
    epochs = int(argv[4]) if len(argv) > 4 else 2
    group = ProcessGroup(coordinator=coordinator, num_processes=count, process_id=index)
    initialize(group)  # before anything asks JAX for its devices

    import jax
    import numpy as np

    from specrage_jax.training.distributed import host_local, is_primary
    from tests.mp_workers.digits_fit import train_digits

    state, history = train_digits(epochs=epochs, mesh=True)
    local = host_local(state)
    if is_primary():
        leaves = {f"param_{i}": np.asarray(a) for i, a in enumerate(jax.tree.leaves(local.params))}
        np.savez(out, r_inv=np.asarray(local.r_inv), **leaves)
        with open(out + ".json", "w") as f:
            json.dump(
                {"history": history.as_dict(), "processes": jax.process_count(), "devices": jax.device_count()}, f
            )


if __name__ == "__main__":
    main(sys.argv[1:])
