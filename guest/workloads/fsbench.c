/* fsbench: many threads creating, writing, appending, reading, deleting and stat-ing files,
 * after Filebench's "fileserver" and "varmail" personalities (seed 000, section 4.2).
 *
 *   fsbench prepare  PERSONALITY [options]   create the file set (before the ROI)
 *   fsbench run      PERSONALITY [options]   the threads' loop, until -T seconds or -n loops
 *
 * PERSONALITY
 *   fileserver  per loop: create a file and write it whole; append to one; read one whole;
 *               delete one; stat one (files spread over directories of 20)
 *   varmail     per loop: delete a file; create one, append, fsync; open one, read it whole,
 *               append, fsync; open one and read it whole (one flat directory)
 * options (defaults: fileserver / varmail)
 *   -d DIR      the file set's directory (/srv/files/PERSONALITY)
 *   -t N        threads (50 / 16)
 *   -f N        files in the set (2000 / 1000); prepare creates 80% of them
 *   -s BYTES    mean file size (32768 / 16384)
 *   -a BYTES    mean append size (16384 / 16384)
 *   -T SECONDS  run for this long (default: until -n, or SIGTERM / SIGINT)
 *   -n N        loops per thread (default: no limit)
 *   -S SEED     random seed (1)
 * Sizes are uniform in [mean/2, 3*mean/2]. Each file slot is owned by one thread at a time
 * (an atomic state per slot), so operations on a file never overlap. `run` prints one line of
 * totals when it ends (after the ROI, when the caller stops it with -T or -n).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../guest.h"

enum { ABSENT = 0, PRESENT = 1, BUSY = 2 };
enum { FILESERVER, VARMAIL };

#define IOSIZE (1 << 20)
#define DIRWIDTH 20
#define PICK_TRIES 64

static struct {
    int personality;
    const char *dir;
    int threads, files;
    long size, append;
    double seconds;
    long loops;
    unsigned seed;
} cfg;

static _Atomic int *slots;
static char *wbuf; /* IOSIZE + max append of pseudo-random bytes to write */
static atomic_long ops_total, bytes_read, bytes_written, skipped;
static double deadline;
static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void die(const char *what, const char *path)
{
    fprintf(stderr, "fsbench: %s %s: %s\n", what, path ? path : "", strerror(errno));
    exit(1);
}

/* xorshift64*: per-thread generator, so threads never share state. */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static long around(uint64_t *s, long mean)
{
    return mean / 2 + (long)(rnd(s) % (uint64_t)(mean + 1));
}

static void slot_path(int i, char *buf, size_t n)
{
    if (cfg.personality == FILESERVER)
        snprintf(buf, n, "%s/d%04d/f%06d", cfg.dir, i / DIRWIDTH, i);
    else
        snprintf(buf, n, "%s/m%06d", cfg.dir, i);
}

/* Claim a slot in state `want` (marking it BUSY); -1 when none was found quickly. */
static int claim(uint64_t *s, int want)
{
    for (int t = 0; t < PICK_TRIES; t++) {
        int i = (int)(rnd(s) % (uint64_t)cfg.files);
        int expect = want;
        if (atomic_compare_exchange_strong(&slots[i], &expect, BUSY))
            return i;
    }
    atomic_fetch_add(&skipped, 1);
    return -1;
}

static void release(int i, int state)
{
    atomic_store(&slots[i], state);
}

static void write_all(int fd, long n, const char *path)
{
    while (n > 0) {
        long chunk = n < IOSIZE ? n : IOSIZE;
        ssize_t w = write(fd, wbuf, (size_t)chunk);
        if (w < 0)
            die("write", path);
        n -= w;
        atomic_fetch_add(&bytes_written, w);
    }
}

static void read_all(int fd, char *buf, const char *path)
{
    for (;;) {
        ssize_t r = read(fd, buf, IOSIZE);
        if (r < 0)
            die("read", path);
        if (r == 0)
            return;
        atomic_fetch_add(&bytes_read, r);
    }
}

