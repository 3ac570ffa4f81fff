/*
 * hook_floor: the no-op HTTP hook server of bench/hooks_session.py's
 * floor-http column. It answers every request `200` with an empty body at
 * once, so a session whose hooks post here costs the host its own HTTP
 * hook dispatch and nothing more.
 *
 * Listens on 127.0.0.1 (an ephemeral port, printed on stdout as one line),
 * serves each connection on its own thread, keeps connections alive
 * (HTTP/1.1), reads each request's body by its Content-Length, and exits
 * when its stdin reaches end of file, so it never outlives the bench that
 * started it.
 *
 * Build: cc -O2 -pthread -o hook_floor hook_floor.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 65536

static const char ANSWER[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

/* The Content-Length of the header block [head, end), 0 when absent. */
static long content_length(const char *head, const char *end) {
    const char *p = head;
    while (p < end) {
        const char *line_end = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!line_end)
            line_end = end;
        if ((size_t)(line_end - p) > 15 && strncasecmp(p, "content-length:", 15) == 0)
            return strtol(p + 15, NULL, 10);
        p = line_end + 2;
    }
    return 0;
}

static void *serve(void *arg) {
    int fd = (int)(long)arg;
    char *buf = malloc(BUF);
    size_t have = 0;
    if (!buf)
        goto done;
    for (;;) {
        char *head_end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
        if (!head_end) {
            if (have == BUF)
                goto done; /* headers larger than the buffer: not a hook */
            ssize_t n = read(fd, buf + have, BUF - have);
            if (n <= 0)
                goto done;
            have += (size_t)n;
            continue;
        }
        size_t head_len = (size_t)(head_end - buf) + 4;
        long body = content_length(buf, head_end);
        if (body < 0)
            goto done;
        /* Skip the body, whatever its size. */
        size_t in_buf = have - head_len;
        size_t left = (size_t)body;
        if (in_buf >= left) {
            memmove(buf, buf + head_len + left, in_buf - left);
            have = in_buf - left;
        } else {
            left -= in_buf;
            have = 0;
            while (left > 0) {
                ssize_t n = read(fd, buf, left < BUF ? left : BUF);
                if (n <= 0)
                    goto done;
                left -= (size_t)n;
            }
        }
        if (write(fd, ANSWER, sizeof ANSWER - 1) != (ssize_t)(sizeof ANSWER - 1))
            goto done;
    }
done:
    free(buf);
    close(fd);
    return NULL;
}

static void *watch_stdin(void *arg) {
    (void)arg;
    char c[256];
    while (read(0, c, sizeof c) > 0) {
    }
    exit(0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) {
        perror("socket");
        return 1;
    }
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(ls, 512) < 0) {
        perror("bind/listen");
        return 1;
    }
    socklen_t len = sizeof addr;
    if (getsockname(ls, (struct sockaddr *)&addr, &len) < 0) {
        perror("getsockname");
        return 1;
    }
    printf("%d\n", ntohs(addr.sin_port));
    fflush(stdout);
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, watch_stdin, NULL) != 0)
        return 1;
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(long)fd) != 0) {
            close(fd);
            continue;
        }
        pthread_detach(t);
    }
}
