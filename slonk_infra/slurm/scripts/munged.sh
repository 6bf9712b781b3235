#!/bin/sh
# munged sidecar. The key arrives as a Secret file owned by root; munged refuses a key it does not
# own or that others can read, so it is copied with the right owner into a private tmpfs first.
set -eu
install -d -o munge -g munge -m 0700 /run/munge-key
install -o munge -g munge -m 0400 /etc/munge-secret/munge.key /run/munge-key/munge.key
chown munge:munge /run/munge
chmod 0755 /run/munge
# setpriv execs munged in place (runuser would stay as its parent), so munged is PID 1 and stops on SIGTERM.
exec setpriv --reuid munge --regid munge --init-groups -- munged --foreground --key-file=/run/munge-key/munge.key
