"""``python -m asyncapi_client`` is the ``asyncapi-client`` command."""

from ._cli import main

raise SystemExit(main())
