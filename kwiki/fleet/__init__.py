"""A fleet: `kwiki verify --ray ADDRESS` runs the same plan on a Ray cluster (the optional `kwiki[fleet]` extra).

cluster: connecting (bounded, with a clear error) and the GPU models the nodes advertise; tasks: the functions a
Ray worker runs (a build, a probe of its GPU, a run); executor: the pipeline's Executor for one GPU model; verify:
one pipeline run per GPU model of the cluster. Nothing here is imported on the local path, and this package imports
Ray only inside the functions that talk to the cluster.
"""
