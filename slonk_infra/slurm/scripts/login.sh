#!/bin/sh
# Login entrypoint: sshd in the foreground, for the declared users (slonk_infra.declaration.users): their
# passwd/group entries come through NSS from @USERS_DIR@, their public keys from
# @USERS_DIR@/authorized_keys.<name> (read per login, so a key change needs no restart), and sshd's
# host key from the login-host-keys Secret, created once, so clients keep trusting the Service.
set -eu
trap 'exit 143' TERM INT
until [ -S /run/munge/munge.socket.2 ]; do sleep 1; done
# A home directory on the shared /home for every declared user who has none yet.
while IFS=: read -r name _ uid gid _ home _; do
  if [ -n "$name" ] && [ ! -d "$home" ]; then
    install -d -o "$uid" -g "$gid" -m 0700 "$home"
  fi
done < "@USERS_DIR@/passwd"
# A user declared later gets a home at first login instead (the image's sshd runs pam_mkhomedir).
hostkey="@LOGIN_HOST_KEY@"
if [ ! -s "$hostkey" ]; then
  # Only without the Secret (an image run by hand): a key of this pod's own, new at every start.
  echo "login.sh: no host key at $hostkey; generating one that will change with every restart" >&2
  ssh-keygen -q -A
  hostkey=/etc/ssh/ssh_host_ed25519_key
fi
mkdir -p /run/sshd
exec /usr/sbin/sshd -D -e \
  -o HostKey="$hostkey" \
  -o "AuthorizedKeysCommand=/bin/cat @USERS_DIR@/authorized_keys.%u" \
  -o AuthorizedKeysCommandUser=nobody \
  -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o PermitRootLogin=no
