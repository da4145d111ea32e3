"""Capture: boot the test guest under QEMU with the tracing plugin and run a command in it.

``guest`` finds the built guest files and makes the per-run initramfs, ``qemu`` builds and runs
the QEMU command line, ``clock`` sets the guest's clock (from instructions by default),
``console`` parses what the guest printed, and ``command`` is ``pysched trace``: ``plan``
checks its options and plans the run, ``boot`` boots the guest, ``sysmap`` saves the kernel's
symbols, ``outcome`` judges and reports the run, ``manifest`` writes what it ran.
"""
