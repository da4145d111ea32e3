"""Capture: boot the test guest under QEMU with the tracing plugin and run a command in it.

``guest`` finds the built guest files and makes the per-run initramfs, ``qemu`` builds and runs
the QEMU command line, ``console`` parses what the guest printed, and ``command`` is
``pysched trace``.
"""