/* Operations: each takes a claimed slot and says what state it leaves. */
static int op_create(int i, uint64_t *s, int do_fsync, long bytes)
{
    char p[512];
    slot_path(i, p, sizeof p);
    int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0)
        die("create", p);
    write_all(fd, bytes ? bytes : around(s, cfg.size), p);
    if (do_fsync && fsync(fd) != 0)
        die("fsync", p);
    close(fd);
    return PRESENT;
}

static int op_append(int i, uint64_t *s, int do_fsync)
{
    char p[512];
    slot_path(i, p, sizeof p);
    int fd = open(p, O_WRONLY | O_APPEND);
    if (fd < 0)
        die("open for append", p);
    write_all(fd, around(s, cfg.append), p);
    if (do_fsync && fsync(fd) != 0)
        die("fsync", p);
    close(fd);
    return PRESENT;
}

static int op_read(int i, char *buf, int then_append, uint64_t *s)
{
    char p[512];
    slot_path(i, p, sizeof p);
    int fd = open(p, then_append ? O_RDWR | O_APPEND : O_RDONLY);
    if (fd < 0)
        die("open", p);
    read_all(fd, buf, p);
    if (then_append) {
        write_all(fd, around(s, cfg.append), p);
        if (fsync(fd) != 0)
            die("fsync", p);
    }
    close(fd);
    return PRESENT;
}

static int op_delete(int i)
{
    char p[512];
    slot_path(i, p, sizeof p);
    if (unlink(p) != 0)
        die("unlink", p);
    return ABSENT;
}

static int op_stat(int i)
{
    char p[512];
    struct stat st;
    slot_path(i, p, sizeof p);
    if (stat(p, &st) != 0)
        die("stat", p);
    return PRESENT;
}

static void one_loop(uint64_t *s, char *buf)
{
    int i;
    if (cfg.personality == FILESERVER) {
        if ((i = claim(s, ABSENT)) >= 0)
            release(i, op_create(i, s, 0, 0));
        if ((i = claim(s, PRESENT)) >= 0)
            release(i, op_append(i, s, 0));
        if ((i = claim(s, PRESENT)) >= 0)
            release(i, op_read(i, buf, 0, s));
        if ((i = claim(s, PRESENT)) >= 0)
            release(i, op_delete(i));
        if ((i = claim(s, PRESENT)) >= 0)
            release(i, op_stat(i));
    } else {
        if ((i = claim(s, PRESENT)) >= 0)
            release(i, op_delete(i));
        if ((i = claim(s, ABSENT)) >= 0) /* create + append + fsync */
            release(i, op_create(i, s, 1, around(s, cfg.append)));
        if ((i = claim(s, PRESENT)) >= 0)
            release(i, op_read(i, buf, 1, s));
        if ((i = claim(s, PRESENT)) >= 0)
            release(i, op_read(i, buf, 0, s));
    }
    atomic_fetch_add(&ops_total, 1);
}

static void *worker(void *arg)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL * ((uint64_t)(uintptr_t)arg + 1) + cfg.seed;
    char *buf = malloc(IOSIZE);
    if (!buf)
        die("malloc", NULL);
    for (long n = 0; cfg.loops == 0 || n < cfg.loops; n++) {
        if (stop_requested || (cfg.seconds > 0 && (n & 7) == 0 && now() >= deadline))
            break;
        one_loop(&s, buf);
    }
    free(buf);
    return NULL;
}

/* The slots' states from what is on disk (prepare may have run in another process). */
static int scan_slots(void)
{
    int present = 0;
    for (int i = 0; i < cfg.files; i++) {
        char p[512];
        struct stat st;
        slot_path(i, p, sizeof p);
        int ok = stat(p, &st) == 0;
        atomic_store(&slots[i], ok ? PRESENT : ABSENT);
        present += ok;
    }
    return present;
}

