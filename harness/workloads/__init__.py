"""One module per workload tool: renders its job, runs it in a guest or on a host, parses its raw output."""
