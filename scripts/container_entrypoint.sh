#!/bin/sh
# The image's entry point (/usr/local/bin/nsa-exp-entrypoint): run the command as the owner of the
# bind-mounted results folder, so that what it writes lands on the host as that user's files.
#
#   nsa-exp-entrypoint COMMAND [ARGS...]     e.g. nsa-exp-entrypoint invoke check
#
# Started as root (the image's default), it reads the uid:gid owning $NSA_EXP_RUN_AS_OWNER_OF (the
# Dockerfile sets /opt/nsa-exp/results, the ./results bind mount; the validate service names
# /submissions), gives the image's user nsa that uid and gid, hands nsa the folders the command
# writes that are volumes, not host folders (the Triton cache and the bench journal), and replaces
# itself with COMMAND run as nsa (setpriv, so COMMAND's exit code is the container's).
# - The folder owned by root (a folder the engine created, or a rootless engine, whose root is the
#   host user): COMMAND runs as root.
# - Started as another user (`--user`): COMMAND runs unchanged as that user.
set -eu
if [ "$#" -eq 0 ]; then
  echo "usage: nsa-exp-entrypoint COMMAND [ARGS...]" >&2
  exit 2
fi
if [ "$(id -u)" != 0 ]; then
  exec "$@"
fi
owned="${NSA_EXP_RUN_AS_OWNER_OF:-/opt/nsa-exp/results}"
if [ ! -e "$owned" ]; then
  echo "nsa-exp-entrypoint: NSA_EXP_RUN_AS_OWNER_OF=$owned does not exist" >&2
  exit 2
fi
uid="$(stat -c %u "$owned")"
gid="$(stat -c %g "$owned")"
if [ "$uid" = 0 ]; then
  exec "$@"
fi
if [ "$(id -g nsa)" != "$gid" ]; then
  groupmod --non-unique --gid "$gid" nsa
fi
if [ "$(id -u nsa)" != "$uid" ]; then
  usermod --non-unique --uid "$uid" nsa
fi
for dir in /home/nsa "${TRITON_CACHE_DIR:-/cache/triton}" /opt/nsa-exp/.nsa-exp; do
  mkdir -p "$dir"
  if [ "$(stat -c %u:%g "$dir")" != "$uid:$gid" ]; then
    chown -R "$uid:$gid" "$dir"
  fi
done
export HOME=/home/nsa USER=nsa LOGNAME=nsa
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"
