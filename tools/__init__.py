"""Development tools of the repository (not part of the installed package): ``sync_gen``
writes SyncClient's methods from Client's code. Run each as ``python tools/NAME.py``."""
