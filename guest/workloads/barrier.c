/* barrier: a barrier-synchronised multi-threaded program (seed 001): Jacobi relaxation of a
 * shared 2-D grid, in the manner of SPLASH-2's ocean, with every sweep ended by a barrier.
 *
 *   barrier [-t THREADS] [-g GRID] [-i SWEEPS] [-T SECONDS] [-b IMBALANCE]
 *
 * THREADS (default 4) split the GRID x GRID grid (default 512) into bands of rows; each sweep
 * computes every interior point of the band as the mean of its four neighbours from the other
 * grid, then all threads wait at a pthread barrier and the grids swap. Thread t's band is
 * (1 + t * IMBALANCE / 100) times the nominal height (default IMBALANCE 0: equal bands), so
 * that faster threads wait at the barrier. Runs SWEEPS sweeps (default: no limit) or until
 * SECONDS (default 10) have passed (thread 0 decides, after a barrier), then prints the
 * sweeps done and a checksum.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../guest.h"

static int threads = 4, grid = 512, imbalance = 0;
static long sweeps = 0;
static double seconds = 10.0, deadline;
static double *a, *b;
static int *band_start;
static pthread_barrier_t bar;
static volatile int stop;
static long done;

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    int lo = band_start[t], hi = band_start[t + 1];
    double *src = a, *dst = b;
    for (long s = 0;; s++) {
        for (int i = lo; i < hi; i++) {
            for (int j = 1; j < grid - 1; j++) {
                dst[i * grid + j] = 0.25 * (src[(i - 1) * grid + j] + src[(i + 1) * grid + j] +
                                            src[i * grid + j - 1] + src[i * grid + j + 1]);
            }
        }
        pthread_barrier_wait(&bar);
        if (t == 0) {
            done = s + 1;
            if ((sweeps && done >= sweeps) || now() >= deadline)
                stop = 1;
        }
        pthread_barrier_wait(&bar); /* everyone sees the same `stop` */
        if (stop)
            return NULL;
        double *tmp = src;
        src = dst;
        dst = tmp;
    }
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:g:i:T:b:")) != -1) {
        switch (opt) {
        case 't': threads = (int)number("barrier", "t", optarg, 1); break;
        case 'g': grid = (int)number("barrier", "g", optarg, 8); break;
        case 'i': sweeps = number("barrier", "i", optarg, 1); break;
        case 'T': seconds = (double)number("barrier", "T", optarg, 1); break;
        case 'b': imbalance = (int)number("barrier", "b", optarg, 0); break;
        default:
            fprintf(stderr, "usage: barrier [-t THREADS] [-g GRID] [-i SWEEPS] [-T SECONDS] "
                            "[-b IMBALANCE]\n");
            return 2;
        }
    }
    if (threads > grid - 2) {
        fprintf(stderr, "barrier: more threads (%d) than interior rows (%d)\n", threads,
                grid - 2);
        return 2;
    }
    size_t cells = (size_t)grid * (size_t)grid;
    a = calloc(cells, sizeof *a);
    b = calloc(cells, sizeof *b);
    band_start = calloc((size_t)threads + 1, sizeof *band_start);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!a || !b || !band_start || !tids) {
        fprintf(stderr, "barrier: out of memory\n");
        return 1;
    }
    /* Hot top edge, cold elsewhere: the relaxation has something to do. */
    for (int j = 0; j < grid; j++)
        a[j] = b[j] = 100.0;
    /* Bands of rows 1..grid-2, thread t weighted 100 + t * imbalance. */
    double total = 0;
    for (int t = 0; t < threads; t++)
        total += 100.0 + (double)t * imbalance;
    double acc = 0;
    band_start[0] = 1;
    for (int t = 0; t < threads; t++) {
        acc += 100.0 + (double)t * imbalance;
        band_start[t + 1] = 1 + (int)((double)(grid - 2) * acc / total + 0.5);
        if (band_start[t + 1] <= band_start[t])
            band_start[t + 1] = band_start[t] + 1;
    }
    band_start[threads] = grid - 1;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    double start = now();
    deadline = start + seconds;
    for (int t = 0; t < threads; t++) {
        if (pthread_create(&tids[t], NULL, worker, (void *)(long)t) != 0) {
            fprintf(stderr, "barrier: cannot create thread %d\n", t);
            return 1;
        }
    }
    for (int t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    double sum = 0;
    for (size_t k = 0; k < cells; k++)
        sum += a[k] + b[k];
    printf("barrier: %d threads, grid %d, %ld sweeps in %.2f s, checksum %.6g\n", threads, grid,
           done, now() - start, sum);
    return 0;
}