static void prepare(void)
{
    char p[512];
    if (mkdir(cfg.dir, 0755) != 0 && errno != EEXIST)
        die("mkdir", cfg.dir);
    if (cfg.personality == FILESERVER) {
        for (int d = 0; d * DIRWIDTH < cfg.files; d++) {
            snprintf(p, sizeof p, "%s/d%04d", cfg.dir, d);
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                die("mkdir", p);
        }
    }
    uint64_t s = 0x2545f4914f6cdd1dULL + cfg.seed;
    int made = 0;
    /* Filebench preallocates 80% of the set. */
    for (int i = 0; i < cfg.files; i++) {
        if (rnd(&s) % 10 < 8) {
            op_create(i, &s, 0, 0);
            made++;
        }
    }
    sync();
    printf("fsbench prepare: %d of %d files in %s\n", made, cfg.files, cfg.dir);
}

static int usage(void)
{
    fprintf(stderr, "usage: fsbench prepare|run fileserver|varmail [-d DIR] [-t THREADS] "
                    "[-f FILES] [-s SIZE] [-a APPEND] [-T SECONDS] [-n LOOPS] [-S SEED]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    int do_prepare;
    if (!strcmp(argv[1], "prepare"))
        do_prepare = 1;
    else if (!strcmp(argv[1], "run"))
        do_prepare = 0;
    else
        return usage();
    if (!strcmp(argv[2], "fileserver")) {
        cfg = (typeof(cfg)){FILESERVER, "/srv/files/fileserver", 50, 2000, 32768, 16384, 0, 0, 1};
    } else if (!strcmp(argv[2], "varmail")) {
        cfg = (typeof(cfg)){VARMAIL, "/srv/files/varmail", 16, 1000, 16384, 16384, 0, 0, 1};
    } else {
        fprintf(stderr, "fsbench: unknown personality '%s' (fileserver, varmail)\n", argv[2]);
        return 2;
    }
    optind = 3;
    int opt;
    while ((opt = getopt(argc, argv, "d:t:f:s:a:T:n:S:")) != -1) {
        char o[2] = {(char)opt, 0};
        switch (opt) {
        case 'd': cfg.dir = optarg; break;
        case 't': cfg.threads = (int)number("fsbench", o, optarg, 1); break;
        case 'f': cfg.files = (int)number("fsbench", o, optarg, 1); break;
        case 's': cfg.size = number("fsbench", o, optarg, 1); break;
        case 'a': cfg.append = number("fsbench", o, optarg, 1); break;
        case 'T': cfg.seconds = (double)number("fsbench", o, optarg, 1); break;
        case 'n': cfg.loops = number("fsbench", o, optarg, 1); break;
        case 'S': cfg.seed = (unsigned)number("fsbench", o, optarg, 0); break;
        default: return usage();
        }
    }
    if (cfg.size > (1L << 30) || cfg.append > IOSIZE) {
        fprintf(stderr, "fsbench: -s at most 1 GiB and -a at most %d\n", IOSIZE);
        return 2;
    }
    slots = calloc((size_t)cfg.files, sizeof *slots);
    wbuf = malloc(IOSIZE * 2);
    if (!slots || !wbuf)
        die("malloc", NULL);
    uint64_t s = 88172645463325252ULL;
    for (size_t k = 0; k < IOSIZE * 2 / 8; k++)
        ((uint64_t *)wbuf)[k] = rnd(&s);
    if (do_prepare) {
        prepare();
        return 0;
    }
    int present = scan_slots();
    if (present == 0) {
        fprintf(stderr, "fsbench: no files in %s: run fsbench prepare first\n", cfg.dir);
        return 1;
    }
    /* SIGTERM or SIGINT ends the loops; the totals are still printed. */
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    double start = now();
    deadline = start + cfg.seconds;
    pthread_t *tids = calloc((size_t)cfg.threads, sizeof *tids);
    for (int t = 0; t < cfg.threads; t++) {
        if (pthread_create(&tids[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
            fprintf(stderr, "fsbench: cannot create thread %d\n", t);
            return 1;
        }
    }
    for (int t = 0; t < cfg.threads; t++)
        pthread_join(tids[t], NULL);
    double el = now() - start;
    printf("fsbench %s: %d threads, %ld loops in %.2f s, read %ld B, wrote %ld B, "
           "%ld busy picks skipped\n", argv[2], cfg.threads, atomic_load(&ops_total), el,
           atomic_load(&bytes_read), atomic_load(&bytes_written), atomic_load(&skipped));
    return 0;
}
