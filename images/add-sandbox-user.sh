#!/bin/sh
# Run by every sandbox image's Dockerfile, as root: the fixed, unprivileged user
# that programs run as (host-side limits and tmpfs ownership rely on uid/gid
# 10001), its work folder, and no setuid/setgid binaries (no-new-privileges
# already blocks them, but it is a setting).
set -eu
groupadd --gid 10001 sandbox
useradd --uid 10001 --gid 10001 --home-dir /workspace --no-create-home --shell /bin/bash sandbox
mkdir -p /workspace
chown 10001:10001 /workspace
find / -xdev -perm /6000 -type f -exec chmod a-s {} +
