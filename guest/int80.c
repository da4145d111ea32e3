/* int80 N: N getpid() system calls through the 32-bit `int $0x80` gate, from a 64-bit process.
 *
 * Emits the marker `mark 8` first (so that tests find this thread), then prints
 * `INT80 pid=<pid> calls=<N>`. Exercises the tracer's int 0x80 path (abi 32, eax = 20).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "guest.h"

#define NR32_GETPID 20

int main(int argc, char **argv)
{
    char *end;
    long n = argc == 2 ? strtol(argv[1], &end, 10) : -1;
    if (n < 0 || *argv[1] == '\0' || *end != '\0') {
        fprintf(stderr, "usage: int80 N\n");
        return 2;
    }
    roi_marker(ROI_MARK, 8);
    long pid = -1;
    for (long i = 0; i < n; i++) {
        long ret;
        /* the kernel zeroes r8-r11 on the way back from int 0x80 in a 64-bit process */
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(NR32_GETPID) : "r8", "r9", "r10", "r11", "memory");
        pid = ret;
    }
    printf("INT80 pid=%ld calls=%ld\n", pid, n);
    return 0;
}
