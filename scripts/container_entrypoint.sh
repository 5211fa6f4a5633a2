#!/bin/sh
# The image's entry point (/usr/local/bin/nsa-exp-entrypoint): run the command as the owner of the
# bind-mounted output folders (./results, ./runs), so that what it writes lands on the host as that user's.
#
#   nsa-exp-entrypoint COMMAND [ARGS...]     e.g. nsa-exp-entrypoint invoke check
#
# Started as root (the image's default), it reads the uid:gid owning the folders of
# $NSA_EXP_RUN_AS_OWNER_OF (colon-separated; the Dockerfile sets the ./results, ./runs and ./profiles bind
# mounts, /opt/nsa-exp/{results,runs,profiles}; the validate service names /submissions): the owner of the
# first one not owned by root. It gives the image's user nsa that uid and gid, hands nsa the listed folders
# that are root's and empty (a bind mount whose host folder was missing: the engine made it, as root), and
# the folders the command writes that are volumes, not host folders (the Triton cache, the bench journal),
# and replaces itself with COMMAND run as nsa (setpriv, so COMMAND's exit code is the container's).
# - Every listed folder owned by root (folders the engine created, or a rootless engine, whose root is the
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
owned="${NSA_EXP_RUN_AS_OWNER_OF:-/opt/nsa-exp/results:/opt/nsa-exp/runs:/opt/nsa-exp/profiles}"
uid=0
gid=0
set -f
old_ifs="$IFS"
IFS=:
for dir in $owned; do
  if [ ! -d "$dir" ]; then
    echo "nsa-exp-entrypoint: NSA_EXP_RUN_AS_OWNER_OF names $dir, which is not a folder" >&2
    exit 2
  fi
  if [ "$uid" = 0 ] && [ "$(stat -c %u "$dir")" != 0 ]; then
    uid="$(stat -c %u "$dir")"
    gid="$(stat -c %g "$dir")"
  fi
done
IFS="$old_ifs"
set +f
if [ "$uid" = 0 ]; then
  exec "$@"
fi
set -f
IFS=:
for dir in $owned; do
  if [ "$(stat -c %u "$dir")" = 0 ] && [ -z "$(ls -A "$dir")" ]; then
    chown "$uid:$gid" "$dir"
  fi
done
IFS="$old_ifs"
set +f
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
