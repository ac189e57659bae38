"""The run's wiring, below the command line and above the experiments: the config as a run loads
it (`settings`: the core sections and each plug-in's), a run from its plan to its summary
(`runner`), and the order in which teardown and gc reach this machine, the nested hosts and the
[[hosts]] (`cleanup`). `harness.cli` parses arguments and prints; it calls these."""
