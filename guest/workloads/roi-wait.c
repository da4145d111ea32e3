/* roi-wait: the end of a workload's steady state, for the guest's region of interest.
 *
 *   roi-wait [-t SECONDS] [-c DEVICE] [PID...]
 *
 * Returns as soon as one of these happens:
 *   - SECONDS (a decimal number, default 10) have passed on CLOCK_MONOTONIC;
 *   - one of the PIDs has exited (they need not be children: pidfd_open);
 *   - the line "stop" arrives on DEVICE, a serial port the host writes to (pysched trace
 *     --roi-insns, which watches the trace grow). The port is put in raw mode.
 * It prints nothing (it runs inside the traced region) and exits 0, or 2 on bad usage or when
 * a PID or the device cannot be watched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../guest.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define MAX_FDS 64

static int usage(void)
{
    fprintf(stderr, "usage: roi-wait [-t SECONDS] [-c DEVICE] [PID...]\n");
    return 2;
}

/* Open the control port in raw mode: no echo back to the host, no line editing. */
static int open_control(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "roi-wait: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct termios t;
    if (tcgetattr(fd, &t) == 0) {
        cfmakeraw(&t);
        t.c_cflag |= CLOCAL | CREAD;
        tcsetattr(fd, TCSANOW, &t);
    }
    return fd;
}

int main(int argc, char **argv)
{
    double seconds = 10.0;
    const char *control = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "t:c:")) != -1) {
        char *end;
        switch (opt) {
        case 't':
            seconds = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || seconds < 0) {
                fprintf(stderr, "roi-wait: bad seconds '%s'\n", optarg);
                return 2;
            }
            break;
        case 'c':
            control = optarg;
            break;
        default:
            return usage();
        }
    }
    struct pollfd fds[MAX_FDS];
    int nfds = 0, ctl = -1;
    if (control != NULL) {
        ctl = open_control(control);
        if (ctl < 0)
            return 2;
        fds[nfds++] = (struct pollfd){.fd = ctl, .events = POLLIN};
    }
    for (int i = optind; i < argc; i++) {
        char *end;
        long pid = strtol(argv[i], &end, 10);
        if (*argv[i] == '\0' || *end != '\0' || pid <= 0 || nfds == MAX_FDS) {
            fprintf(stderr, "roi-wait: bad pid '%s'\n", argv[i]);
            return 2;
        }
        int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (fd < 0) {
            if (errno == ESRCH)
                return 0; /* already gone: the work it stood for is over */
            fprintf(stderr, "roi-wait: pidfd_open %ld: %s\n", pid, strerror(errno));
            return 2;
        }
        fds[nfds++] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    double deadline = now() + seconds;
    char line[64];
    size_t len = 0;
    for (;;) {
        double left = deadline - now();
        if (left <= 0)
            return 0;
        int ms = left > 3600.0 ? 3600000 : (int)(left * 1000.0) + 1;
        int n = poll(fds, (nfds_t)nfds, ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("roi-wait: poll");
            return 2;
        }
        for (int i = 0; i < nfds && n > 0; i++) {
            if (!fds[i].revents)
                continue;
            if (fds[i].fd != ctl)
                return 0; /* a watched process exited */
            char buf[64];
            ssize_t got = read(ctl, buf, sizeof buf);
            for (ssize_t k = 0; k < got; k++) {
                if (buf[k] == '\n' || buf[k] == '\r') {
                    line[len] = '\0';
                    if (strcmp(line, "stop") == 0)
                        return 0;
                    len = 0;
                } else if (len + 1 < sizeof line) {
                    line[len++] = buf[k];
                }
            }
        }
    }
}
