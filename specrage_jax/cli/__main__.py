"""python -m specrage_jax.cli"""

from specrage_jax.cli import main

raise SystemExit(main())
