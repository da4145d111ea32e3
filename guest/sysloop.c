/* sysloop N: a known number of read(2)/write(2) system calls, for checking the tracer.
 *
 * Emits the marker `mark 7` (so that tests find this thread in the trace), reads the kernel's
 * per-task counters from /proc/self/io, makes N 1-byte reads from /dev/zero and N 1-byte writes
 * to /dev/null, reads /proc/self/io again and prints both readings:
 *
 *   SYSLOOP syscr0=<v> syscw0=<v> syscr=<v> syscw=<v> pid=<pid> tid=<tid>
 *
 * Each /proc/self/io reading is a single read() of 4095 bytes; the kernel counts a read after
 * it has filled the buffer, so syscr - syscr0 = N + 1 (the loop and the first reading) and
 * syscw - syscw0 = N.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest.h"

/* The value of `key: N` in /proc/self/io text, or -1 when absent. */
static long long field(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, n) == 0 && p[n] == ':')
            return strtoll(p + n + 1, NULL, 10);
    }
    return -1;
}

/* One reading of /proc/self/io into BUF (4096 bytes): exactly one read() system call. */
static int read_io(char *buf)
{
    int io = open("/proc/self/io", O_RDONLY);
    if (io < 0) {
        perror("sysloop: open /proc/self/io");
        return 1;
    }
    ssize_t got = read(io, buf, 4095);
    close(io);
    if (got <= 0) {
        perror("sysloop: read /proc/self/io");
        return 1;
    }
    buf[got] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: sysloop N\n");
        return 2;
    }
    char *end;
    long n = strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || n < 0) {
        fprintf(stderr, "sysloop: bad count '%s'\n", argv[1]);
        return 2;
    }
    /* Open everything first so the loops are nothing but the counted calls. */
    int zero = open("/dev/zero", O_RDONLY);
    int null = open("/dev/null", O_WRONLY);
    if (zero < 0 || null < 0) {
        perror("sysloop: open /dev/zero or /dev/null");
        return 1;
    }
    char c = 0;
    roi_marker(ROI_MARK, 7);
    char first[4096], last[4096];
    if (read_io(first) != 0) {
        return 1;
    }
    for (long i = 0; i < n; i++) {
        if (read(zero, &c, 1) != 1) {
            perror("sysloop: read");
            return 1;
        }
    }
    for (long i = 0; i < n; i++) {
        if (write(null, &c, 1) != 1) {
            perror("sysloop: write");
            return 1;
        }
    }
    if (read_io(last) != 0) {
        return 1;
    }
    printf("SYSLOOP syscr0=%lld syscw0=%lld syscr=%lld syscw=%lld pid=%ld tid=%ld\n",
           field(first, "syscr"), field(first, "syscw"), field(last, "syscr"),
           field(last, "syscw"), (long)getpid(), (long)syscall(SYS_gettid));
    fflush(stdout);
    return 0;
}
