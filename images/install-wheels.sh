#!/bin/sh
# Run by the Dockerfiles of images with Python packages, as root: installs the
# wheels that `sandcrew images build` downloaded on the host into /tmp/wheels
# (requirements.txt and pip's own wheel among them), so nothing needs the
# network; then removes them and any setuid/setgid bit a package brought.
set -eu
pip_wheel="$(ls /tmp/wheels/pip-*.whl)"
python3 "$pip_wheel/pip" install --quiet --no-index --find-links /tmp/wheels \
    --no-cache-dir --root-user-action=ignore --break-system-packages \
    --disable-pip-version-check -r /tmp/wheels/requirements.txt
rm -rf /tmp/wheels
find / -xdev -perm /6000 -type f -exec chmod a-s {} +
