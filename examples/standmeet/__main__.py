"""``python -m standmeet`` (from examples/): same as main.py."""

from standmeet.main import main

raise SystemExit(main())
