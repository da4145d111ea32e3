/* roi-wait: the end of a workload's steady state, for the guest's region of interest.
 *
 *   roi-wait [-r] [-t SECONDS] [-c DEVICE] [PID...]
 *   roi-wait [-r] [-t SECONDS] [-c DEVICE] -x [-n NICE] [-s FILE] COMMAND [ARG...]
 *
 * Returns as soon as one of these happens:
 *   - SECONDS (a decimal number, "inf" for no bound; default 10) have passed on
 *     CLOCK_MONOTONIC;
 *   - one of the PIDs (or COMMAND) has exited (PIDs need not be children: pidfd_open);
 *   - the line "stop" arrives on DEVICE, a serial port the host writes to (pysched trace
 *     --roi-insns, which watches the trace grow). The port is put in raw mode.
 *
 * -r: roi-wait opens the region itself (the plugin's begin marker) once everything it watches
 * is set up, and closes it (the end marker) as soon as the wait is over. The region then holds
 * none of the harness's process starts and exits (a `roi begin` ending, `roi-wait` and
 * `roi end` starting): only the end of this process's poll() (qemu-plugin/README.md, "Region
 * of interest"). The thread that issued the begin marker is the harness in the trace.
 * -x: run COMMAND (a child, started just after the region opens, at nice NICE with -n) and
 * wait for it too. When the wait is over and COMMAND still runs, it gets SIGTERM. With -s,
 * FILE receives one line once the region has closed: "exit N" or "signal N" (COMMAND's
 * status), or "stopped" (it still ran when the wait ended).
 *
 * It prints nothing while it waits (it runs inside the traced region) and exits 0, or 2 on bad
 * usage or when a PID, the device or COMMAND cannot be watched or started.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
    fprintf(stderr, "usage: roi-wait [-r] [-t SECONDS] [-c DEVICE] [PID...]\n"
                    "       roi-wait [-r] [-t SECONDS] [-c DEVICE] -x [-n NICE] [-s FILE] "
                    "COMMAND [ARG...]\n");
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

/* Start COMMAND at nice NICE; its pidfd, or -1 (and a message) when it cannot be started. */
static int start_command(char **cmd, int nice_value, pid_t *pid)
{
    *pid = fork();
    if (*pid < 0) {
        perror("roi-wait: fork");
        return -1;
    }
    if (*pid == 0) {
        if (nice_value != INT32_MIN)
            setpriority(PRIO_PROCESS, 0, nice_value);
        execvp(cmd[0], cmd);
        fprintf(stderr, "roi-wait: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    int fd = (int)syscall(SYS_pidfd_open, *pid, 0);
    if (fd < 0)
        perror("roi-wait: pidfd_open of the command");
    return fd;
}

/* Wait on FDS until one is ready (a process exited, or "stop" came on CTL) or the deadline;
 * 0, or 2 when poll fails. */
static int wait_for(struct pollfd *fds, int nfds, int ctl, double deadline)
{
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

/* After the region: what became of COMMAND, into FILE (see the header). */
static void command_status(pid_t pid, const char *file)
{
    int status;
    char text[32];
    if (waitpid(pid, &status, WNOHANG) == pid) {
        if (WIFEXITED(status))
            snprintf(text, sizeof text, "exit %d\n", WEXITSTATUS(status));
        else
            snprintf(text, sizeof text, "signal %d\n", WTERMSIG(status));
    } else {
        kill(pid, SIGTERM);
        snprintf(text, sizeof text, "stopped\n");
    }
    if (file == NULL)
        return;
    FILE *f = fopen(file, "w");
    if (f == NULL || fputs(text, f) == EOF || fclose(f) != 0)
        fprintf(stderr, "roi-wait: cannot write %s: %s\n", file, strerror(errno));
}

int main(int argc, char **argv)
{
    double seconds = 10.0;
    const char *control = NULL, *status_file = NULL;
    int region = 0, command = 0, gone = 0, nice_value = INT32_MIN;
    int opt;
    /* "+": stop at the first operand, so that COMMAND's own options stay its own. */
    while ((opt = getopt(argc, argv, "+t:c:rxn:s:")) != -1) {
        char *end;
        switch (opt) {
        case 't':
            seconds = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(seconds >= 0)) {
                fprintf(stderr, "roi-wait: bad seconds '%s'\n", optarg);
                return 2;
            }
            break;
        case 'c':
            control = optarg;
            break;
        case 'r':
            region = 1;
            break;
        case 'x':
            command = 1;
            break;
        case 'n':
            nice_value = (int)number("roi-wait", "n", optarg, -20);
            break;
        case 's':
            status_file = optarg;
            break;
        default:
            return usage();
        }
    }
    if (command && optind == argc)
        return usage();
    if (!command && (nice_value != INT32_MIN || status_file != NULL))
        return usage();
    struct pollfd fds[MAX_FDS];
    int nfds = 0, ctl = -1;
    if (control != NULL) {
        ctl = open_control(control);
        if (ctl < 0)
            return 2;
        fds[nfds++] = (struct pollfd){.fd = ctl, .events = POLLIN};
    }
    for (int i = optind; !command && i < argc; i++) {
        char *end;
        long pid = strtol(argv[i], &end, 10);
        if (*argv[i] == '\0' || *end != '\0' || pid <= 0 || nfds == MAX_FDS) {
            fprintf(stderr, "roi-wait: bad pid '%s'\n", argv[i]);
            return 2;
        }
        int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (fd < 0) {
            if (errno == ESRCH) {
                gone = 1; /* already gone: the work it stood for is over */
                continue;
            }
            fprintf(stderr, "roi-wait: pidfd_open %ld: %s\n", pid, strerror(errno));
            return 2;
        }
        fds[nfds++] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    double deadline = now() + seconds;
    if (region)
        roi_marker(ROI_BEGIN, 0);
    pid_t child = -1;
    int rc = 0;
    if (command) {
        int fd = start_command(argv + optind, nice_value, &child);
        if (fd < 0)
            rc = 2;
        else
            fds[nfds++] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    if (rc == 0 && !gone)
        rc = wait_for(fds, nfds, ctl, deadline);
    if (region)
        roi_marker(ROI_END, 0);
    if (child > 0)
        command_status(child, status_file);
    return rc;
}
