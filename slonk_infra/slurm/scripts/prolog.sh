#!/bin/sh
# Slurm prolog: refuse the job on a node that fails its health check; Slurm then drains the node
# with this failure as the reason and requeues the job elsewhere.
exec sh "$(dirname "$0")/healthcheck.sh" prolog
