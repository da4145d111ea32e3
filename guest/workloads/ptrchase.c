/* ptrchase: a single-threaded pointer chase over a working set of a chosen size, the
 * cache-hungry (large set) and cache-light (small set) programs for cache-sharing studies
 * (seed 003).
 *
 *   ptrchase [-k KIB] [-T SECONDS] [-n STEPS] [-S SEED]
 *
 * The working set is KIB kibibytes (default 65536, i.e. 64 MiB) of 64-byte nodes linked in one
 * random cycle (Sattolo's algorithm), so every load depends on the previous one and the
 * hardware cannot predict the next line. The chase runs for SECONDS (default 10) or STEPS
 * loads, whichever comes first, then prints the steps done and the mean time per load.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../guest.h"

#define LINE 64

struct node {
    struct node *next;
    uint64_t pad[LINE / 8 - 1];
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

int main(int argc, char **argv)
{
    long kib = 65536, steps = 0, seconds = 10;
    uint64_t seed = 1;
    int opt;
    while ((opt = getopt(argc, argv, "k:T:n:S:")) != -1) {
        switch (opt) {
        case 'k': kib = number("ptrchase", "k", optarg, 1); break;
        case 'T': seconds = number("ptrchase", "T", optarg, 1); break;
        case 'n': steps = number("ptrchase", "n", optarg, 1); break;
        case 'S': seed = (uint64_t)number("ptrchase", "S", optarg, 0) + 1; break;
        default:
            fprintf(stderr, "usage: ptrchase [-k KIB] [-T SECONDS] [-n STEPS] [-S SEED]\n");
            return 2;
        }
    }
    size_t n = (size_t)kib * 1024 / LINE;
    if (n < 2) {
        fprintf(stderr, "ptrchase: -k %ld is too small (at least 1 KiB)\n", kib);
        return 2;
    }
    struct node *nodes = aligned_alloc(4096, n * sizeof *nodes);
    size_t *order = malloc(n * sizeof *order);
    if (!nodes || !order) {
        fprintf(stderr, "ptrchase: cannot allocate %ld KiB\n", kib);
        return 1;
    }
    memset(nodes, 0, n * sizeof *nodes);
    /* Sattolo's shuffle gives a single cycle through all nodes. */
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    uint64_t s = 0x9e3779b97f4a7c15ULL * seed;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rnd(&s) % i);
        size_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        nodes[order[i]].next = &nodes[order[(i + 1) % n]];
    free(order);

    struct node *p = &nodes[0];
    double start = now(), end = start + (double)seconds;
    long done = 0;
    const long chunk = 1 << 16; /* loads between clock readings */
    for (;;) {
        for (long k = 0; k < chunk; k++)
            p = p->next;
        done += chunk;
        if ((steps && done >= steps) || now() >= end)
            break;
    }
    double el = now() - start;
    /* Printing p keeps the chase from being optimised away. */
    printf("ptrchase: %ld KiB, %ld loads in %.2f s, %.1f ns/load (end %p)\n", kib, done, el,
           el * 1e9 / (double)done, (void *)p);
    return 0;
}
