#!/bin/sh
# Slurm epilog: a node that fails its health check after a job is drained before it takes another.
exec sh "$(dirname "$0")/healthcheck.sh" epilog
