/* spin N: about N million user-mode instructions of pure computation, then `SPIN done`.
 *
 * Two concurrent `spin` processes give the tracer two processes of one binary (same code, two
 * address spaces). The accumulator is volatile so that the loop is not folded away: each
 * iteration is a load, an add, a store, an increment, a compare and a branch (6 instructions
 * at -O2 on x86_64).
 */
#include <stdio.h>
#include <stdlib.h>

#define INSNS_PER_ITER 6

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: spin N   (N million instructions)\n");
        return 2;
    }
    char *end;
    long n = strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || n < 0) {
        fprintf(stderr, "spin: bad count '%s'\n", argv[1]);
        return 2;
    }
    volatile unsigned long acc = 0;
    unsigned long iters = (unsigned long)n * 1000000UL / INSNS_PER_ITER;
    for (unsigned long i = 0; i < iters; i++)
        acc += i;
    printf("SPIN done\n");
    fflush(stdout);
    return 0;
}
