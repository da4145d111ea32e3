/* netserver: a TCP server that answers each request with the number of bytes asked for, the
 * request-size study of seed 002 (responses from 10 B to 10 MB over persistent connections).
 *
 *   netserver [-p PORT] [-m MAX_BYTES]
 *
 * Listens on PORT (default 7000) on all addresses, one thread per connection. A request is a
 * line holding a decimal byte count N (1 <= N <= MAX_BYTES, default 16 MiB); the answer is
 * exactly N bytes. A connection serves requests until the client closes it. Runs until killed.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK (256 * 1024)

static char payload[CHUNK];
static long max_bytes = 16L << 20;

static int send_all(int fd, long n)
{
    while (n > 0) {
        ssize_t w = send(fd, payload, (size_t)(n < CHUNK ? n : CHUNK), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        n -= w;
    }
    return 0;
}

static void *serve(void *arg)
{
    int fd = (int)(long)arg;
    char line[64];
    size_t len = 0;
    for (;;) {
        char c;
        ssize_t r = recv(fd, &c, 1, 0);
        if (r <= 0)
            break;
        if (c != '\n') {
            if (len + 1 < sizeof line)
                line[len++] = c;
            continue;
        }
        line[len] = '\0';
        len = 0;
        char *end;
        long n = strtol(line, &end, 10);
        if (line[0] == '\0' || *end != '\0' || n < 1 || n > max_bytes)
            break; /* a bad request ends the connection */
        if (send_all(fd, n) != 0)
            break;
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    int port = 7000, opt;
    while ((opt = getopt(argc, argv, "p:m:")) != -1) {
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0' || v < 1) {
            fprintf(stderr, "netserver: bad value '%s' for -%c\n", optarg, opt);
            return 2;
        }
        if (opt == 'p' && v < 65536)
            port = (int)v;
        else if (opt == 'm')
            max_bytes = v;
        else {
            fprintf(stderr, "usage: netserver [-p PORT] [-m MAX_BYTES]\n");
            return 2;
        }
    }
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (char)('a' + i % 26);
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (ls < 0 || bind(ls, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(ls, 128) != 0) {
        fprintf(stderr, "netserver: cannot listen on port %d: %s\n", port, strerror(errno));
        return 1;
    }
    printf("netserver: listening on port %d\n", port);
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            perror("netserver: accept");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(long)fd) != 0) {
            close(fd);
            continue;
        }
        pthread_detach(t);
    }
}
