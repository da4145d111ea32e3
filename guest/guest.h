/* guest.h - what the guest's C programs share (those in guest/ and guest/workloads/): the
 * region-of-interest marker instruction, a monotonic clock in seconds, and strict parsing of
 * numeric options. Header-only: each program is one static binary built from one file, so the
 * guest Makefiles need no library, only this file as a prerequisite.
 */
#ifndef PYSCHED_GUEST_H
#define PYSCHED_GUEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* rax commands of the marker (qemu-plugin/README.md, "Region of interest") */
#define ROI_BEGIN 0x5ced0001UL
#define ROI_END 0x5ced0002UL
#define ROI_MARK 0x5ced0003UL

/* The marker is `xchg %rbx,%rbx` (48 87 db): an architectural no-op that neither compilers nor
 * the kernel emit, so outside the tracer it does nothing. The bytes are spelled out so that no
 * assembler can pick another encoding of the same instruction. rax/rdi are inputs the plugin
 * reads; "memory" keeps the compiler from moving loads and stores across the marker, so the
 * region boundaries are where the source says. */
static inline void roi_marker(uint64_t cmd, uint64_t value)
{
    __asm__ volatile(".byte 0x48, 0x87, 0xdb" : : "a"(cmd), "D"(value) : "memory");
}

/* Seconds on CLOCK_MONOTONIC. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The decimal integer V of option -OPT, at least MIN; otherwise PROG says so and exits 2. */
static inline long number(const char *prog, const char *opt, const char *v, long min)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < min) {
        fprintf(stderr, "%s: bad value '%s' for -%s (at least %ld)\n", prog, v, opt, min);
        exit(2);
    }
    return n;
}

#endif
