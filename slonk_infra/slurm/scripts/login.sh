#!/bin/sh
# Login entrypoint: sshd in the foreground. Host keys are created on first start; users come from
# the image or a directory service configured in it.
set -eu
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
ssh-keygen -A
mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e
