/* roi: the guest-side region-of-interest marker for the pysched QEMU plugin.
 *
 *   roi begin      start recording (rax = 0x5ced0001)
 *   roi end        stop recording and flush (rax = 0x5ced0002)
 *   roi mark N     record a `markers` row with value N (rax = 0x5ced0003, rdi = N)
 *
 * The marker is `xchg %rbx,%rbx` (48 87 db): an architectural no-op that neither compilers nor
 * the kernel emit, so outside the tracer this program does nothing. The bytes are spelled out
 * so that no assembler can pick another encoding of the same instruction.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest.h"

static int usage(void)
{
    fprintf(stderr, "usage: roi begin | roi end | roi mark N\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "begin") == 0) {
        roi_marker(ROI_BEGIN, 0);
    } else if (argc == 2 && strcmp(argv[1], "end") == 0) {
        roi_marker(ROI_END, 0);
    } else if (argc == 3 && strcmp(argv[1], "mark") == 0) {
        char *end;
        unsigned long long v = strtoull(argv[2], &end, 0);
        if (*argv[2] == '\0' || *end != '\0') {
            fprintf(stderr, "roi: bad mark value '%s'\n", argv[2]);
            return 2;
        }
        roi_marker(ROI_MARK, (uint64_t)v);
    } else {
        return usage();
    }
    return 0;
}
