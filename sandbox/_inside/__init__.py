"""Programs that run inside a sandbox container, as real modules.

Everything in this package runs under the image's ``python3 -I -S`` as root
(with only the supervisor's capabilities) before it drops to a program's uid,
so it imports the standard library and its own sibling modules only (relative
imports), never another part of sandcrew: the image holds nothing of ours.
The host sends the package's source with the container's command (see
:func:`sandcrew.sandbox._inside_command.inside_command`), and the same modules
are imported on the host by the tests of their pure parts.
"""
