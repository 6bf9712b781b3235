#!/bin/sh
# In-cluster NFS server for clusters without a managed filesystem (local stacks).
set -eu
mkdir -p /exports
echo "/exports *(rw,fsid=0,insecure,no_root_squash,no_subtree_check)" > /etc/exports
rpcbind || true
rpc.nfsd 8
exportfs -ra
exec rpc.mountd --foreground
